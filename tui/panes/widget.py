"""LayerPane: the widget a layer pane is, and how it repaints only the lines that changed.

A pane is a Static whose content is rebuilt from a Frame by a pure ``render`` function;
panes never do I/O and never call probes.  Severity shows twice: the pane's CSS class
(border colour, from the theme) and the flagged reading itself (styled, code beside it).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from rich.console import RenderableType
from rich.segment import Segment
from rich.style import Style as RichStyle
from rich.text import Span, Text
from textual.app import RenderResult
from textual.content import Content
from textual.geometry import Region
from textual.reactive import Reactive
from textual.screen import Screen
from textual.strip import Strip
from textual.visual import Visual, visualize
from textual.widgets import Static

from infertop.findings import Severity
from infertop.model import Layer

from .. import textual_gate
from ..app_of import infertop_app
from ..repaint import DirectRepaint
from ..zoom_table import TABLE_BINDINGS, TableView, ZoomTableKeys
from . import styles_cache
from .cells import fast_text
from .columns import Columns
from .context import FrameLookups, PaneContext


class ZoomingScreen(Screen):
    """A screen that zooms its own panes (a fleet node's), where the main screen's panes
    zoom with the app (``InfertopApp.zoomed``)."""

    zoomed: int | None = None     # the layer index zoomed on this screen (None: none)


class LayerPane(DirectRepaint, ZoomTableKeys, Static):
    """A pane for one layer; subclasses set ``layer`` and implement ``render_frame``."""

    pane_layer: Layer = Layer.HARDWARE
    can_focus = True
    # no links in a pane: Textual would restyle every rendered line for them (112 -> 78 us
    # a changed line at 160x48, ~30 changed lines a tick)
    auto_links: Reactive[bool] = Reactive(False)
    BINDINGS = TABLE_BINDINGS     # zoomed: scroll, sort, filter its table (zoom_table.py)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("waiting for the first tick…", classes="pane", **kwargs)
        # Textual's line cache with content rows joined from pieces (styles_cache.py)
        styles_cache.install(self)
        self.border_title = f"{self.pane_layer.position + 1} {self.pane_layer.value}"
        self.worst: str | None = None
        self.last_renderable: RenderableType | None = None
        self.table_view = TableView()        # kept while zoomed out and in again
        self._last_lookups: FrameLookups | None = None   # the frame drawn last
        self._subtitle = ""
        self._painted: RenderableType | None = None   # what render() hands Textual
        self._painted_lines: list[Text] | None = None   # ... line by line, when it is Text
        self._strips: dict[int, Strip] = {}     # row -> its rendered line (paint drops changed)
        self._strips_key: tuple = ()             # (width, base style) the strips were made at
        # line_strip's memos, for the base style of _strips_key: a run's styles (the line's
        # style, then its spans') -> Textual's Style; and (run's styles, x, y) -> the Rich
        # style with that offset (a table's columns keep their places from tick to tick)
        self._run_styles: dict[tuple, Any] = {}
        self._offset_styles: dict[tuple, RichStyle] = {}
        self._pass: tuple[int, bool] | None = None   # render_lines: (width, text selected)

    def render_frame(self, ctx: PaneContext) -> RenderableType:  # pragma: no cover - abstract
        raise NotImplementedError

    def draw(self, ctx: PaneContext, zoomed: bool = False,
             view: TableView | None = None) -> RenderableType:
        """render_frame at ``ctx``'s size, through a context of this pane's own (``ctx``
        is left as it was)."""
        return self._draw_own(ctx, zoomed, view, ctx.wide, ctx.height, ctx.width)

    def _draw_own(self, lookups: FrameLookups, zoomed: bool, view: TableView | None,
                  wide: bool, height: int, width: int) -> RenderableType:
        """render_frame with a context for this pane alone: the frame's shared lookups,
        its layer, its size, its zoom key, and when zoomed its table's sort, filter and
        scroll; the findings it tags are its own (the six panes of a tick share only the
        lookups)."""
        ctx = lookups.pane(layer=self.pane_layer,
                           zoom_key="" if zoomed else str(self.pane_layer.position + 1),
                           view=view if zoomed else None, wide=wide, height=height,
                           width=width)
        return self.render_frame(ctx)

    def _framed_by_title(self) -> bool:
        """The 80x24 layout: the pane has a title line and no bottom border (CSS)."""
        try:
            return self.screen.has_class("-small")
        except Exception:     # no running app (drawn from a test)
            return False

    def is_zoomed(self) -> bool:
        """Zoomed on the main screen (app.zoomed) or on a fleet node's screen."""
        try:
            screen = self.screen
            zoomed = screen.zoomed if isinstance(screen, ZoomingScreen) else \
                infertop_app(self).zoomed
        except Exception:     # no running app (drawn from a test)
            return False
        return zoomed == self.pane_layer.position

    def on_resize(self, _event) -> None:
        """Zoomed in or out, or the terminal resized: draw the frame again at the new size
        (the zoom key draws before the layout gives the pane its new size)."""
        if self._last_lookups is not None and self.display:
            self.redraw_table()

    def redraw_table(self) -> None:
        """A table key was pressed: draw the same frame again with the new view.  While a
        poll feeds the pipeline in its thread History is not read; that poll draws next."""
        lookups = self._last_lookups
        if lookups is None or infertop_app(self).polling:
            return
        self.show(lookups)

    def show(self, lookups: FrameLookups) -> None:
        """Draw the frame ``lookups`` is of at this pane's size, repainting what changed."""
        findings = lookups.frame.findings_for(self.pane_layer)
        sev = max((f.severity for f in findings), default=None)
        worst = sev.value if sev is not None else None
        if worst != self.worst:
            for s in Severity:
                self.set_class(s.value == worst, f"sev-{s.value}")
            self.worst = worst
        codes = " ".join(sorted({f.code for f in findings}))
        subtitle = f"{worst.upper()} {codes}" if worst else ""
        if self._framed_by_title():   # 80x24: no bottom line, the codes go in the title
            subtitle = "|" + subtitle
        if subtitle != self._subtitle:   # setting it repaints the whole pane, even unchanged
            self._subtitle = subtitle
            name = f"{self.pane_layer.position + 1} {self.pane_layer.value}"
            if subtitle.startswith("|"):
                self.border_title = f"{name} {subtitle[1:]}" if subtitle[1:] else name
                self.border_subtitle = ""
            else:
                self.border_title, self.border_subtitle = name, subtitle
        zoomed = self.is_zoomed()
        self._last_lookups = lookups
        size = self.size                  # Widget.size is the content area already
        content = self._draw_own(lookups, zoomed, self.table_view, size.width >= 110,
                                 max(1, size.height), max(1, size.width))
        if isinstance(content, Columns):
            content = content.to_text()
        if content != self.last_renderable:   # Text compares by value: skip idle repaints
            self.last_renderable = content
            self.paint(content)

    def render(self) -> RenderResult:
        return self._painted if self._painted is not None else super().render()

    def paint(self, content: RenderableType) -> None:
        """Show ``content``, repainting only the lines that changed.

        Textual repaints (and writes to the terminal) the whole region of a widget that
        is refreshed; a pane changes a few values a tick, so refreshing only the changed
        lines' regions cuts the bytes written and the compositor's work several times
        over.  Line by line only when line n of the Text is row n of the pane: no line
        wraps (a no_wrap Text, or every line fits the width) and the line count is the
        same as before; otherwise the whole pane.  The grid fixes the size: never a re-layout."""
        old = self._painted_lines
        self._painted = content
        width, height = self.size      # one lookup (Widget.size walks to the screen)
        new = split_lines(content, old) if isinstance(content, Text) else None
        if new is None or not isinstance(content, Text) or len(new) > height or \
                (not content.no_wrap and any(line.cell_len > width for line in new)):
            self._painted_lines = None   # wraps, or not Text: Textual renders it whole
            self._strips.clear()
            self.refresh()
            return
        self._painted_lines = new
        if old is None or len(old) != len(new):
            self._strips.clear()
            self.refresh()
            return
        changed = [y for y, (a, b) in enumerate(zip(old, new)) if a is not b and a != b]
        for y in changed:
            self._strips.pop(y, None)
        if changed:        # one region per run of changed lines (a table's rows: one)
            regions = []
            start = last = changed[0]
            for y in changed[1:]:
                if y != last + 1:
                    regions.append(Region(0, start, width, last - start + 1))
                    start = y
                last = y
            regions.append(Region(0, start, width, last - start + 1))
            self.refresh(*regions)

    def render_lines(self, crop: Region) -> list[Strip]:
        """Textual's, with the pane's width and whether text is selected looked up once
        for the rows of this pass (each walks to the screen: ~3 % of the main thread
        when done per row)."""
        self._pass = (self.size.width, self.text_selection is not None)
        try:
            return super().render_lines(crop)
        finally:
            self._pass = None

    def render_line(self, y: int) -> Strip:
        """One row of the pane: its line of the painted Text, rendered alone and kept until
        paint changes it (Textual's default renders the whole content for any dirty row).
        While text is selected, Textual renders the whole Text: its highlight and the
        offsets a drag records span lines."""
        lines = self._painted_lines
        known = self._pass
        width, selected = known if known is not None else \
            (self.size.width, self.text_selection is not None)
        if lines is None or selected:
            return super().render_line(y)
        textual_gate.mark_drawn(self)   # nothing for the default whole-content render
        style = self.visual_style
        key = (width, style)
        if key != self._strips_key:     # resized, or a new theme: every line anew
            self._strips.clear()
            self._run_styles.clear()
            self._offset_styles.clear()
            self._strips_key = key
        strip = self._strips.get(y)
        if strip is None:
            if y < len(lines):
                strip = self.line_strip(lines[y], y, width, style)
            else:
                strip = Strip.blank(width, style.rich_style)
            self._strips[y] = strip
        return strip

    def line_strip(self, line: Text, y: int, width: int, style) -> Strip:
        """``line`` as Textual renders row ``y`` of the whole Text: each segment's style
        carries its (x, y) offset, which a mouse selection reads (rendering the line alone
        through Visual.to_strips stamped every row y=0, so a drag on row 5 selected row 0's
        text).  A line that fits and holds no tab or control code needs no wrapping or
        cropping: its segments are cut at its spans' edges here (as Content.render cuts
        them) with each run's style looked up in memos (``_run_style``), about three times
        cheaper than converting the line to Content each time; any other goes through
        Textual and gets its row stamped."""
        plain = line.plain
        spans = line.spans
        end = len(plain)
        if plain and plain.isprintable() and line.cell_len <= width and \
                all(sp.start >= 0 and sp.end <= end for sp in spans):
            cuts = sorted({0, end, *(sp.start for sp in spans), *(sp.end for sp in spans)})
            base = line.style
            offsets = self._offset_styles
            if len(offsets) > 50_000:     # runs at places no longer drawn: start over
                offsets.clear()
            segments = []
            for a, b in zip(cuts, cuts[1:]):
                run = (base, *(sp.style for sp in spans if sp.start <= a and sp.end >= b))
                rich = offsets.get((run, a, y))
                if rich is None:
                    rich = offsets[run, a, y] = \
                        self._run_style(run, style).rich_style_with_offset(a, y)
                segments.append(Segment(plain[a:b], rich))
            return Strip(segments, line.cell_len)
        content = visualize(self, line)
        if isinstance(content, Content) and content.cell_length <= width \
                and "\t" not in content.plain:
            segments = []
            x = 0
            parse = textual_gate.style_parser(self)
            for text, text_style in content.render(style, end="", parse_style=parse):
                segments.append(Segment(text, (style + text_style).rich_style_with_offset(x, y)))
                x += len(text)
            return Strip(segments, content.cell_length)
        return at_row(Visual.to_strips(self, content, width, 1, style)[0], y)

    def _run_style(self, run: tuple, style):
        """The Textual style of a run of text styled by ``run`` (the line's style, then
        the spans over it, in order) on ``style``: what Content.render gives a one-cell
        Text styled the same way, so the fast path of line_strip draws exactly as Textual
        does (tests/test_pane_line_strips.py compares every line with Textual's own)."""
        got = self._run_styles.get(run)
        if got is None:
            base, *over = run
            probe = Text("x", style=base, spans=[Span(0, 1, st) for st in over])
            parse = textual_gate.style_parser(self)
            (_, text_style), = visualize(self, probe).render(style, end="",   # type: ignore[attr-defined]
                                                             parse_style=parse)
            got = self._run_styles[run] = style + text_style
        return got

def split_lines(text: Text, reuse: list[Text] | None = None) -> list[Text]:
    """``text.split("\\n", allow_blank=True)``, the same lines (plain, spans, style), in
    about half the time: each span is put on the lines it covers by a bisect over the
    line starts (Rich's divide walks the spans line by line).  A pane splits its Text
    every tick it changes.  ``reuse``: the lines of the Text painted before; a line
    equal to its old self there (text, spans, style) is that same object, not a new Text
    (most of a pane's lines are the same from one tick to the next; nothing changes a
    painted line)."""
    plain = text.plain
    if "\n" not in plain:
        return [text.copy()]
    parts = plain.split("\n")
    starts = []
    pos = 0
    for part in parts:
        starts.append(pos)
        pos += len(part) + 1
    style, justify, overflow = text.style, text.justify, text.overflow
    line_spans: list[list[Span]] = [[] for _ in parts]
    if text.spans:
        last = len(parts) - 1
        for start, end, span_style in text.spans:
            i = bisect_right(starts, start) - 1
            while i <= last:
                s0 = starts[i]
                e0 = s0 + len(parts[i])
                a, b = max(start, s0) - s0, min(end, e0) - s0
                if b > a:
                    line_spans[i].append(Span(a, b, span_style))
                if end <= e0 + 1:
                    break
                i += 1
    # (fast_text: the lines of a Text hold no control code, Text() would look for them)
    if reuse is None or len(reuse) != len(parts):
        return [fast_text(part, style, justify=justify, overflow=overflow, spans=spans)
                for part, spans in zip(parts, line_spans)]
    lines = []
    for part, spans, old in zip(parts, line_spans, reuse):
        if old.plain == part and old.spans == spans and old.style == style and \
                old.justify == justify and old.overflow == overflow:
            lines.append(old)
        else:
            lines.append(fast_text(part, style, justify=justify, overflow=overflow,
                                   spans=spans))
    return lines


def at_row(strip: Strip, y: int) -> Strip:
    """``strip`` (rendered as row 0) with the selection offsets of row ``y``."""
    if not y:
        return strip
    out = []
    for seg in strip:
        st = seg.style
        if st is not None and st._meta is not None and "offset" in st.meta:
            ox, oy = st.meta["offset"]
            st = st + RichStyle.from_meta({"offset": (ox, oy + y)})
        out.append(Segment(seg.text, st, seg.control))
    return Strip(out, strip.cell_length)
