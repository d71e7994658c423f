"""Issue 21, at the level a user sees it: a card at 99.5 % is not healthy (doctor's text and
JSON), the demo's memory stays on the card, doctor's verdict after an outage, the run's
real duration, guessed settings, uptime in days, stale values of a process that is gone."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache

import pytest

from helpers.inproc import run_main
from helpers.rulekit import SERVER, Feed
from infertop.meta import ProcessMeta, ServerInfo
from infertop.model import Reading, Sample, Snapshot, Status
from infertop.pipeline import Pipeline
from infertop.report import render_report
from infertop.units import fmt_seconds


def run(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "infertop", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


@cache
def oom_creep(fmt: str):
    return run("doctor", "--source", "demo:mem-oom-creep", "--duration", "300", "--format", fmt)


@pytest.mark.slow   # doctor over the 300 s scenario, as a user runs it
def test_a_card_at_99_5_percent_is_not_healthy_in_doctor_json():
    r = oom_creep("json")
    doc = json.loads(r.stdout)
    assert doc["verdict"] != "healthy" and r.returncode in (1, 2)
    mem = [f for f in doc["findings"] if f["code"] == "MEM-003"]
    assert mem, doc["summary"]               # still raised at the end: growth stopped, level not
    used = next(e for e in mem[0]["evidence"] if e["key"] == "gpu.mem_used_bytes")
    assert used["value"] >= 0.98 and "reserves 76%" in used["note"]
    # the timeline says the episode's worst severity, as the finding does
    ep = [e for e in doc["meta"]["episodes"] if e["code"] == "MEM-003"][-1]
    assert ep["severity"] == mem[0]["severity"] and ep["active"]
    # the demo's memory never exceeds the card (a process showed 97.4 GiB of 80)
    readings = {(x["key"], tuple(sorted(x["labels"].items()))): x["value"]
                for layer in doc["layers"].values() for x in layer["readings"]}
    total = readings[("gpu.mem_total_bytes", (("gpu", "0"),))]
    procs = [v for (k, _), v in readings.items() if k == "process.gpu_mem_bytes"]
    assert procs and all(v <= total for v in procs)
    assert readings[("gpu.mem_used_bytes", (("gpu", "0"),))] <= total


@pytest.mark.slow   # doctor over the 300 s scenario, as a user runs it
def test_a_card_at_99_5_percent_is_not_healthy_in_doctor_text():
    text = oom_creep("text").stdout
    verdict = next(x for x in text.splitlines() if x.startswith("verdict:"))
    assert "healthy" not in verdict and "MEM-003" in text
    assert "beyond the reservation" in text
    # one clock: the finding and the timeline give the same onset and raise times
    since = next(x for x in text.splitlines() if x.strip().startswith("since"))
    ep = next(x for x in text.splitlines() if x.strip().startswith("MEM-003"))
    onset = since.split()[1]
    raised = since.split("raised ")[1].split()[0]
    assert f"since {onset}, raised {raised}" in ep


def test_uptime_of_months_is_shown_in_days():
    assert fmt_seconds(8043.3 * 3600) == "335.1 d"
    assert fmt_seconds(5 * 3600) == "5.0 h"


def _tick(t: float, server_ok: bool, pid: int) -> Snapshot:
    proc = Sample("process", t, (Reading("server.setting", 1.0, "", (("name", "max_num_seqs"),),
                                         text="2"),),
                  meta=ProcessMeta(server=ServerInfo(pid=pid)))
    srv = Sample(SERVER, t, (Reading("kv.usage_ratio", 0.5, "ratio", (("instance", "local"),)),)
                 if server_ok else (), Status.OK if server_ok else Status.ERROR,
                 "" if server_ok else "connection refused")
    return Snapshot(t, {"process": proc, SERVER: srv})


def test_a_restarting_servers_old_values_are_not_shown_beside_the_new_process():
    p = Pipeline()
    for t in range(5):
        p.feed(_tick(1000.0 + t, True, pid=100))
    same = p.feed(_tick(1005.0, False, pid=100))       # down, same process: stale values
    assert [r.key for r in same.stale] == ["kv.usage_ratio"]
    new = p.feed(_tick(1006.0, False, pid=200))        # a new process is starting
    assert new.stale == []


def test_doctor_verdict_after_an_outage_says_what_was_read():
    f = Feed()
    f.run(lambda: {"kv.usage_ratio": {"instance=local": 0.3}}, 10)
    f.run(dict, 3, status={SERVER: Status.ERROR})
    frame = f.pipe.feed(__import__("helpers.rulekit", fromlist=["tick"]).tick(
        f.t, {}, {SERVER: Status.ERROR}))
    meta = {"any_source_ok": frame.sources_ok(), "ticks": f.pipe.history.ticks,
            "ticks_read": f.pipe.ticks_read, "unreachable": frame.unreachable_servers()}
    text = render_report(frame.findings, {}, "text", meta)
    verdict = next(x for x in text.splitlines() if x.startswith("verdict:"))
    assert "no source could be read" not in verdict
    assert "10 of 14 ticks were read before" in verdict


def test_doctor_qualifies_a_guessed_cuda_graphs_default_as_the_screen_does():
    from infertop.model import make_labels
    from infertop.settings_shown import shown_layers
    setting = Reading("server.setting", 1.0, "", make_labels({"name": "cuda_graphs"}),
                      text="on (default)")
    p = Pipeline()
    frame = p.feed(Snapshot(1.0, {"process": Sample("process", 1.0, (setting,))}))
    shown = [r for rs in shown_layers(frame).values() for r in rs
             if r.key == "server.setting" and r.label("name") == "cuda_graphs"]
    assert shown and all(r.text == "n/a (no GPU seen)" for r in shown)
    text = render_report([], shown_layers(frame), "text", {})
    assert "on (default)" not in text and "n/a (no GPU seen)" in text


def test_replay_doctor_prints_the_recordings_duration_not_the_one_asked_for():
    # main() in this process: what doctor prints is the point (a child costs ~1 s)
    r = run_main("doctor", "--source", "replay:tests/corpus/vllm-slow-restart.jsonl.gz",
            "--duration", "900")
    line = next(x for x in r.stdout.splitlines() if x.strip().startswith("duration:"))
    assert "10.8 min" in line and "ended before the 15.0 min asked for" in line
    # the restart is reported, with the whole outage
    assert "DEC-005 server restarted (down 9.1 min)" in r.stdout


def _f(code: str, layer: str, sev: str, title: str, since: float = 0.0):
    from infertop.findings import Finding, Severity
    from infertop.model import Layer
    return Finding(code, Layer(layer), Severity(sev), title, (), "", since)


def test_a_symptom_names_its_causes_own_title_not_the_catalogues():
    """DEC-001 said 'caused by SCH-002 queue grows while GPUs idle' on a box with no GPU."""
    from infertop.rules.engine import Diagnoser
    cap = _f("SCH-002", "scheduling", "warn",
             "queue grows while the batch is at its cap (max_num_seqs=2 reached)")
    dec = _f("DEC-001", "decoding", "crit", "TTFT p99 3.00 s over the 200 ms SLO")
    chain = Diagnoser()._chain([dec, cap])
    assert [f.code for f in chain] == ["SCH-002", "DEC-001"]
    assert chain[1].title.endswith("caused by SCH-002 queue grows while the batch is at its "
                                   "cap (max_num_seqs=2 reached)")
    assert "GPUs idle" not in chain[1].title


def test_timeline_and_compare_put_the_cause_first_and_say_the_worst_severity():
    from infertop.compare import compare
    from infertop.findings import FindingEvent, Severity
    from infertop.report import episodes
    from infertop.runsummary import RunSummary
    ev = [FindingEvent(10.0, "DEC-001", (), "raised", Severity.CRIT, "ttft", 8.0),
          FindingEvent(12.0, "MEM-001", (), "raised", Severity.WARN, "kv", 9.0),
          FindingEvent(20.0, "MEM-001", (), "escalated", Severity.CRIT, "kv crit", 9.0)]
    eps = episodes(ev)
    assert [e["code"] for e in eps] == ["MEM-001", "DEC-001"]
    assert eps[0]["severity"] == "crit" and eps[0]["since"] == 9.0
    text = render_report([], {}, "text", {"episodes": eps})
    assert text.index("MEM-001  [CRIT] since") < text.index("DEC-001  [CRIT] since")
    before, after = RunSummary(start=0.0), RunSummary(start=0.0)
    after.events = ev
    c = compare(before, after)
    assert [f["code"] for f in c.appeared] == ["MEM-001", "DEC-001"]


def test_the_findings_screen_and_its_log_say_the_same_two_times():
    from rich.console import Console

    from infertop.findings import FindingEvent, Severity
    from infertop.tui.screens.findings import events_renderable, findings_renderable
    f = _f("MEM-001", "memory", "warn", "KV-cache pressure", since=26.0)
    f = type(f)(**{**{k: getattr(f, k) for k in f.__slots__}, "raised": 29.0})
    ev = [FindingEvent(29.0, "MEM-001", (), "raised", Severity.WARN, "kv", 26.0)]

    def clock(t: float) -> str:
        return f"00:00:{t:02.0f}"

    con = Console(width=200, record=True)
    con.print(findings_renderable([f], {}, clock))
    con.print(events_renderable(ev, clock))
    out = con.export_text()
    assert "since 00:00:26, raised 00:00:29" in out
    assert "raised (since 00:00:26)" in out and "00:00:29" in out
