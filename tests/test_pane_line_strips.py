"""A pane renders each changed line alone (tui/panes/widget.py LayerPane.line_strip): the
strip must be what Textual itself makes of that line (Visual.to_strips, the oracle), with
the selection offsets of the row it is on, so a mouse drag on row 5 selects row 5's text.
Checked on every line of every pane of several demo scenarios, at 80x24 and 160x48,
zoomed and not."""

from __future__ import annotations

import pytest
from textual.geometry import Offset
from textual.selection import Selection
from textual.visual import Visual, visualize

from infertop.cli.main import build_parser, make_pipeline
from infertop.probes.sources.demo import DemoSource
from infertop.tui.modes import DemoApp
from infertop.tui.options import AppOptions
from infertop.tui.panes.widget import at_row

pytestmark = pytest.mark.slow   # every pane line against Textual's own render, per scenario


def oracle(pane, line, y, width, style):
    return at_row(Visual.to_strips(pane, visualize(pane, line), width, 1, style)[0], y)


def segments(strip):
    return [(s.text, s.style) for s in strip]


@pytest.mark.parametrize("scenario,size", [("healthy", (160, 48)), ("mem-kv-pressure", (80, 24)),
                                           ("par-tp-straggler", (80, 24)),
                                           ("par-dp-unbalanced", (160, 48))])
async def test_each_line_is_textuals_own_render_at_its_row(scenario, size):
    app = demo_app(scenario)
    async with app.run_test(size=size) as pilot:
        await ticked(app, pilot, 21)
        checked = 0
        for zoom in (None, "1", "3", "4"):
            if zoom:
                await pilot.press(zoom)
                await app._poll()
                await pilot.pause()
            for pane in app.panes:
                if not pane.display or not pane._painted_lines:
                    continue
                width, style = pane.size.width, pane.visual_style
                for y, line in enumerate(pane._painted_lines):
                    got = pane.line_strip(line, y, width, style)
                    assert segments(got) == segments(oracle(pane, line, y, width, style)), \
                        (pane.id, y, line.plain)
                    assert got.cell_length == min(line.cell_len, width)
                    offsets = [s.style.meta["offset"] for s in got if s.style and s.text]
                    assert offsets and all(oy == y for _, oy in offsets), (pane.id, y)
                    checked += 1
            if zoom:
                await pilot.press(zoom)
        assert checked > 40


def demo_app(scenario: str = "healthy") -> DemoApp:
    return DemoApp(DemoSource(scenario), interval=1.0, options=AppOptions(manual_ticks=True),
                   pipeline=make_pipeline(build_parser().parse_args([])))


async def ticked(app, pilot, n: int) -> None:
    """The first tick, then n - 1 more by hand, drawn."""
    while app.ticks < 1:
        await pilot.pause(0.01)
    for _ in range(n - 1):
        await app._poll()
    await pilot.pause()


async def test_a_selection_on_a_lower_row_selects_that_rows_text():
    app = demo_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await ticked(app, pilot, 6)
        pane = app.panes[0]
        row = 2
        assert pane._painted_lines is not None
        want = pane._painted_lines[row].plain[:6]
        assert want.strip()
        # where a drag on row 2 starts and ends: the offsets the rendered strip carries
        strip = pane.render_line(row)
        offs = [s.style.meta["offset"] for s in strip if s.style and s.text]
        start, end = Offset(*offs[0]), Offset(offs[0][0] + 6, offs[0][1])
        got = pane.get_selection(Selection(start, end))
        assert got is not None
        text, _ = got
        assert text == want


async def test_while_text_is_selected_the_highlight_is_on_the_selected_row():
    app = demo_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await ticked(app, pilot, 6)
        pane = app.panes[0]
        before = [segments(pane.render_line(y)) for y in range(3)]
        app.screen.selections = {pane: Selection(Offset(0, 2), Offset(6, 2))}
        pane.refresh()
        await pilot.pause()
        during = [segments(pane.render_line(y)) for y in range(3)]
        assert during[0] == before[0] and during[1] == before[1]   # other rows as they were
        assert during[2] != before[2]                              # the selected row lit
        app.screen.selections = {}
        pane.refresh()
        await pilot.pause()
        assert [segments(pane.render_line(y)) for y in range(3)] == before
