"""Cell: one immutable piece of a pane's text (a table cell, a value with its finding code).

A pane used to build a Rich Text for every value and every cell, ~500 a tick, each one
cleaning its string of control codes and measured again when its table was drawn.  A Cell
is a tuple: its plain text (already clean), a style over all of it, spans over parts of
it, its width in terminal cells and the finding codes it shows, worked out once when it
is made.  Being immutable, one Cell can be kept from tick to tick (``TickMemo``) and
handed to every caller: nobody can append to it; ``plus`` makes a new one.  Columns draws
Cells into one Text per table (columns.py), so a pane builds a handful of Texts a tick.

Appending a Cell to a Text (``append_cells``) or joining Cells (``Cell.plus``) gives the
same plain text and the same spans, in the same order, as Rich's ``Text.append_text``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple, Union

from rich.cells import cell_len as _cell_len
from rich.control import strip_control_codes
from rich.style import Style
from rich.text import Span, Text

from infertop.evidence_text import CODE_RE

StyleType = str | Style
# what can be appended: a Cell, a string (unstyled), or (string, style)
Piece = Union["Cell", str, tuple[str, StyleType]]


def clean(text: str) -> str:
    """``text`` as Rich's Text keeps it: without the control codes it strips (BEL, BS,
    VT, FF, CR).  A printable string has none: returned as it is, without a copy."""
    return text if text.isprintable() else strip_control_codes(text)


# what Rich's strip_control_codes takes out of a Text's string (BEL, BS, VT, FF, CR)
_STRIPPED = ("\x07", "\x08", "\x0b", "\x0c", "\r")


def fast_text(plain: str, style: StyleType = "", *, spans: list[Span] | None = None,
              justify=None, overflow=None, no_wrap: bool | None = None,
              end: str = "\n") -> Text:
    """``Text(plain, style, ...)``, the same Text, without Rich's pass over the string
    when it holds none of the codes that pass strips: ``str.translate`` with Rich's table
    costs ~0.14 us a character on a string with any non-ASCII character (a bar's █, °C,
    µs): ~100 us for one table of a pane, ~1 ms a tick in all.  Checking for the five
    codes is five C scans.  (Sets Text's ``_text`` and ``_length`` as its constructor
    does; tests/test_pane_cells.py checks it against Text() for strings with and without
    control codes.)"""
    if any(c in plain for c in _STRIPPED):
        return Text(plain, style, justify=justify, overflow=overflow, no_wrap=no_wrap,
                    end=end, spans=spans)
    text = Text(style=style, justify=justify, overflow=overflow, no_wrap=no_wrap, end=end,
                spans=spans)
    text._text = [plain]
    text._length = len(plain)
    return text


def codes_in(plain: str) -> tuple[str, ...]:
    """The finding codes ("HW-001") drawn in ``plain`` (none without a hyphen: no regex)."""
    return tuple(CODE_RE.findall(plain)) if "-" in plain else ()


class Cell(NamedTuple):
    """Plain text (clean: see ``clean``), a style over all of it, spans over parts of it
    (offsets into ``plain``), its width in cells and the finding codes it shows."""

    plain: str
    style: StyleType
    spans: tuple[Span, ...]
    cell_len: int
    codes: tuple[str, ...]

    @staticmethod
    def make(plain: str, style: StyleType = "", spans: tuple[Span, ...] = ()) -> Cell:
        """A Cell of ``plain``, which must be clean already (text infertop formats)."""
        return Cell(plain, style, spans, _cell_len(plain), codes_in(plain))

    @staticmethod
    def of_text(text: str, style: StyleType = "") -> Cell:
        """A Cell of any string (outside input too): cleaned as Text(text) would be."""
        return Cell.make(clean(text), style)

    @staticmethod
    def from_text(text: Text) -> Cell:
        return Cell.make(text.plain, text.style, tuple(text.spans))

    def to_text(self) -> Text:
        """A new Rich Text of this Cell (the caller's to change)."""
        return fast_text(self.plain, self.style, spans=list(self.spans))

    def plus(self, *pieces: Piece) -> Cell:
        """A new Cell: this one with ``pieces`` after it, as ``Text.append`` (a string,
        or a string and its style) and ``Text.append_text`` (a Cell) would give: this
        Cell's style stays over the whole, an appended Cell's style is a span over it."""
        parts = [self.plain]
        spans = list(self.spans)
        pos = len(self.plain)
        for piece in pieces:
            pos = _put_piece(piece, pos, parts, spans)
        return Cell.make("".join(parts), self.style, tuple(spans))


def put_styled(cell: Cell | Text, pos: int, parts: list[str], spans: list[Span]) -> int:
    """Append ``cell``'s text (a Cell's or a Text's, clean already) to a line being built
    in ``parts`` and its styles, shifted to ``pos``, to ``spans``; returns the position
    after it (Columns draws its tables with it too)."""
    plain = cell.plain
    end = pos + len(plain)
    if cell.style:
        spans.append(Span(pos, end, cell.style))
    for sp in cell.spans:
        spans.append(Span(pos + sp.start, pos + sp.end, sp.style))
    parts.append(plain)
    return end


def _put_piece(piece: Piece, pos: int, parts: list[str], spans: list[Span]) -> int:
    """``put_styled`` for any piece: a Cell, a string or (string, style)."""
    if isinstance(piece, Cell):
        return put_styled(piece, pos, parts, spans)
    text, style = (piece, None) if isinstance(piece, str) else piece
    plain = clean(text)
    end = pos + len(plain)
    if style and text:    # as Text.append: a span once the string is not empty
        spans.append(Span(pos, end, style))
    parts.append(plain)
    return end


def append_cells(out: Text, *pieces: Piece) -> Text:
    """Append ``pieces`` to the Text ``out`` (Text.append / append_text); returns ``out``."""
    for piece in pieces:
        if isinstance(piece, Cell):
            start = len(out)
            if piece.style:     # as append_text: even over an empty piece
                out.spans.append(Span(start, start + len(piece.plain), piece.style))
            out.append(piece.plain)
            out.spans.extend(Span(start + s, start + e, st) for s, e, st in piece.spans)
        elif isinstance(piece, str):
            out.append(piece)
        else:
            out.append(piece[0], style=piece[1])
    return out


@lru_cache(maxsize=4096)
def str_cell(text: str, style: StyleType = "") -> Cell:
    """A Cell of ``text`` (labels, PIDs, names, headers), the same object for the same
    string: rows repeat their labels every tick."""
    return Cell.of_text(text, style)


def as_cell(x: Cell | Text | str | object) -> Cell:
    """What a table's cell may be given as (Columns.add_row) as a Cell."""
    if isinstance(x, Cell):
        return x
    if isinstance(x, Text):
        return Cell.from_text(x)
    return str_cell(x if isinstance(x, str) else str(x))


EMPTY = Cell.make("")


class TickMemo:
    """A memo that keeps what was asked this tick or the tick before (``turn`` starts a
    tick): values a pane shows every tick are made once, and one that stopped being shown
    is dropped a tick later, so it never grows past two ticks' worth."""

    __slots__ = ("now", "before")

    def __init__(self) -> None:
        self.now: dict = {}
        self.before: dict = {}

    def turn(self) -> None:
        self.before, self.now = self.now, {}

    def get(self, key):
        got = self.now.get(key)
        if got is None:
            got = self.before.get(key)
            if got is not None:
                self.now[key] = got
        return got

    def put(self, key, value) -> None:
        self.now[key] = value
