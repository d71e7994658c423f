"""Fault suite, part A: a dead or broken server is never "healthy".

Hostile /metrics servers are small loopback fixtures (tests/helpers/faulty_server.py);
the commands run as real subprocesses, so exit codes and stderr are what a user sees.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.faulty_server import closed_port, hostile
from helpers.inproc import run_main
from helpers.rulekit import SERVER, Feed, timing
from helpers.rulekit import tick as make_tick
from helpers.spawn_tree import spawn
from infertop.meta import ProcessMeta, ServerInfo
from infertop.model import Status
from infertop.report import render_report
from infertop.rules.registry import all_rules

# infertop run as a program (CLI end to end, seconds each): `make test` runs them, the
# fast target keeps the in-process tests of the same behaviour
E2E = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
E0 = "instance=local,model=m"   # rulekit puts server readings in source "server:local"


def run(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "infertop", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env=env)


def assert_unreachable_report(r: subprocess.CompletedProcess, name: str) -> None:
    assert r.returncode == 3, (r.returncode, r.stdout[-2000:], r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stdout.splitlines()
    verdict = next(i for i, line in enumerate(lines) if line.startswith("verdict:"))
    top = [i for i, line in enumerate(lines) if line.startswith("SERVER UNREACHABLE")]
    assert top and top[0] < verdict, r.stdout            # said at the top, above the verdict
    assert name in lines[top[0]]
    assert lines[verdict].startswith("verdict: server unreachable")
    assert "healthy" not in lines[verdict], lines[verdict]
    assert f"server unreachable: {name}" in r.stderr


# ---- doctor and snapshot on a dead or broken /metrics ------------------------------------
def test_doctor_on_a_refused_port_is_exit_3_server_unreachable():
    port = closed_port()
    r = run("doctor", "--url", f"http://127.0.0.1:{port}", "--no-gpu", "--duration", "1")
    assert_unreachable_report(r, f"server:127.0.0.1:{port}")
    assert "connection refused" in r.stdout


@E2E   # infertop run as a program for seconds
@pytest.mark.parametrize("mode,said", [("500", "HTTP 500"), ("404", "HTTP 404"),
                                       ("html", "HTML"), ("hang", "")])
def test_doctor_on_a_broken_metrics_page_is_exit_3(mode, said):
    with hostile(mode) as srv:
        r = run("doctor", "--url", srv.url, "--no-gpu", "--duration", "1")
    assert_unreachable_report(r, f"server:127.0.0.1:{srv.port}")
    assert said in r.stdout


@pytest.mark.parametrize("url,said", [("ftp://127.0.0.1/metrics", "not an http(s) URL"),
                                      ("http://127.0.0.1:99999", "bad port")])
def test_a_url_that_can_never_be_read_is_one_line_and_exit_2(url, said):
    # main() in this process (four children cost ~3 s): the code and the line are the
    # point; the refused port above runs doctor as a program
    for cmd in (["doctor", "--duration", "1"], ["snapshot", "--json", "--window", "0.5"]):
        r = run_main(*cmd, "--url", url, "--no-gpu")
        assert r.returncode == 2, r
        assert r.stderr.count("\n") == 1 and said in r.stderr and "--url" in r.stderr
        assert r.stdout == ""


@E2E   # infertop run as a program for seconds
def test_snapshot_json_says_which_server_is_unreachable():
    with hostile("500") as srv:
        r = run("snapshot", "--json", "--url", srv.url, "--no-gpu", "--window", "1")
    assert r.returncode == 3, r
    doc = json.loads(r.stdout)
    name = f"server:127.0.0.1:{srv.port}"
    assert "HTTP 500" in doc["unreachable"][name]
    assert doc["sources"][name]["status"] == "error"
    assert f"server unreachable ({name}" in r.stderr


@E2E   # infertop run as a program for seconds
def test_one_dead_url_of_two_still_fails_the_run():
    with hostile("ok") as good:
        dead = closed_port()
        r = run("doctor", "--url", good.url, "--url", f"http://127.0.0.1:{dead}",
                "--no-gpu", "--duration", "1")
    assert_unreachable_report(r, f"server:127.0.0.1:{dead}")
    assert f"source server:127.0.0.1:{good.port}: ok" in r.stdout


@E2E   # infertop run as a program for seconds
def test_host_and_process_readings_alone_never_make_a_run_healthy():
    # a real (fake-vLLM) process tree, readable, but no /metrics and no GPU
    with spawn() as t:
        r = run("doctor", "--pid", str(t["parent"]), "--no-gpu", "--duration", "1")
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert "source process: ok" in r.stdout
    assert "verdict: no source could be read" in r.stdout


@E2E   # infertop run as a program for seconds
def test_a_healthy_server_without_nvml_says_how_much_was_checked():
    with hostile("ok") as srv:
        r = run("doctor", "--url", srv.url, "--no-gpu", "--duration", "1")
    assert r.returncode == 0, (r.stdout, r.stderr)
    verdict = next(line for line in r.stdout.splitlines() if line.startswith("verdict:"))
    node_rules = sum(not r.code.startswith("FLT-") for r in all_rules())
    # a 1 s run judges only the rules that raise at once: the others it names too short
    assert verdict.startswith("verdict: healthy on ") and \
        f" of {node_rules} rules judged; a 1 s run is too short for " in verdict
    assert "GPU rules not checked" in verdict and "no NVML (GPU readings off (--no-gpu))" \
        in verdict
    checked = int(verdict.split("healthy on ")[1].split(" of ")[0])
    assert 0 < checked < 30


def test_verdict_coverage_counts_and_all_checked():
    meta = {"rules_total": 24, "unchecked": {"HW-001": ["gpu.util_ratio (x)"],
                                             "DEC-001": ["latency.ttft_seconds (x)"]},
            "gpu_off": "no NVML"}
    out = render_report([], {}, "text", meta)
    assert ("verdict: healthy on 22 of 24 rules checked; GPU rules not checked (1): no NVML; "
            "1 other lack inputs (see NOT CHECKED)") in out
    out = render_report([], {}, "text", {"rules_total": 24, "unchecked": {}})
    assert "verdict: healthy on all 24 rules checked" in out
    doc = json.loads(render_report([], {}, "json", {"unreachable": {"server:x": "refused"}}))
    assert doc["verdict"] == "server-unreachable" and doc["unreachable"] == {"server:x": "refused"}


# ---- --url names an empty local port ---------------------------------------------------------
@E2E   # infertop run as a program for seconds
def test_url_on_an_empty_port_never_shows_another_servers_tree():
    port = closed_port()
    with spawn() as t:   # another "vLLM" runs here and would be found by name
        r = run("snapshot", "--json", "--url", f"http://127.0.0.1:{port}", "--no-gpu",
                "--window", "0.5")
    doc = json.loads(r.stdout)
    infos = [x for x in doc["layers"]["scheduling"]["readings"] if x["key"] == "process.info"]
    assert not any(x["labels"]["pid"] in (str(t["parent"]), str(t["child"])) for x in infos)
    assert f"no local process listens on port {port}" in doc["sources"]["process"]["reason"]
    assert r.returncode == 3


# ---- a server that goes down while watched: DEC-006 and stale values ----------------------
def good_tick(n: int) -> dict:
    return {"kv.usage_ratio": {E0: 0.4}, "server.requests_running": {E0: 3},
            "server.generation_tokens_total": {E0: 1000.0 + 50 * n}}


def test_server_down_while_watched_raises_dec_006_with_since_and_clears():
    ra, ca = timing("DEC-006")
    f = Feed()
    for n in range(10):
        f.tick(good_tick(n))
    down_at = f.t
    for _ in range(int(ra) - 1):   # shorter than raise_after: nothing yet
        f.tick({}, status={SERVER: Status.ERROR})
    assert not f.active("DEC-006")
    for _ in range(3):
        f.tick({}, status={SERVER: Status.ERROR})
    (fin,) = f.active("DEC-006")
    assert fin.severity.value == "crit" and fin.layer.value == "decoding"
    assert fin.since == down_at and "not answering since" in fin.title
    assert fin.title.startswith("server local not answering since")
    assert "connection refused" in fin.evidence[0].note
    down_for = fin.evidence[0].value   # seconds down: a number, not an INFO reading's text
    assert isinstance(down_for, float) and down_for >= ra
    healthy_from = f.t
    n = 20
    while not f.events("DEC-006", "cleared"):
        f.tick(good_tick(n))
        n += 1
        assert f.t - healthy_from <= ca + 2, "DEC-006 did not clear"
    assert f.t - healthy_from >= ca
    assert len(f.events("DEC-006", "raised")) == 1


def test_a_hung_server_stale_every_tick_raises_dec_006_too():
    f = Feed()
    for n in range(5):
        f.tick(good_tick(n))
    for _ in range(int(timing("DEC-006")[0]) + 2):
        f.tick({}, status={SERVER: Status.STALE})
    assert f.active("DEC-006")


def test_last_good_values_of_a_dead_server_are_shown_stale_not_live():
    f = Feed()
    for n in range(10):
        f.tick(good_tick(n))
    frame = f.pipe.feed(make_tick(f.t, {}, {SERVER: Status.ERROR}))
    kv = frame.by_key("kv.usage_ratio")
    assert kv and all(r.status is Status.STALE for r in kv), kv
    assert kv[0].value == 0.4 and "connection refused" in kv[0].reason and "s old" in kv[0].reason
    rate = frame.by_key("throughput.generation_tokens_per_second")
    assert rate and all(r.status is Status.STALE for r in rate)
    from helpers.panes import pane_text
    assert "40 %*" in pane_text("memory", frame, width=100, height=20)   # marked stale
    # the rules never see them: no finding is kept alive on old values
    assert not any(r.status is Status.OK for r in frame.all_readings()
                   if r.label("instance") == "local")
    # back up: live again, nothing stale left
    frame = f.pipe.feed(make_tick(f.t + 1, good_tick(11)))
    assert frame.stale == [] and frame.by_key("kv.usage_ratio")[0].status is Status.OK


def test_a_tree_found_by_name_for_a_url_says_so_on_the_screen():
    from helpers.panes import pane_text
    from infertop.model import Sample, Snapshot
    from infertop.pipeline import Pipeline
    from infertop.probes.server.process import _reading
    info = _reading("process.info", 1.0, {"pid": 42, "ppid": 1, "name": "python",
                                          "role": "api_server", "kind": "vllm"}, text="vllm serve")
    meta = ProcessMeta(server=ServerInfo(
        pid=42, kind="vllm", name="python", port=8000, found_by="name, not port",
        reason="found by name, not by port: port 9 is held by a process we cannot inspect"))
    snap = Snapshot(1000.0, {"process": Sample("process", 1000.0, (info,), meta=meta)})
    frame = Pipeline().feed(snap)
    text = pane_text("scheduling", frame)
    assert "found by name, not by port" in text and "42" in text
    from infertop.cli.snapshot import snapshot_json
    st = snapshot_json(frame)["sources"]["process"]
    assert st["found_by"] == "name, not port" and st["reason"].startswith("found by name")


@E2E   # infertop run as a program for seconds
def test_a_pid_that_does_not_exist_is_exit_3_and_said_in_the_report():
    # a pid nobody has here: the highest Linux can give (pid_max is 32768 on this box;
    # above 4194304 the flag itself is refused, tests/test_cli.py)
    r = run("doctor", "--pid", "4194303", "--no-gpu", "--duration", "1")
    assert r.returncode == 3, (r.stdout[-1500:], r.stderr)
    assert "source process: ok: no process with pid 4194303 (--pid)" in r.stdout
    assert "verdict: no source could be read" in r.stdout and "Traceback" not in r.stderr
