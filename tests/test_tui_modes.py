"""Pilot tests of the demo banner and scenario keys, and of the replay bar and its keys."""

import asyncio

import pytest
from rich.text import Text
from textual.widgets import Static

from infertop.cli.main import build_parser, make_pipeline
from infertop.model import Capability
from infertop.probes.sources.demo import DemoSource
from infertop.probes.sources.recorder import record_headless
from infertop.probes.sources.replay import ReplaySource
from infertop.tui.modes import DemoApp, ReplayApp
from infertop.tui.options import AppOptions
from infertop.tui.panes.widget import LayerPane
from infertop.tui.screens.capture import CaptureScreen

pytestmark = pytest.mark.slow   # demo and replay apps driven key by key


def pipeline():
    return make_pipeline(build_parser().parse_args([]))


def banner(app) -> str:
    return app._shown.get("#banner").plain if app._shown.get("#banner") else ""


async def drive(pilot, app, n):
    """Advance n ticks by hand (the apps run with manual ticks: no timing in the test)."""
    while app.ticks < 1:
        await pilot.pause(0.01)
    for _ in range(n):
        await app._poll()
    await pilot.pause()


async def test_demo_banner_narrates_and_keys_switch_scenarios():
    app = DemoApp(DemoSource("mem-kv-leak"), pipeline=pipeline(),
                  options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(140, 40)) as pilot:
        await drive(pilot, app, 5)
        text = banner(app)
        assert "DEMO" in text and "KV-cache leak" in text and "phase 1/" in text
        await pilot.press("greater_than_sign")
        await drive(pilot, app, 1)
        nxt = app.source.scenario.name
        assert nxt != "mem-kv-leak" and app.source.scenario.title in banner(app)
        assert app.pipeline.history.ticks == 1          # a new scenario starts a new history
        await pilot.press("less_than_sign")
        await drive(pilot, app, 3)
        assert app.source.scenario.name == "mem-kv-leak"
        await pilot.press("r")
        await drive(pilot, app, 1)
        assert "phase 1/" in banner(app) and app.pipeline.history.ticks == 1


async def test_demo_reaches_its_finding_and_highlights_the_reading():
    app = DemoApp(DemoSource("mem-kv-pressure"), pipeline=pipeline(),
                  options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(160, 48)) as pilot:
        await drive(pilot, app, 90)
        assert app.frame is not None
        assert any(f.code == "MEM-001" for f in app.frame.findings)
        mem = app.query_one("#pane-memory", LayerPane)
        assert mem.has_class("sev-crit") or mem.has_class("sev-warn")
        assert isinstance(mem.last_renderable, Text)
        assert "MEM-001" in mem.last_renderable.plain        # inline, beside the reading
        assert "MEM-001" in app._shown["#findings-strip"].plain
        await pilot.press("f")
        assert app.screen.__class__.__name__ == "FindingsScreen"


@pytest.fixture
def recording(tmp_path):
    path = tmp_path / "kv.jsonl.gz"
    ticks = asyncio.run(record_headless(DemoSource("mem-kv-leak"), path, 150, 0))
    assert ticks == 150
    return path


