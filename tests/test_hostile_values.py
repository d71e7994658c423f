"""Absurd values, deep nesting, corrupt recordings and malformed fleet answers (issue 22,
problems 1, 4, 5 and 6): each case as it crashed or misled, now one line or a value shown
as what it is.  The property suite (tests/test_props_*.py) hunts for more of them."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import time

import httpx
import pytest

from helpers.props import ListSource, check_frame_writers, feed, snapshot_of
from helpers.synthetic_source import SyntheticSource
from infertop.cli.main import main
from infertop.htmlreport import utc
from infertop.model import Status
from infertop.pipeline import Pipeline
from infertop.probes.prometheus import client as prom_client
from infertop.probes.prometheus.client import PrometheusClient, PrometheusError
from infertop.probes.prometheus.source import PrometheusSource
from infertop.probes.server.metrics import ServerMetricsProbe
from infertop.probes.sources import recording_file
from infertop.probes.sources.replay import ReplaySource
from infertop.report import render_report
from infertop.rules.engine import Diagnoser
from infertop.units import fmt_value


# ---- problem 1: one absurd value -------------------------------------------------------------
def page_frame(page: str, ticks: int = 3):
    probe = ServerMetricsProbe("http://127.0.0.1:8000")
    base = SyntheticSource(gpus=1, server=False)
    snaps = []
    for i in range(ticks):
        snap = asyncio.run(base.next())
        readings, meta = probe._map(page, {})
        from infertop.probes.base import sample
        srv = sample(probe.name, readings, meta=meta, now=snap.time)
        snaps.append(snapshot_of(snap.time, i + 1, [*snap.samples.values(), srv]))
    source, pipeline = ListSource(snaps), Pipeline(Diagnoser())
    return feed(source, pipeline), pipeline, source


def test_two_engines_at_float_max_go_through_every_writer():
    """The sum 1.7e308 + 1.7e308 is inf: rules/engine.py -> findings._fmt -> round(inf)
    raised OverflowError and the screen and doctor exited 1 with a traceback."""
    page = ("# TYPE vllm:num_requests_waiting gauge\n"
            'vllm:num_requests_waiting{engine="0x",model_name="m"} 1.7e308\n'
            'vllm:num_requests_waiting{engine="1x",model_name="m"} 1.7e308\n')
    frame, pipeline, source = page_frame(page)
    waiting = [r for r in frame.snapshot.readings("server.requests_waiting")]
    assert len(waiting) == 2 and all(r.value == 1.7e308 for r in waiting)
    check_frame_writers(frame, pipeline, source, "regression")   # panes, JSON, doctor


def test_one_engine_summed_past_float_max_is_an_error_reading():
    """The same engine's series summed by the dialect (two model names): inf, no number."""
    page = ("# TYPE vllm:prompt_tokens_total counter\n"
            'vllm:prompt_tokens_total{engine="0",model_name="a",x="1"} 1.7e308\n'
            'vllm:prompt_tokens_total{engine="0",model_name="a",x="2"} 1.7e308\n')
    frame, pipeline, source = page_frame(page)
    (waiting,) = frame.snapshot.readings("server.prompt_tokens_total")
    assert waiting.status is Status.ERROR and "overflows" in waiting.reason, waiting
    check_frame_writers(frame, pipeline, source, "regression")
    assert "Traceback" not in render_report(frame.findings, frame.layers(), "text", {})


def test_a_negative_kv_ratio_is_an_error_not_minus_inf_percent():
    page = ("# TYPE vllm:kv_cache_usage_perc gauge\n"
            'vllm:kv_cache_usage_perc{engine="0",model_name="m"} -1e308\n')
    frame, pipeline, source = page_frame(page)
    kv = list(frame.snapshot.readings("kv.usage_ratio"))
    assert kv and kv[0].status is Status.ERROR and "outside 0..1" in kv[0].reason
    check_frame_writers(frame, pipeline, source, "regression")


