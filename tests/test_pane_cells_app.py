"""The live screen's caches across ticks (the app's value memo, ``InfertopApp._values``, and
paint's kept lines): after a tick that changes a value, a status or a finding's tag, after a
theme change and after a resize, every pane shows what a fresh draw of the same frame
(no memo, nothing kept) shows, that same tick, line for line."""

from __future__ import annotations

import dataclasses

import pytest

from helpers.synthetic_source import SyntheticSource
from infertop.findings import Evidence, Finding, Severity
from infertop.model import Layer, Sample, Status
from infertop.pipeline import Pipeline
from infertop.tui.app import InfertopApp
from infertop.tui.options import AppOptions
from infertop.tui.panes.context import FrameLookups
from infertop.tui.panes.widget import split_lines

pytestmark = pytest.mark.slow   # the whole app, driven tick by tick


class TempMoves(SyntheticSource):
    """The synthetic box with GPU 0's temperature (value, status) set by the test."""

    temp: tuple[float | None, Status] = (61.0, Status.OK)

    async def next(self):
        snap = await super().next()
        nvml = snap.samples["nvml"]
        value, status = self.temp
        rs = tuple(dataclasses.replace(r, value=value, status=status)
                   if r.key == "gpu.temp_celsius" and r.label("gpu") == "0" else r
                   for r in nvml.readings)
        samples = dict(snap.samples, nvml=Sample("nvml", nvml.time, rs, nvml.status,
                                                 nvml.reason, nvml.meta))
        return dataclasses.replace(snap, samples=samples)


def facts(lines) -> list[tuple]:
    return [(t.plain, t.spans, t.style) for t in lines]


def assert_fresh(app: InfertopApp) -> str:
    """Every shown pane's painted Text and lines are a fresh draw's; the hardware pane's
    text."""
    lookups = FrameLookups(app.frame, app.role_styles, summaries=app.summaries,
                           trends=app._trends)          # a memo of its own: made anew
    for pane in app.panes:
        if not pane.display:
            continue
        size = pane.size
        want = pane._draw_own(lookups, pane.is_zoomed(), pane.table_view, size.width >= 110,
                              max(1, size.height), max(1, size.width))
        got = pane.last_renderable
        assert got == want, pane.pane_layer
        assert facts(pane._painted_lines) == facts(split_lines(want)), pane.pane_layer
    return app.query_one("#pane-hardware").last_renderable.plain


def temp_finding() -> Finding:
    ev = Evidence("gpu.temp_celsius", (("gpu", "0"),), 90.0, 85.0, ">=", "celsius")
    return Finding("HW-977", Layer.HARDWARE, Severity.CRIT, "hot", (ev,), "", 0.0,
                   (("gpu", "0"),))


async def test_values_statuses_tags_themes_and_sizes_show_the_same_tick():
    src = TempMoves(gpus=2)
    app = InfertopApp(src, pipeline=Pipeline(), options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(160, 48)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        for _ in range(3):
            await app._poll()
        await pilot.pause()
        assert "61 °C" in assert_fresh(app)
        src.temp = (62.0, Status.OK)              # a value
        await app._poll()
        assert "62 °C" in assert_fresh(app)
        src.temp = (62.0, Status.STALE)           # a status, the same value
        await app._poll()
        assert "62 °C*" in assert_fresh(app)
        src.temp = (62.0, Status.OK)
        await app._poll()
        assert "62 °C*" not in assert_fresh(app)
        frame = app.frame                         # a finding about it, then none
        app._apply(dataclasses.replace(frame, findings=[*frame.findings, temp_finding()]))
        assert "62 °C HW-977" in assert_fresh(app)
        crit_before = app.role_styles["crit"]
        app.theme = "textual-light" if app.theme != "textual-light" else "nord"
        await pilot.pause()                       # the theme: the same frame redrawn
        assert app.role_styles["crit"] != crit_before
        hw = app.query_one("#pane-hardware")
        line = next(t for t in hw._painted_lines if "HW-977" in t.plain)
        assert {sp.style for sp in line.spans if "HW-977" in line.plain[sp.start:sp.end]} \
            == {app.role_styles["crit"]}
        assert "62 °C HW-977" in assert_fresh(app)
        app._apply(frame)
        assert "HW-977" not in assert_fresh(app)
        await pilot.resize_terminal(100, 30)      # a resize: drawn at the new sizes
        await pilot.pause()
        await app._poll()
        await pilot.pause()
        assert_fresh(app)
        src.temp = (63.0, Status.OK)
        await app._poll()
        assert "63 °C" in assert_fresh(app)