async def test_replay_bar_and_keys_step_jump_and_goto(recording):
    src = ReplaySource(recording)
    app = ReplayApp(src, pipeline=pipeline(), options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(140, 40)) as pilot:
        await drive(pilot, app, 9)
        assert src.position == 9 and "REPLAY" in banner(app) and "tick 9/150" in banner(app)
        await pilot.press("right_square_bracket")
        await app.workers.wait_for_complete()
        assert src.position == 10 and app.paused
        await pilot.press("left_square_bracket")
        await app.workers.wait_for_complete()
        assert src.position == 9
        await pilot.press("right_curly_bracket")          # +10 %
        await app.workers.wait_for_complete()
        assert src.position == 24
        await pilot.press("g")
        await pilot.press(*"2:00", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert abs(src.elapsed - 120) <= 1
        # findings recomputed from the raw data up to the new position
        assert app.frame is not None
        assert any(f.code == "MEM-002" for f in app.frame.findings)
        await pilot.press("left_curly_bracket")           # back 10 %: findings rebuilt
        await app.workers.wait_for_complete()
        assert src.position < 120


async def test_replay_end_pauses_with_a_note(recording):
    src = ReplaySource(recording)
    app = ReplayApp(src, pipeline=pipeline(), options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(120, 36)) as pilot:
        await drive(pilot, app, 160)
        assert app.paused and "end of recording" in app.status_note


async def test_R_records_the_frames_and_the_file_replays(tmp_path):
    path = tmp_path / "live.jsonl"
    app = DemoApp(DemoSource("healthy"), pipeline=pipeline(),
                  options=AppOptions(manual_ticks=True, record_path=str(path)))
    async with app.run_test(size=(120, 36)) as pilot:
        await drive(pilot, app, 3)
        await pilot.press("R")
        await pilot.pause()
        assert app.recorder is not None and "REC" in app._shown["#status"].plain
        await drive(pilot, app, 5)
        await pilot.press("R")
        await pilot.pause()
        assert app.recorder is None
    src = ReplaySource(path)
    assert src.length == 6            # the frame on screen when R was pressed + 5 more
    assert src.header["source"]["source"] == "demo" and src.header["server"]["kind"] == "vllm"



async def test_demo_presenter_keys_tour_position_next_phase_and_a_bundled_capture():
    """issue 23: a workshop could not show a py-spy capture in demo mode (`p` switched
    scenario), had no tour position and no way to step to the next phase."""
    app = DemoApp(DemoSource(None), pipeline=pipeline(), options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(120, 36)) as pilot:
        await drive(pilot, app, 2)
        n = len(app.source.names)
        assert f"DEMO 1/{n} " in banner(app) and "phase 1/" in banner(app)
        await pilot.press("greater_than_sign")
        await drive(pilot, app, 1)
        assert f"DEMO 2/{n} " in banner(app)
        first = app.source.phase.index
        await pilot.press("right_square_bracket")      # plays on to the next phase
        for _ in range(200):
            if app.source.phase.index != first:
                break
            await pilot.pause(0.05)
        assert app.source.phase.index == first + 1
        assert f"phase {first + 2}/" in banner(app)
        await pilot.press("p")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CaptureScreen)
        for _ in range(200):                 # the bundled dump is read in a thread
            if not screen.capture_running:
                break
            await pilot.pause(0.05)
        shown = " ".join(str(w.content) for w in app.screen.query(Static))
        assert "bundled" in shown and "VLLM::EngineCore" in shown, shown[:2000]


async def test_next_phase_hands_every_skipped_tick_to_after_snapshot():
    """`]` feeds the ticks it skips: the recorder and the scenario's bundled captures
    (after_snapshot) see each of them, as they do when the ticks are played one by one."""
    app = DemoApp(DemoSource(None), pipeline=pipeline(), options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(120, 36)) as pilot:
        await drive(pilot, app, 2)
        seen = []
        plain = app.after_snapshot

        async def counting(snap, frame):
            seen.append(snap.time)
            await plain(snap, frame)
        app.after_snapshot = counting  # type: ignore[method-assign]  # counts the app's calls
        before, first = app.ticks, app.source.phase.index
        await pilot.press("right_square_bracket")
        for _ in range(200):
            if app.source.phase.index != first and not app.polling:
                break
            await pilot.pause(0.05)
        assert app.source.phase.index == first + 1
        assert len(seen) == app.ticks - before > 1


async def test_each_mounts_work_runs_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Textual calls on_mount of each class along the MRO, and the modes call the base's
    through super() too: the source is started once, and a mode's own mount work
    (DemoApp's --record) once, whatever else waits on the Mount (issue 35's first
    frame handler)."""
    import infertop.tui.app as app_module
    starts: list[int] = []
    records: list[int] = []
    real_start = DemoSource.start

    async def start(self: DemoSource) -> dict[str, Capability]:
        starts.append(1)
        return await real_start(self)

    async def action_record(self: DemoApp) -> None:
        records.append(1)

    monkeypatch.setattr(DemoSource, "start", start)
    monkeypatch.setattr(DemoApp, "action_record", action_record)
    monkeypatch.setattr(app_module, "FIRST_FRAME_WAIT", 5.0, raising=False)
    app = DemoApp(DemoSource("healthy"), interval=1.0,
                  options=AppOptions(manual_ticks=True, record_now=True),
                  pipeline=make_pipeline(build_parser().parse_args([])))
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(100):     # a generous deadline (5 s)
            if app.ticks:
                break
            await pilot.pause(0.05)
        await pilot.pause(0.1)
    assert starts == [1]
    assert records == [1]
