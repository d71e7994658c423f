"""What the main screen writes to the terminal adds up to the screen a full repaint draws
(tui/compositor.py: partial updates render only the rows they write and write each piece
whole).  The escape sequences handed to the terminal are replayed on a grid of cells, tick
after tick, through value changes, a zoom in and out, a theme switch and a resize, and
compared after each with a full repaint of the same moment: a row not written, written
from a stale cache or with an old layout's pieces shows as a cell that differs."""

from __future__ import annotations

import re
from typing import Protocol

import pytest
from rich.cells import cell_len
from rich.console import Console

from infertop.cli.main import build_parser, make_pipeline
from infertop.probes.sources.demo import DemoSource
from infertop.tui.compositor import LeanChopsUpdate, LeanCompositor
from infertop.tui.modes import DemoApp
from infertop.tui.options import AppOptions

slow = pytest.mark.slow   # the whole app driven through many ticks

ESCAPE = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])|\x1b\]8;[^\x1b]*\x1b\\")


class Update(Protocol):
    """What the app hands its driver (Textual's compositor updates): escapes to write."""

    def render_segments(self, console: Console) -> str: ...


class Terminal:
    """A grid of (character, SGR codes) cells that escape sequences are played on: the
    cursor moves (CSI row;col H), SGR (CSI ... m), text; anything else is ignored."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.cells = [[("?", "") for _ in range(width)] for _ in range(height)]
        self.x = self.y = 0
        self.sgr = ""

    def play(self, data: str) -> None:
        pos = 0
        for m in ESCAPE.finditer(data):
            self._text(data[pos:m.start()])
            pos = m.end()
            params, final = m.group(1), m.group(2)
            if final == "H":
                row, _, col = (params or "1;1").partition(";")
                self.y, self.x = int(row or 1) - 1, int(col or 1) - 1
            elif final == "m":
                self.sgr = "" if params in ("", "0") else params
        self._text(data[pos:])

    def _text(self, text: str) -> None:
        for ch in text:
            if ch == "\n":     # the updates move the cursor before each line's text
                continue
            width = cell_len(ch)
            if 0 <= self.y < self.height and 0 <= self.x < self.width:
                self.cells[self.y][self.x] = (ch, self.sgr)
                for extra in range(1, width):
                    if self.x + extra < self.width:
                        self.cells[self.y][self.x + extra] = ("", self.sgr)
            self.x += width


def demo_app() -> DemoApp:
    return DemoApp(DemoSource("healthy"), interval=1.0, options=AppOptions(manual_ticks=True),
                   pipeline=make_pipeline(build_parser().parse_args([])))


def repainted(app) -> list:
    """The screen as a full repaint of this moment draws it (Textual's own full update)."""
    size = app.screen._compositor.size
    term = Terminal(size.width, size.height)
    term.play(app.screen._compositor.render_full_update().render_segments(app.console))
    return term.cells


def test_a_piece_on_a_span_is_written_whole_and_one_past_it_not_at_all():
    from rich.console import Console
    from rich.segment import Segment
    from rich.style import Style
    from textual.strip import Strip
    red = Style(color="#ff0000")
    chops = [{0: Strip([Segment("ab", red), Segment("cd")], 4), 4: Strip([Segment("efgh")], 4),
              8: None},
             {0: Strip([Segment("ijkl")], 4), 4: Strip([Segment("mnop")], 4), 8: None}]
    update = LeanChopsUpdate(chops, [(0, 1, 3), (1, 4, 6)], [[4, 8, 10], [4, 8, 10]])
    term = Terminal(10, 2)
    term.play(update.render_segments(Console(color_system="truecolor", force_terminal=True)))
    assert "".join(ch for ch, _ in term.cells[0]) == "abcd??????"   # whole, not cut at 3
    assert "".join(ch for ch, _ in term.cells[1]) == "????mnop??"   # only the piece reached
    assert term.cells[0][0][1] and not term.cells[0][2][1]          # its styles as drawn


@slow
async def test_the_terminal_shows_what_a_full_repaint_draws_tick_after_tick():
    app = demo_app()
    writes: list[Update] = []
    display = app._display

    def spy(screen, update):
        if update is not None and screen is app.screen:
            writes.append(update)
        return display(screen, update)

    async with app.run_test(size=(160, 48)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        assert isinstance(app.screen._compositor, LeanCompositor)
        app._display = spy   # type: ignore[method-assign]  # a spy on every update written
        term = Terminal(160, 48)
        app.screen.refresh()           # the whole screen once, then partial updates
        await pilot.pause()
        checked = partial = 0
        steps = ["tick"] * 6 + ["zoom"] + ["tick"] * 3 + ["zoom"] + ["tick"] * 3 + \
            ["theme"] + ["tick"] * 3 + ["resize"] + ["tick"] * 4
        for step in steps:
            if step == "zoom":
                await pilot.press("3")
            elif step == "theme":
                app.theme = "textual-light" if app.theme != "textual-light" else "textual-dark"
            elif step == "resize":
                await pilot.resize_terminal(120, 40)
                term = Terminal(120, 40)
                app.screen.refresh()
            await app._poll()
            await pilot.pause()
            for update in writes:
                partial += isinstance(update, LeanChopsUpdate)
                term.play(update.render_segments(app.console))
            writes.clear()
            assert term.cells == repainted(app), step
            checked += 1
        assert partial >= 15     # the ticks were drawn by partial updates, not full ones
        assert checked == len(steps)


@slow
async def test_a_partial_update_leaves_no_row_holding_itself(monkeypatch):
    """Strip.divide into one piece caches [strip] in the strip itself: a cycle that only
    the garbage collector frees (~34 rows a tick were, most of the screen's cyclic
    garbage).  A partial update uses such a row as it is."""
    from textual.strip import Strip
    divide = Strip.divide
    whole: list = []

    def spy(strip, cuts):
        cuts = list(cuts)
        if cuts == [strip.cell_length]:
            whole.append(strip)
        return divide(strip, cuts)

    app = demo_app()
    async with app.run_test(size=(160, 48)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        await app._poll()
        await pilot.pause()
        monkeypatch.setattr(Strip, "divide", spy)
        for _ in range(3):
            await app._poll()
            await pilot.pause()
        monkeypatch.setattr(Strip, "divide", divide)
    assert not whole


@slow
async def test_a_piece_is_rendered_by_the_widget_that_shows_there():
    """The cut -> widget map follows the layout: after a zoom the zoomed pane owns the
    pieces the other panes had, and it is made again (not the old layout's)."""
    app = demo_app()
    async with app.run_test(size=(160, 48)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        await app._poll()
        await pilot.pause()
        comp = app.screen._compositor
        assert isinstance(comp, LeanCompositor)
        hardware, memory = app.panes[0], app.panes[2]
        y = memory.region.y + 2
        before = comp._cut_winners()
        assert before[y][memory.region.x] is memory
        await pilot.press("3")
        await app._poll()
        await pilot.pause()
        after = comp._cut_winners()
        assert after is not before
        assert after[y][memory.region.x] is memory and memory.region.x == 0
        assert hardware not in {w for line in after for w in line.values()}
