"""The capture screen's table, fitted to its width as the panes' tables are (issue 23).

A DataTable sizes each column to its widest cell, so at 80x24 a 34-column thread name
pushed `P`'s cpu and gil columns off the table's right edge, and the name was cut by the
edge with no mark.  Here the value columns (PID, state, cpu, gil, time, calls, avg µs)
always keep their whole width; the label columns (``cut``: thread or kernel name first,
then a process role) shrink, and a cut label ends with "…" (``cut_cell``: never right
after a digit, so a cut label does not read as a value).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.widgets import DataTable

from ..panes.columns import CUT_MIN, cut_cell, shrink_columns


def fit_widths(natural: Sequence[int], width: int, pad: int, cut: Sequence[int],
               cut_min: int = CUT_MIN) -> list[int]:
    """Column content widths for a table ``width`` columns wide whose every column takes
    ``pad`` more: the ``cut`` columns shrink, in that order, to ``cut_min`` (then below it,
    in the same order, down to 1) until the table fits; the others never shrink (a table
    too narrow for its values scrolls rather than cut a value)."""
    widths = list(natural)
    over = sum(widths) + pad * len(widths) - width
    for floor in (cut_min, 1):
        over = shrink_columns(widths, over, cut, floor)
    return widths


class CaptureTable(DataTable):
    """A DataTable whose columns are fitted to its own width, again on each resize;
    Home/End go to the first/last row, as in htop (DataTable's own go to the first/last
    column, and the columns are fitted: they did nothing)."""

    BINDINGS = [
        Binding("home", "scroll_top", "first row", show=False),
        Binding("end", "scroll_bottom", "last row", show=False),
    ]

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._headers: list[str] = []
        self._rows: list[tuple[list[str | Text], str | None]] = []
        self._cut: tuple[int, ...] = ()
        self._fitted_to = -1       # the width the columns were last fitted to

    def show(self, headers: list[str], rows: list[tuple[list[str | Text], str | None]],
             cut: tuple[int, ...]) -> None:
        """Replace the table: ``rows`` are (cells, row key); ``cut`` the label columns
        that shrink, the one to cut first first."""
        self._headers, self._rows, self._cut = headers, rows, cut
        self._fill()

    def _room(self) -> int:
        """Columns the table can draw in without a horizontal scrollbar (0: not laid out
        yet, the columns take their natural widths until the first resize)."""
        region = self.content_region
        if not region.width:
            return 0
        room = region.width
        if len(self._rows) + 1 > region.height:      # rows and header: a vertical scrollbar
            room -= self.styles.scrollbar_size_vertical
        return room

    def _fill(self) -> None:
        row = self.cursor_row
        self.clear(columns=True)
        if not self._headers:
            self._fitted_to = -1
            return
        cells = [[c if isinstance(c, Text) else Text(str(c)) for c in r] for r, _ in self._rows]
        natural = [max([len(h)] + [r[i].cell_len for r in cells if i < len(r)])
                   for i, h in enumerate(self._headers)]
        room = self._room()
        self._fitted_to = room
        widths = fit_widths(natural, room, 2 * self.cell_padding, self._cut) if room else natural
        for h, w in zip(self._headers, widths):
            self.add_column(h, width=w)
        for r, (_, key) in zip(cells, self._rows):
            self.add_row(*(cut_cell(c, w) if c.cell_len > w else c for c, w in zip(r, widths)),
                         key=key)
        if self.row_count and row:
            self.move_cursor(row=min(row, self.row_count - 1), animate=False)

    def on_resize(self, _event: events.Resize) -> None:
        if self._headers and self._room() != self._fitted_to:
            self._fill()
