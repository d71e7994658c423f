"""Clocks agree (issue 11, item 7): in a replay the status line's tick, the banner's
position and the findings' raise/since times all count on the recording's timeline, from
the frame on screen; a demo's banner says the speed asked and, when the machine does not
keep up, the speed achieved.  Ticks are driven by hand and the speed meter reads a fake
clock: nothing here depends on how fast the machine is."""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from infertop.cli.main import build_parser, make_pipeline
from infertop.probes.sources.demo import DemoSource
from infertop.probes.sources.recorder import record_headless
from infertop.probes.sources.replay import ReplaySource
from infertop.rules.engine import Diagnoser
from infertop.tui.modes import DemoApp, ReplayApp
from infertop.tui.options import AppOptions
from infertop.tui.screens.findings import events_renderable, findings_renderable
from infertop.tui.speed import SpeedMeter, speed_text

pytestmark = pytest.mark.slow   # replay and demo clocks through the whole app


def pipeline():
    return make_pipeline(build_parser().parse_args([]))


def banner(app) -> str:
    return app._shown["#banner"].plain if app._shown.get("#banner") else ""


def status(app) -> str:
    return app._shown["#status"].plain


def seconds(hms: str) -> int:
    h, m, s = (int(x) for x in hms.split(":"))
    return h * 3600 + m * 60 + s


async def drive(pilot, app, n):
    while app.ticks < 1:
        await pilot.pause(0.01)
    for _ in range(n):
        await app._poll()
    await pilot.pause()


@pytest.fixture
def recording(tmp_path):
    path = tmp_path / "kv.jsonl.gz"
    assert asyncio.run(record_headless(DemoSource("mem-kv-leak"), path, 150, 0)) == 150
    return path


def rendered(renderable) -> str:
    from rich.console import Console
    con = Console(width=200, record=True, file=open("/dev/null", "w"))
    con.print(renderable)
    return con.export_text()


async def test_replay_tick_banner_and_finding_times_share_the_recordings_clock(recording):
    src = ReplaySource(recording)
    app = ReplayApp(src, pipeline=pipeline(), options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(160, 40)) as pilot:
        await drive(pilot, app, 9)
        assert "tick 9/150 at 0:00:09" in status(app) and "tick 9/150" in banner(app)
        await pilot.press("g")
        await pilot.press(*"2:00", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        idx = src.position
        assert idx > 100                 # the app counted 10 ticks; the recording is at 120
        assert f"tick {idx}/150" in banner(app) and "0:02:00 / " in banner(app)
        assert f"tick {idx}/150 at 0:02:00" in status(app)
        # findings rebuilt from the recording: raised at recorded times, before 2:00
        assert app.frame is not None
        f = next(f for f in app.frame.findings if f.code == "MEM-002")
        since = app.clock_text(f.since)
        m = re.fullmatch(r"(\d+:\d\d:\d\d) \((\d\d:\d\d:\d\d)\)", since)
        assert m and 0 <= seconds(m.group(1)) <= 120, since
        assert m.group(2) == time.strftime("%H:%M:%S", time.localtime(f.since))
        assert src.start_time <= f.since <= src.start_time + 120   # not today's wall clock
        assert f"since {since}" in rendered(findings_renderable(app.frame.findings, {},
                                                                app.clock_text))
        assert isinstance(app.pipeline.diagnoser, Diagnoser)
        events = app.pipeline.diagnoser.events
        assert events and all(0 <= seconds(app.clock_text(e.time).split()[0]) <= 120
                              for e in events)
        assert app.clock_text(events[-1].time) in rendered(events_renderable(events,
                                                                             app.clock_text))
        await pilot.press("f")
        await pilot.pause()
        assert app.screen.__class__.__name__ == "FindingsScreen"


async def test_replay_banner_follows_the_frame_on_screen_not_the_moved_position(recording):
    src = ReplaySource(recording)
    app = ReplayApp(src, pipeline=pipeline(), options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(160, 40)) as pilot:
        await drive(pilot, app, 20)
        src.goto(100)                    # a seek whose rebuild has not drawn yet
        app.update_banner()
        app._update_status()
        assert "tick 20/150" in banner(app) and "0:00:20 / " in banner(app)
        assert "tick 20/150 at 0:00:20" in status(app)


async def test_demo_banner_shows_the_speed_asked_and_what_the_machine_achieved():
    app = DemoApp(DemoSource("healthy"), pipeline=pipeline(),
                  options=AppOptions(manual_ticks=True))
    now = [0.0]
    async with app.run_test(size=(160, 40)) as pilot:
        await drive(pilot, app, 0)
        # the test stands in for the timer: it paces the ticks on a fake wall clock
        app.speed_meter.clock = lambda: now[0]
        app.speed_meter.enabled = True
        app.speed_meter.reset()

        async def ticks(n: int, wall_per_tick: float) -> None:
            for _ in range(n):
                now[0] += wall_per_tick
                await app._poll()
            await pilot.pause()

        await ticks(5, 1.0)                       # one scenario second per wall second
        assert "speed 1x" in banner(app) and "achieved" not in banner(app)
        await pilot.press("plus")                 # interval 0.5 s: two ticks a second asked
        await pilot.pause()
        assert "speed 2x" in banner(app) and "achieved" not in banner(app)
        await ticks(5, 1.0)                       # but the box manages one a second
        assert "speed 2x asked, 1.0x achieved (1.0 ticks/s)" in banner(app)
        await ticks(10, 0.5)                      # it keeps up again
        assert "speed 2x" in banner(app) and "achieved" not in banner(app)
        await pilot.press("minus", "minus")       # 2 s: half speed
        await pilot.pause()
        assert "speed 0.5x" in banner(app)
        app.paused = True                         # stepping by hand (] in a replay) is
        await ticks(5, 3.0)                       # no measure of the pace
        assert "speed 0.5x" in banner(app) and "achieved" not in banner(app)


def test_speed_meter_needs_three_ticks_and_ignores_a_clock_that_stood_still():
    now = [0.0]
    m = SpeedMeter(clock=lambda: now[0])
    m.tick(100.0)
    m.tick(101.0)
    assert m.achieved() is None and speed_text(4, m) == "speed 4x"
    m.tick(102.0)
    assert m.achieved() is None                   # no wall time passed: no claim
    now[0] = 4.0
    m.tick(103.0)
    assert m.achieved() == (0.75, 0.75)
    assert speed_text(4, m) == "speed 4x asked, 0.75x achieved (0.75 ticks/s)"
