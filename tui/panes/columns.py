"""Columns: the light table every pane draws, and the helpers that fit it to a width."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import zip_longest

from rich.text import Span, Text

from ..zoom_table import TableView, arrowed, position_line, view_order
from .cells import Cell, as_cell, fast_text, put_styled, str_cell


class Columns:
    """A light table rendered straight to Text.

    Rich's Table measures every cell on every paint; at one repaint a second for six
    panes that was most of infertop's CPU.  Panes only need left-aligned columns, so
    this pads cells to the widest one (capped) and joins them: about 10x cheaper, and a
    Text compares by value, so an unchanged pane is not repainted at all.  Cells are kept
    as Cells (cells.py: text, style, spans, width and finding codes worked out once), so
    a table is one Text when drawn, not one per cell.
    """

    def __init__(self, headers: list[str] | None = None, *, header_style: str = "",
                 widths: list[int] | None = None, max_width: int = 26, gap: int = 2,
                 cut: tuple[int, ...] = (0,), drop: tuple[int, ...] | None = None) -> None:
        self.headers = headers
        # fitting a table into a narrow pane (``fit_columns``): a value with its unit is
        # never cut.  Labels (``cut``: the first column, commands) shrink first; then whole
        # columns go, in the order ``drop`` names (default: from the right)
        self.cut = cut
        self.cut_min = CUT_MIN       # a cut column keeps at least this many columns
        self.drop = drop
        self.header_style = header_style
        self.widths = widths            # fixed widths (None: fit to content)
        self.max_width = max_width
        self.gap = gap
        self.rows: list[list[Cell]] = []
        self.codes: list[tuple[str, ...]] = []   # finding codes drawn in each row
        self.prio: list[float] = []              # lower is kept first when rows are cut
        # rows shown whenever the table shows at all, like flagged ones (decoding's TTFT:
        # the latency an SRE needs most must not give way to another table's rows)
        self.pinned: set[int] = set()
        self.more = 0           # rows known but never built (the pane could not show them)
        self.main = False       # the table a zoomed pane's keys act on first
        self.hidden = 0         # rows the last to_text left out (built or not)

    def add_row(self, *cells: Cell | Text | str, prio: float = 0.0,
                pinned: bool = False) -> None:
        row = [as_cell(c) for c in cells]
        if pinned:
            self.pinned.add(len(self.rows))
        self.rows.append(row)
        codes: tuple[str, ...] = ()
        for c in row:
            if c.codes:
                codes += c.codes
        self.codes.append(codes)
        self.prio.append(prio)

    def __bool__(self) -> bool:
        return bool(self.rows)

    def must_show(self) -> int:
        """The rows kept before any other: flagged or pinned."""
        return sum(1 for i, c in enumerate(self.codes) if c or i in self.pinned)

    def lines(self) -> int:
        return len(self.rows) + (1 if self.headers else 0) + (1 if self.more else 0)

    def flagged_first(self, rank=None) -> list[int]:
        """Row order: rows tagged with a finding first (worst first), then the rest."""
        order = range(len(self.rows))
        if not any(self.codes):
            return list(order)
        rank = rank or (lambda code: 1)
        return sorted(order, key=lambda i: -max((rank(c) for c in self.codes[i]), default=0))

    def to_text(self, limit: int | None = None, rank=None, hint: str = "",
                width: int = 0, say_more: bool = True) -> Text:
        """The table in at most ``limit`` lines: flagged rows first and never cut before
        the others, then the rest by priority; a last line says how many rows are not
        shown (``hint`` says how to see them).  ``say_more=False``: no such line, the
        count is left in ``self.hidden`` (``fit`` says one "+N more" for the whole pane)."""
        order = self.flagged_first(rank)
        head = 1 if self.headers else 0
        hidden = self.more
        extra = 1 if say_more else 0              # the line for "+N more"
        if limit is not None and head + len(order) + (extra if hidden else 0) > limit:
            if limit < head + 1 + extra:          # no room for a row: only the count
                self.hidden = len(order) + hidden
                return more_line(self.hidden, hint) if say_more else Text("", end="")
            room = limit - head - extra
            nflag = sum(1 for i in order if self.codes[i])
            keep_flag = order[:min(nflag, room)]
            others = sorted(order[nflag:], key=lambda i: (i not in self.pinned, self.prio[i], i)
                            )[:max(0, room - nflag)]
            kept = set(keep_flag) | set(others)
            hidden += len(order) - len(kept)
            order = keep_flag + sorted(others)
        self.hidden = hidden
        out = self._draw(order, None, width)
        if hidden and say_more:
            out.append("\n")
            out.append(more_line(hidden, hint))
        return out

    def window_text(self, view: TableView, limit: int, rank=None, width: int = 0,
                    styles: dict[str, str] | None = None) -> Text:
        """A zoomed pane's table in ``limit`` lines: the rows ``view`` filters and sorts,
        from its scroll offset, and a last line saying where the window is.  Only the
        window's rows are drawn (column widths too come from them)."""
        order = view_order(self.rows, self.flagged_first(rank), view)
        head = 1 if self.headers else 0
        room = max(1, limit - head - 1)
        view.headers = list(self.headers or [])
        view.rows, view.page = len(order), room
        view.clamp()
        first = view.offset
        shown = order[first:first + room]
        above = sum(1 for i in order[:first] if self.codes[i])
        below = sum(1 for i in order[first + room:] if self.codes[i])
        self.hidden = 0          # the position line says what is not on screen
        out = self._draw(shown, arrowed(view.headers, view) if self.headers else None,
                         width, skip=view.col_offset)
        view.columns = len(view.headers)
        hidden_flags = sum(1 for c in self.codes if c) - sum(1 for i in order if self.codes[i])
        line = position_line(view, first, len(shown), len(order), above, below, self.more,
                             hidden_flags)
        if out.plain or self.headers:
            out.append("\n")
        out.append(line, style=(styles or {}).get("muted", "italic"))
        return out

    def _draw(self, order: list[int], headers: list[str] | None = None,
              width: int = 0, skip: int = 0) -> Text:
        """The header and the rows ``order`` names, padded into columns (``skip``: that
        many columns after the first are scrolled out of view, ←/→ on a zoomed pane)."""
        headers = self.headers if headers is None else headers
        head = 1 if headers else 0
        rows = [self.rows[i] for i in order]
        if headers:
            rows.insert(0, [str_cell(h, self.header_style) for h in headers])
        if skip:
            rows = [r[:1] + r[1 + skip:] for r in rows]
        ncol = max(map(len, rows), default=0)
        if self.widths:
            widths = list(self.widths) + [self.max_width] * (ncol - len(self.widths))
        else:      # each column's widest cell (a short row has none in the columns it lacks)
            cap = self.max_width
            widths = [min(cap, w) for w in map(max, zip_longest(
                *[[c.cell_len for c in r] for r in rows], fillvalue=0))]
        coded: set[int] = set()
        for r, row in zip(order, rows[head:]):   # a finding's code is never cut off
            if self.codes[r]:
                for i, cell in enumerate(row):
                    if cell.codes:
                        coded.add(i)
                        if i < len(widths) - 1:
                            widths[i] = max(widths[i], cell.cell_len)
        if width and _table_width(widths, self.gap) > width:
            cut, drop = self.cut, self.drop
            if skip:     # cut and drop name the unscrolled table's columns (`o`, Right)
                cut, drop = _shifted(cut, skip), (None if drop is None else
                                                  _shifted(drop, skip))
            keep = fit_columns(widths, width, self.gap, cut, drop, coded,
                               self.cut_min)
            if len(keep) < ncol:
                rows = [[r[i] for i in keep if i < len(r)] for r in rows]
                widths = [widths[i] for i in keep]
        # the whole table as one plain string and one list of spans, offset by hand: a
        # Text.append per cell cleans and measures each piece again (most of a pane's cost)
        gap = self.gap
        pad = " " * gap
        codes = [()] * head + [self.codes[r] for r in order]
        parts: list[str] = []
        spans: list[Span] = []
        add_span = spans.append
        pos = 0
        for n, row in enumerate(rows):
            if n:
                parts.append("\n")
                pos += 1
            last = len(row) - 1
            # a flagged row that may be wider than the pane: drawn as a Text of its own and
            # cut to keep its codes in view.  Every cell but the last is padded (or cut) to
            # its column's width, so whether it fits is known without drawing it
            if width and codes[n] and last >= 0 and sum(widths[:last]) + gap * last + \
                    min(row[last].cell_len, widths[last]) > width:
                line = self._row_text(row, widths, pad)
                if line.cell_len > width:
                    line = _keep_codes(line, codes[n], width)
                pos = put_styled(line, pos, parts, spans)
                continue
            for i, cell in enumerate(row):
                if i:
                    parts.append(pad)
                    pos += gap
                w = widths[i]
                plain, style, cell_spans, cells, _ = cell
                if cells > w:
                    plain, style, cell_spans, cells, _ = \
                        Cell.from_text(cut_cell(cell.to_text(), w))
                end = pos + len(plain)    # put_styled, inline: ~300 cells a tick
                if style:
                    add_span(Span(pos, end, style))
                for s, e, st in cell_spans:
                    add_span(Span(pos + s, pos + e, st))
                parts.append(plain)
                pos = end
                if i < last and w > cells:
                    parts.append(" " * (w - cells))
                    pos += w - cells
        return fast_text("".join(parts), no_wrap=True, overflow="ellipsis", end="", spans=spans)

    @staticmethod
    def _row_text(row: Sequence[Cell | Text], widths: list[int], pad: str) -> Text:
        """One row as a Text of its own (a flagged row that may need cutting to keep its
        finding code in view)."""
        line = Text(no_wrap=True, end="")
        for i, piece in enumerate(row):
            if i:
                line.append(pad)
            w = widths[i]
            cell: Text = piece.to_text() if isinstance(piece, Cell) else piece
            if cell.cell_len > w:
                cell = cut_cell(cell, w)
            line.append_text(cell)
            if i < len(row) - 1:
                line.append(" " * (w - cell.cell_len))
        return line