def test_values_at_the_limits_are_shown_as_such():
    assert fmt_value(1.7e308, "count") == "1.7e+308 count"    # was 309 digits
    assert fmt_value(-1e308, "ratio") == "-1e+308 ratio"       # was "-inf %"
    assert fmt_value(float("inf"), "s") == "inf"
    assert fmt_value(float("-inf"), "bytes") == "-inf"
    assert fmt_value(float("nan"), "W") == "NaN"
    assert fmt_value(123.0, "count") == "123"                   # ordinary values unchanged
    assert fmt_value(0.5, "ratio") == "50 %"


def test_evidence_of_an_overflowed_sum_is_inf_not_overflow_error():
    """rules/engine.py summed two engines' 1.7e308 to inf; findings._fmt -> units
    round(inf) raised OverflowError: a 2,737-line traceback from the screen and doctor."""
    from infertop.findings import Evidence
    ev = Evidence("server.requests_waiting", (("engine", "0x"),), float("inf"), 16.0, ">=",
                  "count")
    assert ev.describe() == "server.requests_waiting{engine=0x} inf >= 16"


def test_utc_of_an_absurd_time_is_a_dash():
    assert utc(1e308) == "–" and utc(float("nan")) == "–"


# ---- recordings ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def good(tmp_path_factory):
    path = tmp_path_factory.mktemp("rec") / "good.jsonl"
    with contextlib.redirect_stderr(io.StringIO()):
        assert main(["record", "-o", str(path), "--source", "demo:healthy",
                     "--duration", "4"]) == 0
    return path


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def with_lines(good, tmp_path, edit) -> str:
    header, *lines = good.read_bytes().splitlines()
    path = tmp_path / "edited.jsonl"
    path.write_bytes(b"\n".join([header, *edit(lines)]) + b"\n")
    return str(path)


def every_reading(line: bytes, key: str, value) -> bytes:
    snap = json.loads(line)
    for s in snap["samples"].values():
        for r in s["readings"]:
            if r["key"] == key:
                r["value"] = value
    return json.dumps(snap).encode()


@pytest.mark.parametrize("value", [1e308, -1e308, "NaN", "+Inf", 1.7e308])
def test_recordings_with_values_at_the_limits_report_and_compare(good, tmp_path, value):
    """ValueError in compare.block_length; report and replay doctor crashed too."""
    values = iter([value, -1e308 if value == 1e308 else 1e308, value, 5.0, value, value])
    bad = with_lines(good, tmp_path, lambda ls: [
        every_reading(every_reading(line, "gpu.util_ratio", next(values)),
                      "server.requests_running", value) for line in ls])
    for argv in (["report", bad, "-o", "-"], ["report", bad, "--format", "markdown"],
                 ["compare", str(good), bad], ["compare", bad, bad, "--format", "json"],
                 ["doctor", "--source", f"replay:{bad}"]):
        rc, out, err = run(*argv)
        assert rc in (0, 1), (argv, rc, err)
        assert not any(len(w) > 30 and w.isdigit() for w in out.split()), argv


def test_a_recording_time_of_1e308_is_an_unreadable_line(good, tmp_path):
    def edit(lines):
        snap = json.loads(lines[1])
        snap["time"] = 1e308
        return [lines[0], json.dumps(snap).encode(), *lines[2:]]
    bad = with_lines(good, tmp_path, edit)
    rc, out, err = run("report", bad, "-o", "-")
    assert rc == 0, err
    assert "1 of" in out and "snapshot lines unreadable" in out


@pytest.mark.parametrize("argv", [["report", "{bad}", "-o", "-"], ["compare", "{bad}", "{bad}"],
                                  ["doctor", "--source", "replay:{bad}"],
                                  ["snapshot", "--json", "--source", "replay:{bad}"]])
def test_deeply_nested_json_is_a_corrupt_line_not_a_recursion_error(good, tmp_path, argv):
    """One 400 KB line of "[" killed report, compare, doctor and replay with RecursionError."""
    deep = b"[" * 400_000
    bad = with_lines(good, tmp_path, lambda ls: [ls[0], deep, *ls[1:]])
    rc, out, err = run(*[a.format(bad=bad) for a in argv])
    assert rc in (0, 1), err
    src = ReplaySource(bad)
    assert src.skipped == 1 and len(src) == len(good.read_bytes().splitlines()) - 1
    # the same inside a snapshot line (its time read first, then parsing fails)
    bad2 = with_lines(good, tmp_path, lambda ls: [ls[0][:-1] + b',"x":' + deep + b"}",
                                                  *ls[1:]])
    rc, out, err = run(*[a.format(bad=bad2) for a in argv])
    assert rc in (0, 1), err


