"""Fault suite, part A: one line and a documented exit code, never a traceback; bad data
from a server is rejected or marked invalid, never shown as ok."""

from __future__ import annotations

import json
import math
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.faulty_server import HTML_404, exposition, hostile
from helpers.inproc import run_main
from infertop.dialects import readings_from_exposition
from infertop.model import Sample, Snapshot, Status
from infertop.pipeline import Pipeline
from infertop.promtext import ParseError, parse
from infertop.rules.engine import Diagnoser

# infertop run as a program (CLI end to end, seconds each): `make test` runs them, the
# fast target keeps the in-process tests of the same behaviour
E2E = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, timeout: float = 120.0, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "infertop", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env=env, **kw)


def one_line(r: subprocess.CompletedProcess, code: int, *words: str) -> None:
    assert r.returncode == code, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("infertop"), r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


# ---- bad input from the user -----------------------------------------------------------
def test_demo_server_port_out_of_range_is_a_usage_error():
    r = run("demo-server", "--port", "99999")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].endswith("a TCP port is 0..65535, not 99999")


def test_demo_list_into_a_closed_pipe_is_quiet_and_exit_0():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "infertop", "demo", "--list"], cwd=ROOT,
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None   # both piped above
    p.stdout.close()   # the reader left before a line was written (`| head -0`)
    err = p.stderr.read()
    p.stderr.close()
    assert p.wait(60) == 0 and err == b"", err


def test_demo_list_into_head_is_exit_0():
    r = subprocess.run(f"{sys.executable} -m infertop demo --list | head -1", shell=True,
                       capture_output=True, text=True, cwd=ROOT, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.stdout.count("\n") == 1 and r.stderr == ""


@pytest.mark.parametrize("toml,key", [
    ("[diagnosis]\nevents_max = 99999999999999999999999999999\n", "diagnosis.events_max"),
    ("[thresholds]\nslo_min_requests = 1" + "0" * 400 + "\n", "thresholds.slo_min_requests"),
    ("[diagnosis]\nwindow = inf\n", "diagnosis.window"),
])
def test_an_overflowing_number_in_the_config_is_one_line(tmp_path, toml, key):
    # in this process: the config's errors end in main() like every UsageError (a bad
    # flag through a real `python -m infertop`: test_demo_server_port_out_of_range_...)
    cfg = tmp_path / "c.toml"
    cfg.write_text(toml)
    r = run_main("snapshot", "--json", "--config", str(cfg), "--source", "demo:healthy",
            "--window", "2")
    one_line(r, 2, key, "too large")
    assert r.stdout == ""


@pytest.fixture(scope="module")
def good_recording(tmp_path_factory):
    """Read only by the tests below: one recording for the module, made in this process
    (what `record` does as a program is tested in tests/test_recording.py)."""
    path = tmp_path_factory.mktemp("rec") / "ok.jsonl"
    r = run_main("record", "-o", str(path), "--source", "demo:healthy", "--duration", "3")
    assert r.returncode == 0, r.stderr
    return path


@pytest.mark.parametrize("samples", [[1, 2, 3], {"x": [1]}, {"x": {"readings": 5}}, "no"])
def test_a_recording_line_of_the_wrong_shape_is_one_line(tmp_path, good_recording, samples):
    # in this process (8 children cost ~10 s): the same main(), its code and its stderr;
    # the next test takes a bad recording through `python -m infertop` itself
    header, first = good_recording.read_text().splitlines()[:2]
    line = json.loads(first)
    line["samples"] = samples
    bad = tmp_path / "bad.jsonl"
    bad.write_text(header + "\n" + json.dumps(line) + "\n")
    for cmd in (["snapshot", "--json"], ["doctor"]):
        r = run_main(*cmd, "--source", f"replay:{bad}")
        one_line(r, 2, "corrupt")


def test_a_recording_with_a_word_for_its_time_is_one_line(tmp_path, good_recording):
    header, first = good_recording.read_text().splitlines()[:2]
    line = json.loads(first)
    line["time"] = "soon"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(header + "\n" + json.dumps(line) + "\n")
    one_line(run("snapshot", "--json", "--source", f"replay:{bad}"), 2, "no snapshot")


# ---- disk full while recording --------------------------------------------------------------
def test_record_to_a_full_disk_is_one_line(tmp_path):
    # /dev/full stood in for a full disk until record learnt to refuse devices (issue 22,
    # tests/test_safe_output.py); a file that may not grow at all is the full disk now
    def no_room():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1, 1))

    r = run("record", "-o", str(tmp_path / "r.jsonl"), "--source", "demo:healthy",
            "--duration", "3", preexec_fn=no_room)
    one_line(r, 2, "File too large", "nothing was recorded")


