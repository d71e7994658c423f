"""Text wrapped at boundaries, never inside a name: the capture screen's stacks.

Rich and Textual wrap at spaces and fold a word wider than the line wherever the edge
falls: at 80 columns the py-spy stacks read "vllm.entrypoints.openai.api_serv" / "er" and
"(vllm/entrypoints/launchers/api_" / "server/entry.py:232)".  Here a line breaks at a
space; a word too long for a line breaks after one of its separators ("/", ".", "_", ...);
a run with none in reach is cut with "…" and goes on on the next line.  Continuation
lines are indented two more than their line, so a frame's location reads as its own.
The width is the widget's at render time (``BoundaryWrapped``), so a resize re-wraps.
"""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text

BREAK_AFTER = frozenset("/._-:,")   # a long name may break after these
STRONG = frozenset("/.:")            # ... after these first: a path's or a module's parts
CUT_MARK = "…"


def _separator_break(plain: str, pos: int, limit: int) -> int:
    """Where a word too long for ``plain[pos:limit]`` breaks: after its last path or module
    separator ("/", ".", ":") if that keeps half the line, else after any separator in
    reach; ``pos`` when none."""
    best = pos
    for i in range(limit - 1, pos - 1, -1):
        if plain[i] in STRONG and i + 1 - pos >= (limit - pos) // 2:
            return i + 1
        if best == pos and plain[i] in BREAK_AFTER:
            best = i + 1
    return best


def _pieces(plain: str, width: int) -> list[tuple[int, int, bool]]:
    """(start, end, cut) offsets of ``plain``'s pieces, one per screen line."""
    indent = len(plain) - len(plain.lstrip(" "))
    cont = min(indent + 2, width // 2)
    out: list[tuple[int, int, bool]] = []
    pos, n = 0, len(plain)
    while pos < n:
        if out:   # a continuation: its leading spaces are the indent, not the text
            while pos < n and plain[pos] == " ":
                pos += 1
            if pos >= n:
                break
        room = width - (cont if out else 0)
        if n - pos <= room:
            out.append((pos, n, False))
            break
        limit = pos + room
        space = plain.rfind(" ", pos + 1, limit + 1)
        if space > pos and plain[pos:space].strip():
            end, cut = space, False
        else:
            end = _separator_break(plain, pos, limit)
            cut = end <= pos
            if cut:
                end = pos + max(1, room - len(CUT_MARK))
        out.append((pos, end, cut))
        pos = end
    return out


def wrap_line(line: Text, width: int) -> list[Text]:
    """``line`` (one line, styles kept) in lines of at most ``width`` columns, broken at
    boundaries (see the module's docstring)."""
    plain = line.plain
    if width < 8 or len(plain) <= width:   # too narrow to wrap usefully: as it is
        return [line]
    pieces = _pieces(plain, width)
    parts = line.divide([o for start, end, _ in pieces for o in (start, end)])
    indent = " " * min(len(plain) - len(plain.lstrip(" ")) + 2, width // 2)
    out = []
    for n, (_, _, cut) in enumerate(pieces):
        # divide's parts alternate: before the first start (empty), a piece, a gap, ...
        piece = parts[1 + 2 * n].copy()
        piece.rstrip()
        if n:
            piece = Text(indent) + piece
        if cut:
            piece.append(CUT_MARK, style="dim")
        out.append(piece)
    return out


class BoundaryWrapped:
    """A Rich renderable: ``text`` wrapped at boundaries to the width it is drawn at."""

    def __init__(self, text: Text) -> None:
        self.text = text

    def __str__(self) -> str:   # as a Text's: its plain text (what a search reads)
        return self.text.plain

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        lines = [w for line in self.text.split("\n", allow_blank=True)
                 for w in wrap_line(line, width)]
        yield Text("\n").join(lines)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.text)
