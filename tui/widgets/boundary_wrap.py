"""Text wrapped at boundaries, never inside a name: the capture screen's stacks.

Rich and Textual wrap at spaces and fold a word wider than the line wherever the edge
falls: at 80 columns the py-spy stacks read "vllm.entrypoints.openai.api_serv" / "er" and
"(vllm/entrypoints/launchers/api_" / "server/entry.py:232)".  Here a line breaks at a
space; a word too long for a line breaks after one of its separators ("/", ".", "_", ...);
a run with none in reach is cut with "…" and goes on on the next line.  Continuation
lines are indented two more than their line, so a frame's location reads as its own.
The width is the widget's at render time (``BoundaryWrapped``), so a resize re-wraps.

``BoundaryWrapped`` is a Static that renders the wrapped lines as a ``Text``: Textual
selects (mouse drag, copy) only Text/Content, not a Rich renderable's output, so the
wrapping happens in ``render`` and the copied text is the lines the screen shows.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import RenderResult
from textual.geometry import Size
from textual.visual import visualize
from textual.widgets import Static

from .. import textual_gate

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


def wrap_text(text: Text, width: int) -> Text:
    """Each line of ``text`` wrapped at boundaries to ``width`` columns (``wrap_line``)."""
    return Text("\n").join([w for line in text.split("\n", allow_blank=True)
                            for w in wrap_line(line, width)])


class BoundaryWrapped(Static):
    """A Static whose ``Text`` content is drawn wrapped at boundaries to the widget's width.

    Other content (a str, a renderable) is drawn as a Static draws it.  The auto height
    is the wrapped text's at the width the layout offers (``get_content_height``), so the
    scroll region holds every wrapped line.
    """

    def _wrapped(self, width: int) -> RenderResult:
        content = self.content
        if isinstance(content, Text) and width > 0:
            return wrap_text(content, width)
        return self.visual

    def render(self) -> RenderResult:
        return self._wrapped(self.size.width)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        if not width:
            return 0
        cached = textual_gate.content_height_cached(self, width)
        if cached is not None:
            return cached
        # _wrapped gives a Text or the Static's own Visual, never a str: markup is moot
        visual = visualize(self, self._wrapped(width))
        # as Widget.get_content_height measures it (RenderStyles reads as a RulesMap)
        height = visual.get_height(self.styles, width)  # type: ignore[arg-type]
        textual_gate.cache_content_height(self, width, height)
        return height