def test_record_that_runs_out_of_room_keeps_what_it_wrote(tmp_path, good_recording):
    out = tmp_path / "big.jsonl"
    limit = 3 * len(good_recording.read_bytes()) // 2   # room for the header and a few ticks

    def small_disk():   # the child may write `limit` bytes per file, then gets EFBIG
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    r = run("record", "-o", str(out), "--source", "demo:healthy", "--duration", "120",
            preexec_fn=small_disk)
    one_line(r, 2, "File too large", "written before are kept")
    kept = int(r.stderr.split("; the ")[1].split(" tick")[0])
    assert kept >= 2
    # what was written replays: every whole line, the cut-short last one dropped
    from infertop.probes.sources.replay import ReplaySource
    src = ReplaySource(out)
    assert len(src) == kept and src.truncated


# ---- a server that sends bad numbers ------------------------------------------------------
@E2E   # infertop run as a program for seconds
def test_record_of_nan_and_inf_histogram_buckets_marks_them_invalid(tmp_path):
    out = tmp_path / "nan.jsonl"
    with hostile("nanhist") as srv:
        r = run("record", "-o", str(out), "--url", srv.url, "--no-gpu", "--duration", "2")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    lines = out.read_text().splitlines()
    assert len(lines) >= 2
    snap = json.loads(lines[1])
    (ttft,) = [x for s in snap["samples"].values() for x in s["readings"]
               if x["key"] == "latency.ttft_seconds"]
    assert ttft["status"] == "error" and "invalid histogram" in ttft["reason"]
    assert "buckets" not in ttft and ttft["value"] is None


def _readings(text: str):
    return {(r.key, r.labels): r for r in readings_from_exposition(text, "x:1").readings}


def test_decreasing_buckets_and_nan_gauges_are_invalid_not_ok():
    text = """\
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 10
vllm:time_to_first_token_seconds_bucket{le="1.0",model_name="m"} 7
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 12
vllm:time_to_first_token_seconds_count{model_name="m"} 12
vllm:time_to_first_token_seconds_sum{model_name="m"} 3
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="m"} NaN
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 4
"""
    rs = {k: r for (k, _), r in _readings(text).items()}
    ttft = rs["latency.ttft_seconds"]
    assert ttft.status is Status.ERROR and ttft.buckets is None and ttft.value is None
    assert "bucket counts decrease (le=0.1: 10, le=1: 7)" in ttft.reason
    kv = rs["kv.usage_ratio"]
    assert kv.status is Status.ERROR and kv.value is None and "NaN" in kv.reason
    assert rs["server.requests_running"].status is Status.OK   # the rest of the page is fine


def test_a_page_with_a_duplicate_series_is_rejected_like_prometheus():
    with pytest.raises(ParseError, match=r'vllm:generation_tokens_total\{model_name="m"\} '
                                         r"appears twice"):
        parse(exposition(1, dup=True))
    # spelled differently (label order, `{}`): still the same series
    with pytest.raises(ParseError, match="appears twice"):
        parse('g{a="1",b="2"} 1\ng{b="2",a="1"} 1\n')
    with pytest.raises(ParseError, match="appears twice"):
        parse("g{} 1\ng 2\n")
    assert sum(len(f.samples) for f in parse('g{a="1"} 1\ng{a="2"} 1\n')) == 2