@pytest.mark.parametrize("argv", [["report", "{bad}", "-o", "-"], ["compare", "{bad}", "{bad}"],
                                  ["compare", "{good}", "{bad}", "--format", "json"],
                                  ["doctor", "--source", "replay:{bad}"]])
def test_a_recording_whose_every_line_is_corrupt_is_exit_2(good, tmp_path, argv):
    """It read healthy: exit 0, "No finding was raised"; compare exited 0 on 0 ticks."""
    bad = with_lines(good, tmp_path, lambda ls: [
        json.dumps({"time": 1767225601.0 + i, "samples": {"x": i}}).encode()
        for i in range(len(ls))])
    rc, out, err = run(*[a.format(bad=bad, good=good) for a in argv])
    n = len(good.read_bytes().splitlines()) - 1
    assert rc == 2 and out == "", (rc, err)
    assert err.count("\n") == 1 and f"{n} of {n} snapshot lines unreadable" in err, err


def test_bad_lines_are_one_counted_note(good, tmp_path):
    """50,000 bad lines made a 7.1 MB report: one note each."""
    bad = with_lines(good, tmp_path, lambda ls: [
        *ls, *(json.dumps({"time": 1767226000.0 + i, "samples": [i]}).encode()
               for i in range(5000))])
    rc, out, err = run("report", bad, "-o", "-")
    assert rc == 0, err
    assert "5000 of" in out and out.count("corrupt snapshot line") <= 1
    assert len(out) < 200_000


def test_runs_of_blank_lines_are_skipped_without_a_turn_per_line(good, tmp_path, monkeypatch):
    """1.3 GB of blank lines kept snapshot busy for over a minute: one Python call a line."""
    calls = []
    real = recording_file.RecordingFile._add_line

    def counted(self: recording_file.RecordingFile, buf: bytearray, start: int, *,
                last: bool) -> None:
        calls.append(1)
        real(self, buf, start, last=last)
    monkeypatch.setattr(recording_file.RecordingFile, "_add_line", counted)
    n = len(good.read_bytes().splitlines()) - 1
    bad = with_lines(good, tmp_path, lambda ls: [b"\n  \r" * 2_000_000 + ls[0], *ls[1:]])
    src = ReplaySource(bad)
    assert len(src) == n and len(calls) <= n + 20   # a few at block ends; was 2M
    rc, out, err = run("snapshot", "--json", "--source", f"replay:{bad}")
    assert rc in (0, 1, 3), err


# ---- problem 5: fleet answers ----------------------------------------------------------------
TARGETS = {"status": "success", "data": {"activeTargets": [
    {"labels": {"instance": "10.0.0.1:8000", "job": "server", "node": "n1"},
     "scrapeUrl": "http://10.0.0.1:8000/metrics", "health": "up",
     "lastScrape": "2026-12-01T11:00:00.5Z", "scrapeInterval": "15s"}]}}


def answer(series) -> dict:
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": m, "value": [1.0, "3"]} for m in series]}}


def prom(series, targets=TARGETS) -> httpx.MockTransport:
    def handle(req: httpx.Request) -> httpx.Response:
        if req.url.path.endswith("/targets"):
            return httpx.Response(200, json=targets)
        if "DCGM" in req.content.decode():
            return httpx.Response(200, json=answer([]))
        return httpx.Response(200, json=answer(series))
    return httpx.MockTransport(handle)