def cut_cell(cell: Text, w: int) -> Text:
    """``cell`` cut to ``w`` columns with a cut mark, never inside a number: "GPU 12…"
    would read as a value, so the cut moves back before the digits ("GPU …")."""
    out = cell.copy()
    out.truncate(w, overflow="ellipsis")
    plain = out.plain
    if len(plain) >= 2 and plain.endswith("…") and plain[-2] in DIGITS:
        keep = len(plain) - 1
        while keep and plain[keep - 1] in DIGITS:
            keep -= 1
        out = out[:keep]
        out.append("…")
    return out


DIGITS = frozenset("0123456789.,")


def _shifted(columns: tuple[int, ...], skip: int) -> tuple[int, ...]:
    """Column indices of a table with ``skip`` columns after the first scrolled out of
    view: those columns are gone, the ones after them move left."""
    return tuple(i if i == 0 else i - skip for i in columns if i == 0 or i > skip)


def _table_width(widths: list[int], gap: int) -> int:
    return sum(widths) + gap * max(0, len(widths) - 1)


CUT_MIN = 6     # a label shrinks to this many columns ("0 H10…") before a column goes


def fit_columns(widths: list[int], width: int, gap: int, cut: tuple[int, ...],
                drop: tuple[int, ...] | None, coded: set[int],
                cut_min: int = 6) -> list[int]:
    """Make a table ``width`` columns wide without cutting a value: shrink the cuttable
    columns (``cut``: labels, commands; ``widths`` is changed in place) to CUT_MIN, then
    leave out whole columns in ``drop``'s order (default right to left), a column holding
    a finding's code last; then give what is left over back to the cut columns, ``cut``'s
    first first.  Returns the columns kept, in order.  Column 0 always stays (it says what
    the row is)."""
    n = len(widths)
    natural = list(widths)
    shrink_columns(widths, sum(widths), cut, cut_min)   # every cut column to cut_min
    keep = list(range(n))
    order = [i for i in (drop if drop is not None else range(n - 1, 0, -1)) if 0 < i < n]
    order += [i for i in range(n - 1, 0, -1) if i not in order]   # then any other
    order = [i for i in order if i not in coded] + [i for i in order if i in coded]
    for i in order:
        if _table_width([widths[k] for k in keep], gap) <= width:
            break
        keep.remove(i)
    # the kept ones whole again, then cut as little as fits: ``cut``'s last first (what
    # is left over goes back to its first first)
    for i in keep:
        widths[i] = natural[i]
    shrink_columns(widths, _table_width([widths[k] for k in keep], gap) - width,
                   [i for i in reversed(cut) if i in keep], cut_min)
    return keep


