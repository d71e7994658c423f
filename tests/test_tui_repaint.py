"""Repaint only what changed (issue 11, item 6): a tick that changes one reading writes
the lines that show it, not the six panes.  Measured as what the app hands the terminal
(the compositor's update, rendered to escape sequences), compared with a full repaint in
the same run: sizes, not times."""

from __future__ import annotations

import dataclasses

import pytest
from rich.text import Text

from helpers.synthetic_source import SyntheticSource
from infertop.model import Sample
from infertop.pipeline import Pipeline
from infertop.tui.app import InfertopApp
from infertop.tui.options import AppOptions
from infertop.tui.panes.widget import LayerPane

pytestmark = pytest.mark.slow   # repaints measured through the whole app


class OneValueMoves(SyntheticSource):
    """The synthetic box, steady, except GPU 0's temperature: 61 °C, 62 °C from tick
    ``moves_from`` on (a change that raises no finding)."""

    moves_from = 10**9

    async def next(self):
        snap = await super().next()
        if self.n < self.moves_from:
            return snap
        nvml = snap.samples["nvml"]
        rs = tuple(dataclasses.replace(r, value=62.0)
                   if r.key == "gpu.temp_celsius" and r.label("gpu") == "0" else r
                   for r in nvml.readings)
        samples = dict(snap.samples, nvml=Sample("nvml", nvml.time, rs, nvml.status,
                                                 nvml.reason, nvml.meta))
        return dataclasses.replace(snap, samples=samples)


def screen_text(app) -> str:
    return "\n".join("".join(seg.text for seg in strip)
                     for strip in app.screen._compositor.render_strips())


async def test_a_tick_that_changes_one_value_repaints_a_few_lines_not_the_panes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    src = OneValueMoves(gpus=2)
    app = InfertopApp(src, pipeline=Pipeline(), options=AppOptions(manual_ticks=True))
    written: list[str] = []
    display = app._display

    def spy(screen, update):
        if update is not None:
            written.append(update.render_segments(app.console))
        return display(screen, update)

    async with app.run_test(size=(160, 48)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        for _ in range(30):      # sparklines fill their width: a steady screen
            await app._poll()
        await pilot.pause()
        monkeypatch.setattr(app, "_display", spy)
        app.screen.refresh()     # the whole screen once: the yardstick
        await pilot.pause()
        full = sum(map(len, written))
        written.clear()
        await app._poll()        # nothing moved: the status line's tick count only
        await pilot.pause()
        steady = sum(map(len, written))
        written.clear()
        src.moves_from = src.n + 1
        await app._poll()        # GPU 0's temperature moved: its lines only
        await pilot.pause()
        moved = sum(map(len, written))
        drawn = app.query_one("#pane-hardware", LayerPane).last_renderable
        assert isinstance(drawn, Text)
        hardware = drawn.plain
        assert "62 °C" in hardware and "62 °C" in screen_text(app)
    assert full > 5000
    assert steady < full / 20, (steady, full)
    assert moved < full / 10, (moved, full)


def screen_cells(app) -> list[list[tuple[str, str]]]:
    """Every line of the screen as (text, style) segments: what the terminal shows."""
    return [[(seg.text, str(seg.style)) for seg in strip]
            for strip in app.screen._compositor.render_strips()]


async def test_line_by_line_repaints_add_up_to_the_screen_a_full_repaint_draws():
    """Many ticks of partial repaints (values moving every tick, a theme switch, a zoom in
    and out, a resize) leave exactly the screen that repainting everything from scratch
    draws: no stale row, no row drawn at the wrong width or in the old theme's colours."""
    from infertop.probes.sources.demo import DemoSource
    from infertop.tui.modes import DemoApp

    app = DemoApp(DemoSource("healthy"), interval=1.0, pipeline=Pipeline(),
                  options=AppOptions(manual_ticks=True))

    async def full_repaint() -> list:
        for pane in app.panes:
            pane._strips.clear()
            pane.refresh()
        app.screen.refresh()
        await pilot.pause()
        return screen_cells(app)

    async with app.run_test(size=(160, 48)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        for step in range(3):
            for _ in range(7):
                await app._poll()
                await pilot.pause()
            if step == 0:
                app.theme = "textual-light"     # same lines, other colours
            if step == 1:
                await pilot.press("3")          # zoom memory, tick, and back
                await app._poll()
                await pilot.pause()
                await pilot.press("3")
            if step == 2:
                await pilot.resize_terminal(120, 40)
            await app._poll()
            await pilot.pause()
            painted = screen_cells(app)
            assert painted == await full_repaint(), f"step {step}"


def test_sparklines_move_every_trend_slot_and_start_over_with_a_new_history():
    """A trend is drawn from the newest values when its TREND_SECONDS slot begins and kept
    for the slot (values are drawn every tick); a new History (a scenario switch, a
    replay seek) draws it anew at once."""
    from helpers.snapkit import reading, sample, snap
    from infertop.history import History
    from infertop.pipeline import Frame
    from infertop.themes import roles
    from infertop.tui.panes.context import TREND_SECONDS, PaneContext

    def history(values, t0=1000.0):
        h = History()
        for i, v in enumerate(values):
            t = t0 + i
            h.add(snap(t, sample("nvml", t, [reading("gpu.util_ratio", v, gpu=0)])))
        return h

    trends: dict = {}

    def spark(h):
        ctx = PaneContext(Frame(snap(h.now), [], h), roles({}), trends=trends)
        return ctx.spark("gpu.util_ratio", 8, 0, 1, gpu="0").plain

    assert int(1000.0 // TREND_SECONDS) * TREND_SECONDS == 1000.0
    h = history([0.0, 1.0])                 # now = 1001: the slot began at 1000
    first = spark(h)
    assert first == "▁█"
    h.add(snap(1002.0, sample("nvml", 1002.0, [reading("gpu.util_ratio", 0.0, gpu=0)])))
    assert spark(h) == first                # same slot: the trend waits
    for t in (1003.0, 1004.0, 1005.0):      # 1005 begins the next slot
        h.add(snap(t, sample("nvml", t, [reading("gpu.util_ratio", 1.0, gpu=0)])))
    assert spark(h) == "▁█▁███"
    other = history([1.0, 0.0], t0=1004.0)     # another History, now 1005: same slot
    assert spark(other) == "█▁"                # ... drawn anew
