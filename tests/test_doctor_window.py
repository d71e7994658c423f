"""``doctor`` reports the window, not only its last tick, and ``--speed`` paces demo and
replay sources headless (it used to be ignored)."""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys

import pytest

from helpers.inproc import run_main
from infertop.findings import FindingEvent, Severity
from infertop.report import episodes, render_report


def run(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "infertop", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_doctor_json_lists_every_raise_and_clear_of_the_run():
    r = run("doctor", "--source", "demo:dec-error-restart", "--duration", "119",
            "--format", "json")
    doc = json.loads(r.stdout)
    eps = {e["code"]: e for e in doc["meta"]["episodes"]}
    # the error burst cleared on the scenario's last tick (119): raised and cleared, shown
    # all the same (a longer run would loop the demo and start over)
    assert eps["DEC-004"]["cleared"] is not None and not eps["DEC-004"]["active"]
    assert eps["DEC-004"]["raised"] < eps["DEC-004"]["cleared"]
    # the restart is still a finding at the end
    assert eps["DEC-005"]["cleared"] is None and eps["DEC-005"]["active"]
    assert "DEC-004" not in [f["code"] for f in doc["findings"]]
    # the exit code follows the worst finding still active, not the cleared DEC-004
    worst = max(({"warn": 1, "crit": 2}[f["severity"]] for f in doc["findings"]), default=0)
    assert r.returncode == worst


@pytest.mark.slow
def test_doctor_text_has_the_run_section():
    r = run("doctor", "--source", "demo:dec-error-restart", "--duration", "119")
    text = r.stdout
    assert "DURING THE RUN (raised and cleared)" in text
    line = next(x for x in text.splitlines() if x.strip().startswith("DEC-004"))
    assert "raised" in line and "cleared" in line and "after" in line


def test_episodes_pairs_raises_and_clears():
    sub = (("gpu", "0"),)
    ev = [FindingEvent(10.0, "HW-001", sub, "raised", Severity.WARN, "a"),
          FindingEvent(30.0, "HW-001", sub, "cleared", Severity.WARN, "a"),
          FindingEvent(40.0, "HW-001", sub, "raised", Severity.WARN, "b"),
          FindingEvent(41.0, "MEM-001", (), "raised", Severity.CRIT, "c")]
    got = episodes(ev)
    assert [(e["code"], e["raised"], e["cleared"]) for e in got] == [
        ("HW-001", 10.0, 30.0), ("HW-001", 40.0, None), ("MEM-001", 41.0, None)]
    md = render_report([], {}, "markdown", {"episodes": got})
    assert "## during the run" in md and "| HW-001 | warn |" in md


def _args(**kw: object) -> argparse.Namespace:
    base: dict[str, object] = dict(source="demo:healthy", speed=None, interval=1.0, url=[], pid=None,
                no_gpu=True, config=None)
    base.update(kw)
    return argparse.Namespace(**base)


@pytest.mark.parametrize("speed,pace", [(None, 0.0), (10.0, 0.1), (0.5, 2.0)])
def test_speed_paces_demo_ticks_headless(monkeypatch, speed, pace):
    """With --speed X a demo tick waits its tick / X in real time; without, none."""
    from infertop.cli import sources
    slept: list[float] = []

    async def fake_sleep(s):
        slept.append(s)

    monkeypatch.setattr(sources.asyncio, "sleep", fake_sleep)
    src = sources.make_source(_args(speed=speed))
    assert src.speed == (speed or 1.0)
    assert sources.pace_of(src, 1.0, speed) == pytest.approx(pace)
    frame = asyncio.run(sources.sample_window(src, sources.make_pipeline(_args()), 5, 1.0, speed))
    assert frame is not None
    if pace:
        # a sleep per tick, never past the pace (0 when a tick took longer: a busy machine)
        assert len(slept) == 5 and all(0 <= s <= pace + 1e-9 for s in slept)
    else:
        assert slept == []


def test_live_source_paces_at_its_interval():
    from infertop.cli import sources

    class Live:
        realtime = True
    # a stand-in: pace_of reads only ``realtime`` of a live source
    assert sources.pace_of(Live(), 2.0, 10.0) == 2.0  # type: ignore[arg-type]


def test_screen_and_headless_pace_by_the_one_rule():
    """The app's timer (wall_interval) and the headless commands (pace_of) both ask
    infertop.source.pace: live the interval; demo/replay their step over the speed."""
    from infertop.cli import sources
    from infertop.source import pace
    from infertop.tui.modes import app_for_source
    from infertop.tui.options import AppOptions

    src = sources.make_source(_args(speed=4.0))
    app = app_for_source(src, interval=1.0, options=AppOptions(speed=4.0))
    assert app.wall_interval == pace(False, 1.0, 4.0, floor=0.02) == 0.25
    assert sources.pace_of(src, 1.0, 4.0) == pace(False, src.tick_seconds, 4.0) == 0.25
    assert pace(False, 1.0, 1000.0, floor=0.02) == 0.02     # the screen's shortest tick
    assert pace(True, 2.0, 10.0) == 2.0 and pace(False, 1.0, None) == 0.0


def test_doctor_shorter_than_the_rules_windows_names_the_rules_it_could_not_judge():
    # a 3 s run said "healthy on 26 of 36 rules checked" although a rule judging a
    # median needs 8 s and MEM-002 35 s: a condition present all along could not have
    # raised them.  It says which rules, and how long a run judges them all.  (In this
    # process: what doctor prints is the point; the test above runs it as a program.)
    r = run_main("doctor", "--source", "demo:mem-kv-pressure", "--duration", "3", "--format", "json")
    doc = json.loads(r.stdout)
    short = doc["meta"]["too_short"]
    assert short["SCH-002"] == 8.0 and short["MEM-002"] == 35.0 and short["HW-003"] == 5.0
    assert "DEC-005" not in short                  # raises on the tick it sees a restart
    assert not set(short) & set(doc["meta"]["unchecked"])   # those say NOT CHECKED
    assert "rules checked" not in doc["summary"]
    assert f"too short for {len(short)} more" in doc["summary"]
    text = run_main("doctor", "--source", "demo:mem-kv-pressure", "--duration", "3").stdout
    section = text[text.index("WINDOW TOO SHORT ("):text.index("NOT CHECKED (")]
    assert "need 8 s: " in section and "SCH-002" in section and "need 35 s: MEM-002" in section
    assert "--duration 36 or more" in section
    md = render_report([], {}, "markdown", doc["meta"])
    assert "## window too short" in md and "- need 35 s: MEM-002" in md
    # long enough: nothing listed, the verdict counts every checked rule
    long = json.loads(run_main("doctor", "--source", "demo:mem-kv-pressure", "--duration", "40",
                          "--format", "json").stdout)
    assert long["meta"]["too_short"] == {} and "rules checked" in long["summary"]
    assert "WINDOW TOO SHORT" not in render_report([], {}, "text", long["meta"])


def test_window_needed_follows_the_config_timing():
    from infertop.config import DiagnosisConfig
    from infertop.rules.engine import Diagnoser
    cfg = DiagnosisConfig()
    d = Diagnoser(cfg)
    needed = d.window_needed()
    assert set(needed) == {r.code for r in d.rules}
    # the rules' own delays and the judge window's half for median rules
    assert needed["DEC-005"] == 0.0 and needed["SCH-002"] == cfg.diagnosis.judge_window / 2 + 3
    assert max(v for c, v in needed.items() if v <= d.judge_after()) == d.judge_after()
