"""PaneStylesCache: Textual's per-widget line cache, with a pane's content rows joined
from pieces instead of going through Textual's whole line routine each time.

Textual (8.2, pinned) renders a widget row by row in ``StylesCache.render_line``: for a
content row it reads the border, outline, padding, hatch, tint and opacity styles, builds
the border's styles, pads the content line (a new Strip), pads again for the padding, adds
the border segments and makes a last Strip.  On the live harness about 30 pane rows change
every tick, and that routine cost more than rendering the row's own text (issue 23).

For a pane the part of a content row outside its text (left border and padding, right
padding and border) is the same on every content row, as long as nothing per-row applies
(no outline, hatch, tint, text opacity or widget opacity).  So it is taken once from
Textual's own routine, by rendering a content row whose text is a marker, and kept while
the inputs it depends on stay the same; a content row is then the pieces before the
marker, the row's text padded to the content width, and the pieces after it: exactly the
segments Textual makes (tests/test_pane_styles_cache.py compares every row with Textual's
own render).  Anything else (border rows, padding rows, a style the marker does not come
through untouched) goes through Textual's routine as before.  Invalidation is Textual's:
this class only changes how a row that Textual decided to render is made.  Textual's
private StylesCache comes through tui/textual_gate.py; on a Textual the gate does not know,
``install`` leaves a widget with Textual's own cache.
"""

from __future__ import annotations

from typing import Any

from rich.segment import Segment
from rich.terminal_theme import DEFAULT_TERMINAL_THEME
from textual.strip import Strip

from .. import textual_gate
from ..textual_gate import StylesCache

# a private-use character no pane draws: the content of the row that locates the frame
MARKER = "\ue0ff"


class PaneStylesCache(StylesCache):
    """StylesCache with the fast content rows described in the module's docstring."""

    def __init__(self) -> None:
        super().__init__()
        self._frame_key: tuple | None = None
        # (prefix segments, suffix segments, the pad style, first and last+1 content row)
        # of the frame for _frame_key; None: no fast path for these styles
        self._frame: tuple[list[Segment], list[Segment], Any, int, int] | None = None
        self._frame_now: tuple[list[Segment], list[Segment], Any, int, int] | None = None

    def clear(self) -> None:
        super().clear()
        self._frame_key = None
        self._frame = None

    def render(self, styles, size, base_background, background, render_content_line,
               filters, border_title, border_subtitle, content_size=None, padding=None,
               crop=None, opacity=1.0, **kwargs):
        if content_size is None:
            content_size = size
        if padding is None:
            padding = styles.padding
        if size.width != self._width:   # what Textual's render does first: clearing after
            self.clear()                # the frame was found would drop it again
            self._width = size.width
        self._frame_now = self._frame_for(styles, size, content_size, padding,
                                          base_background, background, opacity,
                                          border_title, border_subtitle, kwargs)
        try:
            return super().render(styles, size, base_background, background,
                                  render_content_line, filters, border_title,
                                  border_subtitle, content_size=content_size,
                                  padding=padding, crop=crop, opacity=opacity, **kwargs)
        finally:
            self._frame_now = None

    def render_line(self, styles, y, size, content_size, padding, base_background,
                    background, render_content_line, *args) -> Strip:
        frame = self._frame_now
        if frame is None or not frame[3] <= y < frame[4]:
            return super().render_line(styles, y, size, content_size, padding,
                                       base_background, background, render_content_line,
                                       *args)
        prefix, suffix, pad_style, top, _ = frame
        content_width, content_height = content_size
        if y - top < content_height:
            line = render_content_line(y - top)
        else:
            line = Strip.blank(content_width, pad_style)
        cells = line.cell_length
        if cells > content_width:      # as Textual's adjust_cell_length: cut it
            line = line.adjust_cell_length(content_width, pad_style)
            cells = content_width
        segments = [*prefix, *line]
        if cells < content_width:      # ... or pad it with the content's background
            segments.append(Segment(" " * (content_width - cells), pad_style))
        segments.extend(suffix)
        return Strip(segments, size.width)

    def _frame_for(self, styles, size, content_size, padding, base_background, background,
                   opacity, border_title, border_subtitle, kwargs):
        """The frame of a content row for these inputs (memoized on them), or None."""
        key = (size, content_size, padding, base_background, background, opacity,
               styles.border, styles.outline, styles.tint, styles.text_opacity,
               styles.gutter, styles.has_rule("hatch") and styles.hatch)
        if key == self._frame_key:
            return self._frame
        self._frame_key = key
        self._frame = self._measure(styles, size, content_size, padding, base_background,
                                    background, opacity, border_title, border_subtitle,
                                    kwargs)
        return self._frame

    def _measure(self, styles, size, content_size, padding, base_background, background,
                 opacity, border_title, border_subtitle, kwargs):
        """Render one content row through Textual with a marker as its text, and cut the
        result around the marker; None when the marker does not come through as one
        untouched segment (a style that changes content rows) or there is no content row."""
        if opacity != 1.0 or styles.text_opacity != 1.0 or styles.tint.a or \
                any(edge for edge, _ in styles.outline):
            return None
        if styles.has_rule("hatch") and styles.hatch != "none":
            return None
        gutter = styles.gutter
        width, height = size
        top, bottom = gutter.top, height - gutter.bottom
        (border_top, _), _, (border_bottom, _), _ = styles.border
        if border_top and top < 1 or border_bottom and bottom > height - 1:
            return None     # a border row inside the content rows: not this layout
        content_width = content_size.width
        if bottom <= top or content_width <= 0:
            return None
        marker = Segment(MARKER * content_width)
        strip = super().render_line(
            styles, top, size, content_size, padding, base_background, background,
            lambda _y: Strip([marker], content_width), border_title, border_subtitle,
            opacity, kwargs.get("ansi_theme", DEFAULT_TERMINAL_THEME),
            kwargs.get("native_ansi", False))
        segments = list(strip)
        at = [i for i, seg in enumerate(segments) if MARKER in seg.text]
        if len(at) != 1 or segments[at[0]] != marker:
            return None
        i = at[0]
        pad_style = self.get_inner_outer(base_background, background)[0].rich_style
        return segments[:i], segments[i + 1:], pad_style, top, bottom


def install(widget: Any) -> None:
    """Give ``widget`` a PaneStylesCache (in its constructor), on the Textual versions the
    gate knows; elsewhere it keeps Textual's StylesCache."""
    if textual_gate.FAST:
        textual_gate.set_styles_cache(widget, PaneStylesCache())
