"""A zoomed pane's table as a person works with it (htop, nvitop): scroll, sort by any
column, filter by text.

The state (``TableView``) belongs to one pane widget and only says what was asked: which
of the pane's tables, which column, which direction, what text, how far down.  Drawing
stays a pure function of the Frame plus this state: ``base.fit`` orders the rows with
``view_order`` and draws only the window that fits (``window``), so the cost of a draw
grows with the rows shown, not with the rows sorted past.

Sorting is by value, not by text: "900 MiB" sorts below "1.2 GiB", "41 ms" below "2.0 s";
cells without a value ("–", "n/a", "err") always go last, whichever the direction.
Flagged rows keep their finding code and style wherever the sort puts them, and the
position line says how many flagged rows are above or below the window.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from textual.binding import Binding, BindingType

if TYPE_CHECKING:
    from textual.app import App
    from textual.screen import Screen

from infertop.model import LAYERS
from infertop.textclean import clean

ZOOM_ROWS = 500    # rows a zoomed pane builds for its tables (scroll, sort and filter range)

# 1-6 zoom a pane (and back), h plots the zoomed pane's history: the main screen's and a
# fleet node's screen's keys alike
ZOOM_BINDINGS = [
    *(Binding(str(i + 1), f"zoom({i})", layer.value, show=False)
      for i, layer in enumerate(LAYERS)),
    Binding("h", "history_plot", "plot the zoomed pane's history / hide it", show=False),
]

# keys of a zoomed pane (bound on the pane widget: active when it has the focus and is
# zoomed; keys 1-6 zoom and focus it).  `h` is the long-history plot's (another module).
TABLE_BINDINGS: list[BindingType] = [
    Binding("s", "table_sort", "sort"),
    Binding("S", "table_reverse", "reverse"),
    Binding("slash", "table_filter", "filter", key_display="/"),
    Binding("t", "table_next", "next table"),
    Binding("escape", "table_clear", "clear filter", show=False),
    Binding("up", "table_scroll(-1)", "up", show=False),
    Binding("down", "table_scroll(1)", "down", show=False),
    Binding("pageup", "table_page(-1)", "page up", show=False),
    Binding("pagedown", "table_page(1)", "page down", show=False),
    Binding("home", "table_home", "top", show=False),
    Binding("end", "table_end", "bottom", show=False),
    Binding("left", "table_columns(-1)", "columns left", show=False),
    Binding("right", "table_columns(1)", "columns right", show=False),
]

ID_COLUMNS = {"GPU", "PID", "TID", "engine", "node", "of PID"}

# what the help screen says for them (one row for the scrolling keys)
TABLE_HELP = [
    ("s", "zoomed pane: sort by the next column (then the pane's own order again)"),
    ("S", "zoomed pane: reverse the sort"),
    ("/", "zoomed pane: filter rows by text (Esc clears)"),
    ("t", "zoomed pane: the next table of the pane (sort, filter and scroll it)"),
    ("↑ ↓ PgUp PgDn Home End", "zoomed pane: scroll the table"),
    ("← →", "zoomed pane: scroll a wide table's columns (the first stays)"),
]


@dataclass
class TableView:
    """What was asked of a zoomed pane's table, plus what its last draw measured."""

    table: int = 0                 # which of the pane's tables (t cycles)
    sort: int | None = None        # column index; None: the pane's own order, flagged first
    reverse: bool = False
    query: str = ""
    offset: int = 0                # first row of the window
    col_offset: int = 0            # columns after the first scrolled out of view (←/→)
    columns: int = 0               # the table's columns (measured by the last draw)
    # measured by the last draw, for paging and for `s` to know the columns
    tables: int = 0
    rows: int = 0                  # rows after the filter
    page: int = 1                  # rows the window could show
    headers: list[str] = field(default_factory=list)
    last_rows: list = field(default_factory=list, repr=False)

    def clamp(self) -> None:
        self.offset = max(0, min(self.offset, self.rows - self.page))

    # -- the keys' effects (pure state changes; the pane redraws) ----------------------
    def next_sort(self, numeric: Callable[[int], bool] | None = None) -> None:
        """The next column, then back to the pane's own order.  A numeric column starts
        largest first (what is using the most), a text column A to Z."""
        n = len(self.headers)
        if n == 0:
            return
        nxt = 0 if self.sort is None else self.sort + 1
        self.sort = nxt if nxt < n else None
        self.reverse = bool(numeric(self.sort)) if (numeric and self.sort is not None) else False
        self.offset = 0

    def next_table(self) -> None:
        self.table = (self.table + 1) % max(1, self.tables)
        self.sort, self.reverse, self.offset, self.col_offset = None, False, 0, 0

    def scroll(self, n: int) -> None:
        self.offset += n
        self.clamp()


