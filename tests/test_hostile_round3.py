"""Issue 36 (round 3 of hostile input), the cases of the "hostile" branch: 2, 3, 4, 8, 9,
11, 12 and 13 (less the KV ones).  Each test reproduced its case before the fix."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json

import pytest
from test_markdown_inert import assert_inert_markdown

from helpers.props import (
    ListSource,
    check_frame_writers,
    feed,
    render_panes,
    snapshot_of,
)
from helpers.snapkit import must
from helpers.synthetic_source import SyntheticSource
from infertop.cli.main import main
from infertop.pipeline import Pipeline
from infertop.probes.base import sample
from infertop.probes.server.metrics import ServerMetricsProbe
from infertop.prom_findings import alert_finding
from infertop.report import render_report
from infertop.rules.engine import Diagnoser
from infertop.units import sparkline


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


# ---- case 2: markdown injection through a Prometheus alertname -----------------------------
def test_an_alertname_with_html_is_inert_in_the_doctors_markdown():
    evil = "<img src=x onerror=alert(1)>"
    alert = {"labels": {"alertname": evil, "severity": "crit", "layer": "memory"},
             "annotations": {"title": "t"}, "state": "firing", "active_at": 1000.0}
    f = alert_finding(alert, "node-a", 1010.0)
    assert f is not None and f.code == evil
    out = render_report([f], {}, "markdown", {"now": 1010.0})
    shown = assert_inert_markdown(out)
    assert evil in shown


# ---- case 3: a rate of ±inf on the live screen --------------------------------------------
@pytest.mark.parametrize("values", [[1.0, float("inf"), 2.0], [float("-inf"), 0.0, float("inf")],
                                    [-1.7e308, 1.7e308, -1.7e308, 0.0]])
def test_a_sparkline_with_inf_or_the_float_limits_is_drawn(values):
    line = sparkline(values, 8)
    assert line and len(line) == sum(1 for v in values if abs(v) != float("inf"))


def test_a_counter_flipping_between_the_float_limits_reaches_every_writer():
    """A page whose counter flips between -1.7e308 and 1.7e308, through every writer (the
    sparkline cases above reproduced the crash; this one keeps the whole path honest)."""
    probe = ServerMetricsProbe("http://127.0.0.1:8000")
    base = SyntheticSource(gpus=1, server=False)
    snaps = []
    for i in range(8):
        snap = asyncio.run(base.next())
        page = ("# TYPE vllm:generation_tokens counter\n"
                f'vllm:generation_tokens_total{{engine="0",model_name="m"}} '
                f'{1.7e308 if i % 2 else -1.7e308}\n'
                "# TYPE vllm:num_requests_running gauge\n"
                'vllm:num_requests_running{engine="0",model_name="m"} 1\n')
        readings, meta = probe._map(page, {})
        srv = sample(probe.name, readings, meta=meta, now=snap.time)
        snaps.append(snapshot_of(snap.time, i + 1, [*snap.samples.values(), srv]))
    source, pipeline = ListSource(snaps), Pipeline(Diagnoser())
    frame = must(feed(source, pipeline), "a frame")
    check_frame_writers(frame, pipeline, source, "regression")
    assert render_panes(frame)


# ---- case 12: ±inf in compare's JSON, an alert time of 1e308 in doctor ---------------------
def test_an_alert_time_of_1e308_is_a_dash_not_a_crash():
    alert = {"labels": {"alertname": "MEM-001", "severity": "warn"}, "state": "firing",
             "active_at": 1e308, "annotations": {}}
    f = alert_finding(alert, "node-a", 1000.0)
    assert f is not None
    for fmt in ("text", "markdown", "json"):
        out = render_report([f], {}, fmt, {"now": 1000.0})
        assert "MEM-001" in out
    assert "since    –" in render_report([f], {}, "text", {})


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    path = tmp_path_factory.mktemp("rec") / "good.jsonl"
    with contextlib.redirect_stderr(io.StringIO()):
        assert main(["record", "-o", str(path), "--source", "demo:healthy",
                     "--duration", "6"]) == 0
    return path


def with_reading(good, path, key: str, value: float) -> str:
    header, *lines = good.read_bytes().splitlines()
    out = [header]
    for line in lines:
        snap = json.loads(line)
        for s in snap["samples"].values():
            for r in s["readings"]:
                if r["key"] == key:
                    r["value"] = value
        out.append(json.dumps(snap).encode())
    path.write_bytes(b"\n".join(out) + b"\n")
    return str(path)


def test_compare_json_of_a_change_past_the_float_limit(good, tmp_path):
    """Medians -1.7e308 before and 1.7e308 after: the change is inf (ValueError before)."""
    low = with_reading(good, tmp_path / "low.jsonl", "gpu.util_ratio", -1.7e308)
    high = with_reading(good, tmp_path / "high.jsonl", "gpu.util_ratio", 1.7e308)
    rc, out, err = run("compare", low, high, "--format", "json")
    assert rc in (0, 1), err
    doc = json.loads(out)
    moved = {m["key"]: m for m in doc["moved"]}
    assert moved["gpu.util_ratio"]["delta"] == "+Inf"


# ---- case 9: a NaN ratio raises nothing ----------------------------------------------------
def test_refusals_summed_past_the_float_limit_raise_no_dec_007():
    """Two refusal reasons each 1.7e308 up in the window: refused = inf, total = inf,
    the ratio NaN, and DEC-007 said "nan% of requests refused" (exit 2) before."""
    from helpers.rulekit import Feed
    feed_ = Feed()
    state = {"i": 0, "stop": 0.0}

    def make():
        state["stop"] += 100
        state["i"] += 1
        refused = 0.0 if state["i"] < 70 else 1.7e308
        return {"server.requests_finished_total": {"engine=0,model=m,reason=stop": state["stop"]},
                "server.requests_running": {"engine=0,model=m": 4},
                "server.admission_rejections_total": {
                    "model=m,reason=max_num_queued_reqs": refused,
                    "model=m,reason=max_num_queued_tokens": refused}}
    feed_.run(make, 99)
    from helpers.rulekit import tick
    frame = feed_.pipe.feed(tick(feed_.t, make()))
    assert [f.code for f in frame.findings if f.code == "DEC-007"] == []
    assert feed_.events("DEC-007", "raised") == []
    (ratio,) = [r for r in frame.derived if r.key == "server.rejection_ratio"]
    assert ratio.value is None and "overflow" in ratio.reason, ratio


# ---- case 11: rules promtool-input under the recordings' caps ------------------------------
def _retimed(good, path, times=None, interval=None) -> str:
    header, *lines = good.read_bytes().splitlines()
    head = json.loads(header)
    if interval is not None:
        head["interval"] = interval
    out = [json.dumps(head).encode()]
    for i, line in enumerate(lines):
        snap = json.loads(line)
        if times is not None:
            snap["time"] = times(i)
        out.append(json.dumps(snap).encode())
    path.write_bytes(b"\n".join(out) + b"\n")
    return str(path)


@pytest.mark.parametrize("times,interval", [(lambda i: i * 6e9, None),     # 1970 .. ~3000
                                            (None, 1e-9), (None, 1e300)])
def test_promtool_input_refuses_a_grid_past_its_budget_in_one_line(good, tmp_path, times,
                                                                  interval):
    """A few lines spanning 1970-3000, or an interval of 1e-9 s: a grid of 3e10 steps
    (MemoryError before); now one line and exit 2, before a snapshot is decoded."""
    bad = _retimed(good, tmp_path / "span.jsonl", times, interval)
    rc, out, err = run("rules", "promtool-input", bad)
    assert rc == 2 and out == "", (rc, err)
    # an interval past a day is refused by the typed header first (recording.Header's
    # range); a span of 1970-3000 by the grid budget
    assert len(err.strip().splitlines()) == 1, err
    assert "grid step" in err or ("recording header" in err and "interval" in err), err


def test_promtool_input_streams_a_gzip_bomb_under_the_replay_caps(tmp_path):
    """A few good lines, then 200 MB of 'x' in ~200 KB of gzip: read under the replay's
    ratio cap (the whole-file decode took 1.36 GB on the issue's bomb)."""
    import tracemalloc
    import zlib
    header = {"format": "infertop-recording", "schema": 1, "host": "h", "source": {},
              "interval": 1.0}
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [z.compress(json.dumps(header).encode() + b"\n")]
    parts += [z.compress(json.dumps({"time": 1000.0 + i, "tick": i + 1, "samples": {},
                                     "capabilities": {}}).encode() + b"\n") for i in range(3)]
    parts += [z.compress(b"x" * 1_000_000) for _ in range(200)]
    parts.append(z.flush())
    path = tmp_path / "bomb.jsonl.gz"
    path.write_bytes(b"".join(parts))
    tracemalloc.start()
    try:
        rc, out, err = run("rules", "promtool-input", str(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert rc == 2 and "no server or GPU readings" in err, err
    assert peak < 60_000_000, peak   # one line in the making at most (16 MB cap)


def test_promtool_input_of_a_good_recording_still_converts(good, tmp_path):
    # the streamed conversion (a recording too short to judge: the input series alone)
    rc, out, err = run("rules", "promtool-input", str(good), "--no-asserts")
    assert rc == 0, err
    assert "input_series:" in out and "DCGM_FI_DEV_GPU_UTIL" in out
    # without --no-asserts, a test that would assert nothing is refused in one line
    rc, out, err = run("rules", "promtool-input", str(good))
    assert rc == 2 and out == "" and "assert nothing" in err and len(err.splitlines()) == 1


# ---- case 4 and item 3: every config value in a range, the export checked by promtool -------
def _config_file(tmp_path, text: str) -> str:
    path = tmp_path / "c.toml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("text,key", [
    ("[thresholds]\nttft_fit_windows = 1000000000000000\n", "thresholds.ttft_fit_windows"),
    ("[diagnosis]\nwindow = 1e15\n", "diagnosis.window"),
    ("[diagnosis]\nwindow = 1e-300\n", "diagnosis.window"),
    ("[diagnosis]\nevents_max = 999999999\n", "diagnosis.events_max"),
    ("[rules.MEM-002]\nraise_after = 1e14\n", "rules.MEM-002.raise_after"),
    ('[thresholds]\nerror_reasons = ["' + "x" * 500_000 + '"]\n', "thresholds.error_reasons"),
    ('[thresholds]\nkv_pressure_ratio = "' + "x" * 500_000 + '"\n',
     "thresholds.kv_pressure_ratio"),
    ('[thresholds]\nerror_reasons = ["' + "x" * 10_000_000 + '"]\n', "larger than 1024 KiB"),
])
def test_a_config_value_out_of_its_range_is_one_short_line(tmp_path, text, key):
    """ttft_fit_windows = 1e15 passed and rules/kernels.py built a list that long every
    tick (killed at 3.8 GB); window = 1e15 or 1e-300 made an export promtool rejects; a
    10 MB error reason was an export too, and a bad value was echoed whole."""
    rc, out, err = run("rules", "export", "--config", _config_file(tmp_path, text))
    assert rc == 2 and out == "", err
    assert len(err.splitlines()) == 1 and key in err and len(err) < 1000, err[:2000]


def test_every_default_is_inside_its_range():
    from dataclasses import fields

    from infertop.config import SECTIONS, value_range
    for section, cls in SECTIONS.items():
        for f in fields(cls):
            got = value_range(f"{section}.{f.name}", f.metadata["kind"])
            if got is not None and isinstance(f.default, (int, float)):
                assert got[0] <= f.default <= got[1], (section, f.name)
                assert got[2], (section, f.name)   # every range says why


def _extreme_config(end: int) -> dict:
    """Every number at the low (end 0) or high (end 1) end of its range."""
    from dataclasses import fields

    from infertop.config import SECTIONS, value_range
    out: dict = {}
    for section, cls in SECTIONS.items():
        for f in fields(cls):
            got = value_range(f"{section}.{f.name}", f.metadata["kind"])
            if got is None or f.metadata["kind"] in ("codes", "strings", "bool"):
                continue
            v = got[end]
            out.setdefault(section, {})[f.name] = int(v) if f.metadata["kind"] == "count" \
                else float(v)
    out["thresholds"]["gil_cpu_min"] = out["thresholds"]["gil_cpu_max"]
    return out


@pytest.mark.parametrize("end", [0, 1])
def test_promtool_accepts_the_export_of_every_value_at_the_ends_of_its_range(end):
    from helpers.promtool_kit import PROMTOOL_HINT, promtool_binary
    from infertop.config import config_from_dict
    from infertop.promrules import export_text
    if promtool_binary() is None:
        pytest.skip(PROMTOOL_HINT)
    import subprocess
    import tempfile
    text = export_text(config_from_dict(_extreme_config(end)))
    promtool = promtool_binary()
    assert promtool is not None   # skipped above without it
    with tempfile.NamedTemporaryFile("w", suffix=".yml") as fh:
        fh.write(text)
        fh.flush()
        check = subprocess.run([promtool, "check", "rules", fh.name],
                               capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr


def test_an_export_promtool_rejects_is_not_written(tmp_path, monkeypatch):
    fake = tmp_path / "promtool"
    fake.write_text("#!/bin/sh\necho \"  FAILED:\"\necho \"$3: 12:5: group x: bad range\" >&2\n"
                    "exit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("INFERTOP_PROMTOOL", str(fake))
    out = tmp_path / "rules.yml"
    rc, _, err = run("rules", "export", "-o", str(out))
    assert rc == 2 and not out.exists(), err
    assert "promtool rejects" in err and "bad range" in err and len(err.splitlines()) == 1


def test_a_50000_deep_toml_array_is_one_line(tmp_path):
    rc, _, err = run("rules", "export", "--config",
                     _config_file(tmp_path, "x = " + "[" * 50_000 + "]" * 50_000 + "\n"))
    assert rc == 2 and len(err.splitlines()) == 1 and "nested too deep" in err, err[:500]


# ---- case 8 and item 6: secrets of --prometheus and --url -----------------------------------
PROM_PASS = "s3cret-prom-pass-8"


@pytest.fixture
def fake_prometheus():
    """A loopback stand-in for Prometheus' API that notes each Authorization header."""
    import http.server
    import threading
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):   # noqa: N802 (http.server's name)
            seen.append(self.headers.get("Authorization", ""))
            path = self.path.split("?", 1)[0]
            data: dict = {"resultType": "vector", "result": []}
            if path.endswith("/targets"):
                data = {"activeTargets": []}
            elif path.endswith("/rules"):
                data = {"groups": []}
            elif path.endswith("/alerts"):
                data = {"alerts": []}
            body = json.dumps({"status": "success", "data": data}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_a_prometheus_password_is_sent_never_shown(fake_prometheus, fmt):
    """doctor printed the password of --prometheus http://user:password@... (text, JSON)."""
    hostport, seen = fake_prometheus
    rc, out, err = run("doctor", "--prometheus", f"http://alice:{PROM_PASS}@{hostport}",
                       "--duration", "1", "--format", fmt)
    assert PROM_PASS not in out + err, (out + err)[:3000]
    import base64
    assert f"Basic {base64.b64encode(f'alice:{PROM_PASS}'.encode()).decode()}" in seen, seen
    assert hostport in out + err     # the URL is still named, without its secret


def test_an_unreachable_prometheus_error_holds_no_password():
    from helpers.prom_fleet import free_port
    rc, out, err = run("doctor", "--prometheus",
                       f"http://alice:{PROM_PASS}@127.0.0.1:{free_port()}", "--duration", "1")
    assert rc == 3 and PROM_PASS not in out + err, err


def test_a_bad_port_with_a_password_is_one_line_without_it():
    rc, out, err = run("doctor", "--prometheus", f"http://alice:{PROM_PASS}@127.0.0.1:99999")
    assert rc == 2 and PROM_PASS not in err and "bad port" in err, err


def test_prometheus_credentials_from_a_bearer_token_file(fake_prometheus, tmp_path,
                                                          monkeypatch):
    """Prometheus' bearer_token_file convention: the secret never on the command line."""
    hostport, seen = fake_prometheus
    token = tmp_path / "token"
    token.write_text("tok-from-file-77\n")
    monkeypatch.setenv("INFERTOP_PROMETHEUS_BEARER_TOKEN_FILE", str(token))
    rc, out, err = run("doctor", "--prometheus", f"http://{hostport}", "--duration", "1")
    assert "Bearer tok-from-file-77" in seen and "tok-from-file-77" not in out + err


def test_credentials_settings_that_cannot_be_used_are_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERTOP_PROMETHEUS_PASSWORD_FILE", str(tmp_path / "missing"))
    rc, _, err = run("doctor", "--prometheus", "http://127.0.0.1:9", "--duration", "1")
    assert rc == 2 and "INFERTOP_PROMETHEUS_PASSWORD_FILE" in err and \
        len(err.splitlines()) == 1, err


def test_credentials_from_env_and_url_never_show_in_a_repr():
    from infertop.credentials import Credentials, from_env, split_url
    url, cred = split_url(f"https://bob:{PROM_PASS}@prom.example:9090/p")
    assert url == "https://prom.example:9090/p" and PROM_PASS not in repr(cred) + str(cred)
    assert from_env("X_", {"X_USERNAME": "u", "X_PASSWORD": "p"}) == Credentials("u", "p")
    assert from_env("X_", {}) is None


def test_a_server_url_password_is_sent_as_basic_auth():
    from infertop.probes.server.metrics import ServerMetricsProbe
    probe = ServerMetricsProbe(f"http://alice:{PROM_PASS}@127.0.0.1:8000")
    assert PROM_PASS not in probe.url + probe.name
    assert asyncio.run(probe.open()).available
    try:
        assert probe._client is not None
        sent = dict(probe._client._headers)
        import base64
        assert sent[b"Authorization"] == \
            f"Basic {base64.b64encode(f'alice:{PROM_PASS}'.encode()).decode()}".encode()
    finally:
        asyncio.run(probe.close())


# ---- case 13: 309-digit numbers in finding text and the peaks' "how" -----------------------
def _no_long_number(text: str) -> None:
    import re
    assert not re.search(r"\d{20,}", text), text


def _findings_text(data: dict, ticks: int = 40) -> str:
    from helpers.rulekit import Feed
    feed_ = Feed()
    feed_.run(lambda: data, ticks)
    return "\n".join(f"{f.code} {f.title} " + " ".join(e.describe() for e in f.evidence)
                     for f in feed_.findings)


def test_sch_006_at_the_float_limit_has_no_309_digit_number():
    text = _findings_text({"server.sleep_level": {"engine=0,model=m": 1e308},
                           "server.requests_waiting": {"engine=0,model=m": 1e308},
                           "server.requests_running": {"engine=0,model=m": 0}})
    assert "SCH-006" in text and "1e+308" in text
    _no_long_number(text)


def test_sch_002_at_the_float_limit_has_no_309_digit_number():
    text = _findings_text({"server.requests_waiting": {"engine=0,model=m": 1e308},
                           "server.requests_running": {"engine=0,model=m": 8},
                           "kv.usage_ratio": {"engine=0,model=m": 0.3},
                           "gpu.sm_active_ratio": {"gpu=0": 0.25, "gpu=1": 0.25},
                           "server.setting": {"name=max_num_seqs": "8"}})
    assert "SCH-002" in text and "1e+308 waiting now" in text
    _no_long_number(text)


def test_peaks_of_a_bus_width_at_the_float_limit_say_it_shortly():
    from infertop.peaks import peak_bandwidth, peak_flops
    _no_long_number(peak_bandwidth("x", bus_width_bits=1e308, mem_clock_max_hz=1.7e308).how)
    _no_long_number(peak_flops("NVIDIA H100 80GB HBM3-unknown", compute_capability="9.0",
                               cuda_cores=1e308, sm_clock_max_hz=1e308).how)


def test_a_valid_252_byte_file_name_of_4_byte_characters_is_written(tmp_path):
    """The temporary name kept 100 characters of it (400 bytes): ENAMETOOLONG before."""
    name = "\U0001f980" * 63   # 252 bytes in UTF-8, under NAME_MAX (255)
    out = tmp_path / name
    rc, _, err = run("rules", "export", "-o", str(out))
    assert rc == 0, err
    assert out.read_text().startswith("# infertop diagnosis rules")
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_every_rule_disabled_is_not_healthy_and_not_exit_0(tmp_path):
    """It read "healthy", exit 0: a run that judged nothing."""
    from infertop.rules.registry import codes
    cfg = _config_file(tmp_path, "[diagnosis]\ndisabled = [" +
                       ", ".join(f'"{c}"' for c in codes()) + "]\n")
    rc, out, err = run("doctor", "--source", "demo:healthy", "--duration", "2",
                       "--config", cfg)
    assert rc == 3, (out, err)
    assert "healthy" not in out.split("verdict:", 1)[1].splitlines()[0], out
    assert "nothing checked" in out and "disabled in the config" in err


def test_a_recorder_closed_before_its_first_tick_leaves_the_file_with_its_header(tmp_path):
    """An SSH drop before the first tick left no --record file at all: the screen's
    recorder is made at start-up and closed on the way out without a snapshot."""
    from infertop.probes.sources.recorder import Recorder
    from infertop.probes.sources.replay import ReplaySource
    from infertop.recording import RecordingError, make_header
    path = tmp_path / "early.jsonl.gz"
    header = make_header({"source": "live", "label": "x"}, None, host="h", started=1.0,
                         interval=1.0)
    asyncio.run(Recorder(path, header).close())
    assert path.exists() and oct(path.stat().st_mode & 0o777) == oct(0o600)
    with pytest.raises(RecordingError, match="holds no snapshot"):
        ReplaySource(path)


def test_the_recording_header_and_fleet_label_of_a_prometheus_hold_no_password():
    """What `record` puts in the header (describe) and the fleet screen's header (label)."""
    from infertop.probes.prometheus.source import PrometheusSource
    src = PrometheusSource(f"http://alice:{PROM_PASS}@127.0.0.1:9090")
    assert PROM_PASS not in json.dumps(src.describe()) + src.label
    assert "127.0.0.1:9090" in src.label


# ---- found by the fuzzer (tools/fuzz, target command_line) ---------------------------------
def test_a_long_bad_url_is_not_echoed_whole():
    """A 519-character --url with a bad port gave a 2,037-character message (its repr,
    every byte escaped); a 100 KB one would have been echoed whole."""
    from infertop.probes.server.metrics import normalize_url
    for url in ("\udcff" * 500 + ":\udcfccd", "h" * 100_000 + ":99999", "ftp://" + "x" * 5000):
        with pytest.raises(ValueError) as got:
            normalize_url(url)
        assert len(str(got.value)) < 120 and "\n" not in str(got.value), str(got.value)[:300]
    rc, _, err = run("doctor", "--url", "h" * 100_000 + ":99999")
    assert rc == 2 and len(err) < 300, err[:500]


def test_a_megabyte_flag_value_is_not_echoed_whole():
    """argparse's usage error echoed a megabyte --duration whole."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as got:
        main(["doctor", "--duration", "x" * 1_000_000])
    assert got.value.code == 2 and len(err.getvalue()) < 2000, err.getvalue()[:500]
    assert "--duration" in err.getvalue()