async def test_the_probe_reports_a_duplicate_page_as_an_error():
    from infertop.probes.server.metrics import ServerMetricsError, ServerMetricsProbe
    with hostile("dup") as srv:
        probe = ServerMetricsProbe(srv.url)
        await probe.open()
        try:
            with pytest.raises(ServerMetricsError, match="appears twice"):
                await probe.collect()
            srv.mode = "ok"
            assert (await probe.collect()).status is Status.OK
        finally:
            await probe.close()


def test_an_intermittent_duplicate_fakes_no_restart_and_no_rate():
    """Summed, a duplicate that comes and goes doubles the counter for a tick and then
    'drops' it: a fake restart (DEC-005) and a burst of token rate.  Rejected, the tick is
    a failed scrape and the counter stays monotonic."""
    diagnoser = Diagnoser()
    pipe = Pipeline(diagnoser)
    t0 = 1_000_000.0
    frame = None
    for n in range(30):
        text = exposition(n, dup=n in (10, 11, 20))
        try:
            rs = readings_from_exposition(text, "x:1").readings
            s = Sample("server:x:1", t0 + n, tuple(rs))
        except ParseError as e:
            s = Sample("server:x:1", t0 + n, (), Status.ERROR, str(e))
        frame = pipe.feed(Snapshot(t0 + n, {"server:x:1": s}))
        assert not any(f.code == "DEC-005" for f in frame.findings), frame.findings
        for r in frame.by_key("throughput.generation_tokens_per_second"):
            assert r.value is None or math.isclose(r.value, 100.0), r
    assert not any(e.code == "DEC-005" for e in diagnoser.events)


def test_a_404_html_page_is_a_short_clean_reason():
    from infertop.probes.server.metrics import _status_message
    msg = _status_message("http://127.0.0.1:9/metrics", 404, HTML_404.encode())
    assert msg.startswith("HTTP 404 from http://127.0.0.1:9/metrics: 404 Not Found")
    assert "<" not in msg and "padding" not in msg and "font" not in msg
    assert len(msg) < 300


async def test_the_probe_on_a_404_page_says_status_and_excerpt():
    from infertop.probes.server.metrics import ServerMetricsError, ServerMetricsProbe
    with hostile("404") as srv:
        probe = ServerMetricsProbe(srv.url)
        await probe.open()
        try:
            with pytest.raises(ServerMetricsError) as e:
                await probe.collect()
        finally:
            await probe.close()
    assert "HTTP 404" in str(e.value) and "Not Found" in str(e.value)
    assert "<" not in str(e.value)


# ---- the replay screen's `g` -----------------------------------------------------------------
@pytest.mark.parametrize("typed", ["abc", "nan", "inf", "1:x", "-5"])
def test_parse_time_rejects_words_and_non_finite(typed):
    from infertop.tui.screens.goto import parse_time
    with pytest.raises(ValueError, match="not a time"):
        parse_time(typed)


async def test_g_abc_in_replay_says_not_a_time_and_keeps_running(good_recording):
    from infertop.cli.main import build_parser, make_pipeline
    from infertop.probes.sources.replay import ReplaySource
    from infertop.tui.modes import ReplayApp
    from infertop.tui.options import AppOptions
    src = ReplaySource(good_recording)
    app = ReplayApp(src, pipeline=make_pipeline(build_parser().parse_args([])),
                    options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(120, 36)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        before = src.position
        await pilot.press("g", *"abc", "enter")
        await pilot.pause()
        assert app.screen.__class__.__name__ == "GotoScreen"
        assert "not a time: 'abc'" in str(app.screen.query_one("#goto-error").render())
        await pilot.press("escape")
        await pilot.pause()
        assert app.is_running and src.position == before