def is_measure(headers: list[str], rows, col: int) -> bool:
    """A numeric column that is not an identifier: sorted largest first (what uses the
    most); identifiers (GPU 0, 1, 2; PIDs) in their order.  The whole header decides:
    "GPU mem" is a measure, "GPU" and "of PID" are not."""
    return column_is_numeric(rows, col) and headers[col].strip() not in ID_COLUMNS


# ---- sorting by value ------------------------------------------------------------------
_NUM = re.compile(r"(-?\d+(?:\.\d+)?)(?:\s*/\s*-?\d+(?:\.\d+)?)?(?:\s*([A-Za-zµ%°]+))?")
_UNIT = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
         "ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0,
         "Hz": 1.0, "kHz": 1e3, "MHz": 1e6, "GHz": 1e9}
_SI = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_MISSING = {"", "–", "-", "n/a", "err", "?", "none"}
_METER = " ·▏▎▍▌▋▊▉█░▁▂▃▄▅▆▇"     # bars and sparklines drawn before a value
_DIGITS = re.compile(r"([0-9]+)")   # ASCII: str.isdigit() also says yes to "²"


def cell_value(text: str) -> float | tuple | None:
    """A cell's sort value: a number in base units when it starts with one ("1.2 GiB",
    "41 ms", "73 %", "█████░ 73 %"; "12/80 GiB" is its first number), else its text in
    natural order ("GPU 2" before "GPU 10"); None when it shows nothing ("–", "n/a")."""
    s = text.strip()
    if s.lower() in _MISSING:
        return None
    m = _NUM.match(s.lstrip(_METER))
    if m is None:
        low = s.lower()
        # split() puts the digit runs at the odd places: numbers there, text between
        return tuple(int(p) if i % 2 else p for i, p in enumerate(_DIGITS.split(low)))
    value = float(m.group(1))
    unit = m.group(2) or ""
    if unit in _UNIT:
        value *= _UNIT[unit]
    elif unit[:1] in _SI:    # "3.1 k/s", "1.2 Mtokens/s"
        value *= _SI[unit[0]]
    return value


def sort_key(v: float | tuple) -> tuple:
    """Numbers before words; numbers by value, words in natural order."""
    return (0, v, ()) if isinstance(v, float) else (1, 0.0, v)


def column_is_numeric(rows: list[list[Any]], col: int) -> bool:
    nums = words = 0
    for r in rows[:200]:
        if col < len(r):
            v = cell_value(r[col].plain)
            if isinstance(v, float):
                nums += 1
            elif v is not None:
                words += 1
    return nums > words


def row_text(row: list[Any]) -> str:
    return " ".join(c.plain for c in row).lower()


def view_order(rows: list[list[Any]], default: list[int], view: TableView) -> list[int]:
    """Row indices after the filter and the sort: the pane's own order (``default``:
    flagged first) unless a column is chosen; rows without a value in that column last."""
    q = view.query.strip().lower()
    order = [i for i in default if q in row_text(rows[i])] if q else list(default)
    col = view.sort
    if col is None:
        return order
    have: list[tuple[Any, int]] = []
    missing: list[tuple[Any, int]] = []
    for i in order:
        v = cell_value(rows[i][col].plain) if col < len(rows[i]) else None
        (missing if v is None else have).append((v, i))
    have.sort(key=lambda p: sort_key(p[0]), reverse=view.reverse)   # stable within ties
    return [i for _, i in have] + [i for _, i in missing]


