"""LeanCompositor: Textual's compositor, with a partial update that renders only what it
writes.

Textual (8.2, pinned) makes a partial update from the union of the regions refreshed since
the last one: every widget that overlaps that union renders all its rows (a cache hit and
a filter lookup for an unchanged row), and each row on a line that changed is divided at
every widget edge on that line; then only the pieces on the changed spans are written.  On
infertop's screen the union reaches from a pane near the top to the status line at the
bottom every tick, so the screen (48 rows), the panes' container (44 rows), the key line,
the header and the six panes rendered all their rows and had them filtered, ~200 rows a
tick to write ~30 (issue 23: a one-line change of the status line cost ~1.3 ms in the
compositor).

Which widget shows in a piece of a line is fixed by the layout: the front-most one that
covers it (Textual's own rule: widgets are painted front to back and the first piece for
a cut wins).  So per layout this class maps each line's cuts to that widget, and a
partial update asks each widget only for the rows of the pieces it wins that a changed
span reaches (one ``render_lines`` call over the first to the last such row); pieces no
span reaches stay empty (``None``), which the update skips as Textual's does for a cut
nothing covers.  The update then writes each piece whole (Textual cropped a piece that
ran past its span, e.g. a pane's row without its right border: a new Strip per changed
row, rendered again; the cells past the span are the widget's current ones, unchanged on
screen).  Full updates, screenshots and ``render_strips`` are Textual's.  What reaches
the terminal adds up to the screen a full repaint draws (tests/test_lean_compositor.py
replays the escape sequences on a grid of cells and compares them tick by tick).

Textual's private compositor comes through tui/textual_gate.py; on a Textual the gate does
not know, ``use_lean_compositor`` leaves the screen with Textual's own.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from textual.geometry import Region
from textual.strip import Strip

from . import textual_gate
from .textual_gate import ChopsUpdate, Compositor


def _move_to(x: int, y: int) -> str:
    """rich's Control.move_to(x, y) as text (a Control and a Segment made per piece)."""
    return f"\x1b[{y + 1};{x + 1}H"


class LeanChopsUpdate(ChopsUpdate):
    """A partial update whose pieces are written whole (see the module's docstring)."""

    def render_segments(self, console: Console) -> str:
        sequences: list[str] = []
        append = sequences.append
        chops = self.chops
        chop_ends = self.chop_ends
        last_y = self.spans[-1][0]
        for y, x1, x2 in self.spans:
            line = chops[y]
            ends = chop_ends[y]
            for end, (x, strip) in zip(ends, line.items()):
                if strip is None or x >= x2 or end <= x1:
                    continue
                append(_move_to(x, y))
                append(strip.render(console))
            if y != last_y:
                append("\n")
        return "".join(sequences)


class LeanCompositor(Compositor):
    """Compositor whose partial updates render only the rows they write."""

    def __init__(self) -> None:
        super().__init__()
        # per line: cut -> the widget that shows there; for the cuts and widgets it was
        # made from (both replaced by Textual when the layout changes)
        self._winners: list[dict[int, Any]] | None = None
        self._winners_of: tuple[Any, Any] | None = None

    def _cut_winners(self) -> list[dict[int, Any]]:
        cuts = self.cuts
        visible = self.visible_widgets
        if self._winners is not None and self._winners_of is not None and \
                self._winners_of[0] is cuts and self._winners_of[1] is visible:
            return self._winners
        winners: list[dict[int, Any]] = [{} for _ in cuts]
        for widget, (region, clip) in visible.items():     # front to back
            x, y, width, height = region.intersection(clip)
            if not (width and height):
                continue
            right = x + width
            for line_y in range(y, min(y + height, len(cuts))):
                line = winners[line_y]
                for cut in cuts[line_y][:-1]:
                    if x <= cut < right and cut not in line:
                        line[cut] = widget
        self._winners = winners
        self._winners_of = (cuts, visible)
        return winners

    def render_partial_update(self) -> ChopsUpdate | None:
        update_regions = self._dirty_regions.copy()
        self._dirty_regions.clear()
        if not update_regions:
            return None
        screen_region = self.size.region
        spans = [(y, x1, x2) for y, x1, x2 in self._regions_to_spans(update_regions)
                 if 0 <= y < screen_region.height]
        if not spans:
            return None
        cuts = self.cuts
        winners = self._cut_winners()
        # widget -> the lines it must render (a piece it wins on a changed span)
        wanted: dict[Any, set[int]] = {}
        for y, x1, x2 in spans:
            line_cuts = cuts[y]
            line_winners = winners[y]
            for x, end in zip(line_cuts, line_cuts[1:]):
                if x >= x2 or end <= x1:
                    continue
                widget = line_winners.get(x)
                if widget is not None:
                    wanted.setdefault(widget, set()).add(y)
        chops: list[dict[int, Strip | None]] = [dict.fromkeys(cut_set[:-1]) for cut_set in cuts]
        visible = self.visible_widgets
        for widget, lines in wanted.items():
            region, clip = visible[widget]
            x, y, width, height = region.intersection(clip)
            top, bottom = min(lines), max(lines)
            strips = widget.render_lines(
                Region(x - region.x, top - region.y, width, bottom - top + 1))
            right = x + width
            for line_y, strip in zip(range(top, bottom + 1), strips):
                if line_y not in lines:
                    continue
                line_winners = winners[line_y]
                line_chops = chops[line_y]
                piece_cuts = [cut for cut in cuts[line_y] if x <= cut <= right]
                if len(piece_cuts) == 2 and strip.cell_length == width:
                    # one piece, the whole row: Strip.divide would return [strip] and
                    # keep that list in the strip's own cache, a cycle only the garbage
                    # collector frees (~34 rows a tick, 7 caches each: most of the
                    # screen's cyclic garbage)
                    if line_winners.get(x) is widget:
                        line_chops[x] = strip
                    continue
                pieces = strip.divide([cut - x for cut in piece_cuts[1:]])
                for cut, piece in zip(piece_cuts, pieces):
                    if line_winners.get(cut) is widget:
                        line_chops[cut] = piece
        chop_ends = [cut_set[1:] for cut_set in cuts]
        return LeanChopsUpdate(chops, spans, chop_ends)


def use_lean_compositor(screen) -> None:
    """Give ``screen`` a LeanCompositor (before it is first arranged); on stock Textual
    (see tui/textual_gate.py) it keeps Textual's."""
    if textual_gate.FAST:
        textual_gate.set_compositor(screen, LeanCompositor())