@pytest.mark.parametrize("bad", [["a", "b"], {"x": "y"}, None, 7])
def test_a_label_value_that_is_not_a_string_drops_the_series(bad):
    """TypeError in source.py and dialects.py crashed doctor, snapshot and the screen."""
    series = [{"__name__": "vllm:num_requests_running", "instance": "10.0.0.1:8000",
               "node": "n1", "model_name": bad, "engine": "0"},
              {"__name__": "vllm:num_requests_waiting", "instance": "10.0.0.1:8000",
               "node": "n1", "model_name": "m", "engine": "0"}]

    async def go():
        src = PrometheusSource("http://prom:9090", transport=prom(series))
        await src.start()
        snap = await src.next()
        await src.stop()
        return snap
    snap = asyncio.run(go())
    keys = {r.key for r in snap.readings()}
    assert "server.requests_waiting" in keys and "server.requests_running" not in keys


def test_instance_null_everywhere_says_what_was_wrong():
    targets = {"status": "success", "data": {"activeTargets": [
        {"labels": {"instance": None, "job": "server"}, "health": "up"}]}}
    series = [{"__name__": "vllm:num_requests_running", "instance": None}]

    async def go():
        src = PrometheusSource("http://prom:9090", transport=prom(series, targets))
        await src.start()
        snap = await src.next()
        await src.stop()
        return snap
    snap = asyncio.run(go())
    (s,) = snap.samples.values()
    assert s.status is Status.ERROR and "no usable series" in s.reason


def test_a_20000_character_label_is_capped():
    series = [{"__name__": "vllm:num_requests_running", "instance": "10.0.0.1:8000",
               "model_name": "m" * 20_000}]

    async def go():
        c = PrometheusClient("http://prom:9090", transport=prom(series))
        got = await c.query("x")
        await c.close()
        return got
    ((labels, value),) = asyncio.run(go())
    assert len(labels["model_name"]) == prom_client.MAX_LABEL_VALUE and value == 3.0


def test_too_many_series_are_refused_before_parsing_and_say_the_cap():
    cap = prom_client.MAX_SERIES
    body = b'{"status":"success","data":{"resultType":"vector","result":[' + b",".join(
        b'{"metric":{"i":"%d"},"value":[1,"1"]}' % i for i in range(cap + 1)) + b"]}}"
    parsed = []

    def handle(req):
        return httpx.Response(200, content=body)

    async def go():
        c = PrometheusClient("http://prom:9090", transport=httpx.MockTransport(handle))
        try:
            await c.query("x")
        finally:
            await c.close()
    real = prom_client._ENVELOPE   # the answer's first decode (msgspec): spied on

    class Spy:
        def decode(self, b):
            parsed.append(1)
            return real.decode(b)
    prom_client._ENVELOPE = Spy()  # type: ignore[assignment]  # a spy in the decoder's place
    try:
        with pytest.raises(PrometheusError, match=f"more than infertop's cap of {cap}"):
            asyncio.run(go())
    finally:
        prom_client._ENVELOPE = real
    assert parsed == []   # refused on the raw body: 390k series cost 808 MB parsed


def test_a_hung_prometheus_is_asked_once_per_timeout_not_once_per_tick():
    """doctor --duration 6 against a hung Prometheus took 29 s: every tick waited out a
    timeout.  Counted in requests, not seconds (a busy box is slow, not wrong)."""
    from infertop.cli.sources import sample_window
    from infertop.config import load_config
    from infertop.fleet import FleetPipeline, diagnoser_factory
    asked = []

    async def hang(req):
        asked.append(req.url.path)
        await asyncio.sleep(30)

    async def go():
        src = PrometheusSource("http://prom:9090", timeout=0.3,
                               transport=httpx.MockTransport(hang))
        pipe = FleetPipeline(diagnoser_factory(load_config(None)))
        started = time.monotonic()
        frame = await sample_window(src, pipe, 1.0, 0.1)
        return frame, time.monotonic() - started
    frame, took = asyncio.run(go())
    assert frame is not None and not frame.sources_ok()
    # 12 ticks in the window: before, 12 requests of 0.6 s each
    assert len(asked) <= 3, asked
    assert took < 6, took


# ---- settings --------------------------------------------------------------------------------
def test_a_config_path_too_long_for_the_file_system_is_one_line():
    """Found by the property suite: Path.is_file raised OSError (ENAMETOOLONG)."""
    rc, out, err = run("snapshot", "--json", "--config", "m" * 4000)
    assert rc == 2 and err.count("\n") == 1 and "cannot read" in err, err