def arrowed(headers: list[str], view: TableView) -> list[str]:
    if view.sort is None or view.sort >= len(headers):
        return list(headers)
    out = list(headers)
    out[view.sort] += " ▼" if view.reverse else " ▲"
    return out


def position_line(view: TableView, first: int, shown: int, total: int,
                  flagged_above: int, flagged_below: int, unbuilt: int,
                  flagged_filtered: int = 0) -> str:
    """'rows 21-40 of 134 · sort mem ▼ · filter "vllm" · 2 flagged below (End)'."""
    if shown:
        parts = [f"rows {first + 1}-{first + shown} of {total}"]
    else:
        parts = ["no row matches" if view.query else "no rows"]
    if view.sort is not None and view.sort < len(view.headers):
        parts.append(f"sort {view.headers[view.sort]} {'▼' if view.reverse else '▲'}")
    if view.query:
        parts.append(f'filter "{clean(view.query)}" (Esc clears)')   # typed or pasted text
    if flagged_above:
        parts.append(f"{flagged_above} flagged above")
    if flagged_below:
        parts.append(f"{flagged_below} flagged below")
    if flagged_filtered:
        parts.append(f"{flagged_filtered} flagged not matching")
    if unbuilt:
        parts.append(f"+{unbuilt} not listed (over {ZOOM_ROWS})")
    if view.tables > 1:
        parts.append(f"table {view.table % view.tables + 1}/{view.tables} (t)")
    if view.col_offset:
        parts.append(f"{view.col_offset} column(s) left of view (←)")
    if not view.query and view.sort is None:
        parts.append("s sort · / filter · ↑↓ scroll")
    return " · ".join(parts)


class ZoomTableKeys:
    """The zoomed pane's table keys, mixed into LayerPane (which sets ``table_view``,
    ``is_zoomed`` and ``redraw_table``)."""

    table_view: TableView
    if TYPE_CHECKING:   # the widget's (Textual's Widget.app/.screen), for the checker only
        app: App[Any]
        screen: Screen[Any]
        display: bool

        def focus(self, scroll_visible: bool = True) -> Any: ...

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action.startswith("table_"):
            if not self.is_zoomed():
                return False          # the key falls through to the screen and the app
            if action == "table_clear" and not self.table_view.query:
                return False          # Esc without a filter: the screen's Esc (node: back)
        return True

    def action_table_sort(self) -> None:
        v = self.table_view
        if not v.tables:
            self.app.notify("this pane has no table to sort", timeout=2)
            return
        rows = v.last_rows
        v.next_sort(lambda col: is_measure(v.headers, rows, col))
        self.redraw_table()
        what = "the pane's own order (flagged first)" if v.sort is None else \
            f"{v.headers[v.sort]} {'▼' if v.reverse else '▲'}"
        self.app.notify(f"sort: {what}", timeout=2)

    def action_table_reverse(self) -> None:
        self.table_view.reverse = not self.table_view.reverse
        self.redraw_table()

    def action_table_next(self) -> None:
        self.table_view.next_table()
        self.redraw_table()

    def action_table_filter(self) -> None:
        """Type the filter on the bottom line; the table filters as you type."""
        from .widgets.filter_line import FilterLine
        self.screen.query_one("#table-filter", FilterLine).open_for(self)

    def action_table_clear(self) -> None:
        self.table_view.query = ""
        self.table_view.offset = 0
        self.redraw_table()

    def action_table_scroll(self, n: int) -> None:
        self.table_view.scroll(n)
        self.redraw_table()

    def action_table_page(self, n: int) -> None:
        self.table_view.scroll(n * max(1, self.table_view.page))
        self.redraw_table()

    def action_table_columns(self, n: int) -> None:
        v = self.table_view
        v.col_offset = max(0, min(v.col_offset + n, max(0, v.columns - 2)))
        self.redraw_table()

    def action_table_home(self) -> None:
        self.table_view.offset = 0
        self.redraw_table()

    def action_table_end(self) -> None:
        self.table_view.offset = self.table_view.rows
        self.table_view.clamp()
        self.redraw_table()

    # provided by LayerPane
    def is_zoomed(self) -> bool:  # pragma: no cover - overridden
        return False

    def redraw_table(self) -> None:  # pragma: no cover - overridden
        pass
