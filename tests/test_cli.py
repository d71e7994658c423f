"""The command as a user runs it: exit codes, one-line errors, the JSON contract."""

import json
import socket
import subprocess
import sys

import pytest

from helpers.inproc import run_main

# infertop run as a program (CLI end to end, seconds each): `make test` runs them, the
# fast target keeps the in-process tests of the same behaviour
E2E = pytest.mark.integration

LAYERS = {"hardware", "kernels", "memory", "scheduling", "parallelism", "decoding"}


def run(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "infertop", *args], capture_output=True,
                          text=True, timeout=timeout)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_version_and_help():
    r = run("--version")
    assert r.returncode == 0 and r.stdout.startswith("infertop ")
    r = run("doctor", "--help")
    assert r.returncode == 0 and "3 no source could be read" in " ".join(r.stdout.split())


@pytest.mark.parametrize("args,words", [
    (["--interval", "0"], "must be greater than 0"),
    (["snapshot", "--window", "abc"], "expected a number"),
    # past Linux's pid_max: no process, and a pid a recording's meta would refuse
    (["snapshot", "--pid", "99999999"], "no process id is above 4,194,304"),
    (["--source", "foo:bar"], "--source must be live, demo:NAME or replay:FILE"),
    (["demo", "nosuch"], "no scenario named 'nosuch'"),
    (["replay", "/nonexistent/x.jsonl"], "no such file"),
    (["replay", __file__], "not an infertop recording"),
    (["--theme", "nope", "--source", "demo"], "unknown theme 'nope'"),
])
def test_bad_input_is_one_line_and_exit_2(args, words):
    # main() in this process (seven children cost ~5 s): its code and stderr are what a
    # child would give; test_version_and_help and tests/test_faults_errors.py's usage
    # errors go through a real `python -m infertop`
    r = run_main(*args)
    assert r.returncode == 2, r
    assert words in r.stderr and "Traceback" not in r.stderr


def test_snapshot_json_contract_from_a_demo():
    r = run("snapshot", "--json", "--source", "demo:mem-kv-pressure", "--window", "100")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert set(d) >= {"time", "version", "sources", "layers"}
    assert set(d["layers"]) == LAYERS
    for layer in d["layers"].values():
        for reading in layer["readings"]:
            assert set(reading) >= {"key", "labels", "value", "unit", "status"}
    assert all(s["status"] == "ok" for s in d["sources"].values())
    kv = [x for x in d["layers"]["memory"]["readings"] if x["key"] == "kv.usage_ratio"]
    assert kv and kv[0]["value"] > 0.9                 # the scenario's state at the window end
    assert any(f["code"] == "MEM-001" for f in d["findings"])


def test_snapshot_with_a_window_too_short_to_judge_says_so():
    """Issue 21: the default 2 s window printed "findings": [] while a node's TTFT p99 was
    ~20 s: rules need seconds to raise.  It says it did not judge (null, and why)."""
    r = run("snapshot", "--json", "--source", "demo:mem-kv-pressure", "--speed", "50")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["findings"] is None
    assert d["diagnosis"]["judged"] is False and d["diagnosis"]["needs_s"] >= 5
    assert "too short to judge" in d["diagnosis"]["why"]
    assert "findings not judged" in r.stderr
    long = json.loads(run("snapshot", "--json", "--source", "demo:mem-kv-pressure",
                          "--window", "100").stdout)
    assert long["diagnosis"]["judged"] is True and isinstance(long["findings"], list)


def test_nothing_to_read_is_exit_3_with_the_reasons():
    port = free_port()  # nothing listens there
    # the highest pid Linux can give: no process has it here (a vanished server)
    r = run("snapshot", "--json", "--no-gpu", "--pid", "4194303",
            "--url", f"http://127.0.0.1:{port}", "--window", "0.5")
    assert r.returncode == 3, r
    assert "connection refused" in r.stderr and "no source could be read" in r.stderr
    d = json.loads(r.stdout)
    assert d["sources"][f"server:127.0.0.1:{port}"]["status"] == "error"


@pytest.mark.parametrize("scenario,duration,code", [("healthy", 60, 0),
                                                    ("mem-kv-pressure", 100, 2)])
def test_doctor_exit_code_follows_the_worst_finding(scenario, duration, code):
    r = run("doctor", "--source", f"demo:{scenario}", "--duration", str(duration),
            "--format", "json")
    assert r.returncode == code, r.stderr
    d = json.loads(r.stdout)
    assert set(d) >= {"findings", "layers"}
    if code:
        f = d["findings"][0]
        assert set(f) >= {"code", "layer", "severity", "title", "evidence", "remedy", "since"}


@E2E   # infertop run as a program for seconds
def test_record_then_replay_headless(tmp_path):
    out = tmp_path / "r.jsonl.gz"
    r = run("record", "-o", str(out), "--source", "demo:healthy", "--duration", "30")
    assert r.returncode == 0 and "recorded 30 ticks" in r.stderr
    r = run("snapshot", "--json", "--source", f"replay:{out}", "--window", "60")
    assert r.returncode == 0 and json.loads(r.stdout)["layers"]["decoding"]["readings"]


def test_demo_list_names_every_layer():
    r = run("demo", "--list")
    assert r.returncode == 0
    layers = {line.split()[1] for line in r.stdout.splitlines() if line.strip()}
    assert layers >= LAYERS