def shrink_columns(widths: list[int], over: int, order: Sequence[int], floor: int) -> int:
    """Take ``over`` columns off ``widths`` (in place) from the columns ``order`` names,
    each down to ``floor`` before the next one gives any; returns what is still over.
    The panes' tables (fit_columns) and the capture screen's (capture_table.fit_widths)
    shrink their label columns with it."""
    for i in order:
        if over <= 0:
            break
        if i < len(widths):
            take = min(over, max(0, widths[i] - floor))
            widths[i] -= take
            over -= take
    return over


def _keep_codes(line: Text, codes: tuple[str, ...], width: int) -> Text:
    """A flagged row wider than the pane: cut it before the edge so that its finding
    codes stay visible at the end (the widget would cut them off otherwise)."""
    tail = " " + " ".join(dict.fromkeys(codes))
    start = line.plain.find(codes[0])
    if start >= 0 and start + len(tail) <= width:
        return line   # the code itself is on screen
    style = next((sp.style for sp in line.spans
                  if line.plain[sp.start:sp.end].strip() == codes[0]), "")
    cut = line[: max(1, width - len(tail) - 1)]
    cut.append("…")
    cut.append(tail, style=style)
    return cut


def more_line(n: int, hint: str = "") -> Text:
    return Text(f"+{n} more" + (f" ({hint})" if hint else ""), style="italic")


def kv_table(rows: Sequence[tuple[str, Cell | Text, Cell | Text | str]], *,
             label_width: int = 14, narrow: bool = False) -> Columns:
    """Label / value / sparkline rows, the common pane body (narrow: 80x24 panes)."""
    longest = max((len(r[0]) for r in rows), default=0)   # engine-labelled rows: " e1"
    t = Columns(widths=[max(12, min(20, longest)), 22, 10] if narrow else
                [max(label_width, min(24, longest)), 30, 24], gap=1)
    for label, value, extra in rows:
        t.add_row(label, value, extra)
    return t


def grid(headers: list[str], *, styles: dict[str, str], max_width: int = 26) -> Columns:
    return Columns(headers, header_style=styles["header"], max_width=max_width)


def group(*parts: Text | Columns | None) -> Text:
    """Stack parts into one Text (one paint, comparable with the previous frame)."""
    out = Text(no_wrap=True, overflow="ellipsis", end="")
    first = True
    for p in parts:
        if p is None or (isinstance(p, Columns) and not p):
            continue
        if not first:
            out.append("\n")
        first = False
        out.append_text(p.to_text() if isinstance(p, Columns) else p)
    return out
