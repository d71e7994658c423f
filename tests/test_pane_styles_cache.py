"""A pane's rows as PaneStylesCache makes them (tui/panes/styles_cache.py: content rows
joined from the frame Textual drew around a marker) must be Textual's own: every row of
every pane, border rows included, against a plain StylesCache rendering the same widget
from scratch (the oracle), for several scenarios, at 80x24 and 160x48, zoomed and not,
after ticks that changed rows (the cached rows must not be stale), after a pane's border
changed colour (a finding), and with styles that per-row pieces cannot express (tint,
opacity: Textual's own routine then); and without the app, on a bordered, padded widget."""

from __future__ import annotations

import pytest
from rich.segment import Segment
from test_pane_line_strips import demo_app, ticked
from textual._styles_cache import StylesCache
from textual.color import Color
from textual.css.styles import Styles
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget

from infertop.tui.panes.styles_cache import PaneStylesCache

slow = pytest.mark.slow   # every pane row against Textual's own render, through the app


def rows(strips):
    return [[(s.text, s.style, s.control) for s in strip] for strip in strips]


def fast_frame(widget: Widget) -> tuple | None:
    """The frame the widget's PaneStylesCache kept for its fast path (None: none kept)."""
    cache = widget._styles_cache
    assert isinstance(cache, PaneStylesCache), cache
    return cache._frame


def check_panes(app) -> int:
    """Compare every visible pane's rows; the number of panes compared."""
    n = 0
    for pane in app.panes:
        if not pane.display or not pane.size.width:
            continue
        assert isinstance(pane._styles_cache, PaneStylesCache)
        region = pane.size.region.__class__(0, 0, *pane.outer_size)
        got = pane._styles_cache.render_widget(pane, region)
        want = StylesCache().render_widget(pane, region)
        assert len(got) == len(want) == pane.outer_size.height
        for y, (a, b) in enumerate(zip(rows(got), rows(want))):
            assert a == b, (pane.id, y)
        n += 1
    return n


@slow
@pytest.mark.parametrize("scenario,size", [("healthy", (160, 48)), ("mem-kv-pressure", (80, 24)),
                                           ("par-tp-straggler", (80, 24)),
                                           ("sch-queue-gpus-idle", (160, 48))])
async def test_every_pane_row_is_textuals_own(scenario, size):
    app = demo_app(scenario)
    async with app.run_test(size=size) as pilot:
        await ticked(app, pilot, 3)
        assert check_panes(app) == 6
        fast = [p for p in app.panes if fast_frame(p) is not None]
        assert fast, "the fast path was never taken"
        for _ in range(4):          # rows change: those drawn anew and those cached
            await app._poll()
            await pilot.pause()
            assert check_panes(app) == 6
        for zoom in ("1", "4"):
            await pilot.press(zoom)
            await app._poll()
            await pilot.pause()
            assert check_panes(app) == 1
            await pilot.press(zoom)
            await pilot.pause()
        assert check_panes(app) == 6


@slow
async def test_a_border_colour_change_draws_the_new_colour_on_cached_rows():
    app = demo_app("healthy")
    async with app.run_test(size=(160, 48)) as pilot:
        await ticked(app, pilot, 3)
        pane = app.panes[2]
        before = rows(pane._styles_cache.render_widget(pane, pane.region.reset_offset))
        pane.set_class(True, "sev-crit")     # what a critical finding on the pane does
        await pilot.pause()
        check_panes(app)
        after = rows(pane._styles_cache.render_widget(pane, pane.region.reset_offset))
        assert after[1] != before[1]          # a content row: its border segments changed
        pane.set_class(False, "sev-crit")
        await pilot.pause()
        check_panes(app)


@slow
@pytest.mark.parametrize("style", ["tint", "opacity"])
async def test_styles_the_frame_cannot_express_go_through_textual(style):
    app = demo_app("healthy")
    async with app.run_test(size=(160, 48)) as pilot:
        await ticked(app, pilot, 3)
        pane = app.panes[0]
        if style == "tint":
            pane.styles.tint = Color(200, 0, 0, 0.4)
        else:
            pane.styles.opacity = 0.5
        await app._poll()
        await pilot.pause()
        region = pane.region.reset_offset
        pane._styles_cache.render_widget(pane, region)
        assert fast_frame(pane) is None
        check_panes(app)


def render_both(styles, lines, size=(20, 7), content=(16, 4)):
    """Rows of a bordered, padded widget as PaneStylesCache and as Textual's StylesCache
    draw them (the second pass of the first: the frame is found on the first)."""
    size, content = Size(*size), Size(*content)

    def line(y):
        text = lines[y] if y < len(lines) else ""
        return Strip([Segment(text)] if text else [], len(text))

    def draw(cache):
        return rows(cache.render(styles, size, Color(0, 0, 0), Color(10, 20, 30), line, [],
                                 None, None, content_size=content, padding=styles.padding))
    fast = PaneStylesCache()
    draw(fast)
    return draw(fast), draw(StylesCache()), fast


def bordered() -> Styles:
    styles = Styles()
    styles.border = ("round", Color(200, 0, 0))
    styles.padding = (0, 1)
    return styles


def test_rows_short_long_empty_and_past_the_text_are_textuals_own():
    # a short line (padded), one exactly the width, an empty one, one too long (cut), and
    # the row under the content area (blank)
    got, want, cache = render_both(bordered(), ["abc", "x" * 16, "", "y" * 20])
    assert cache._frame is not None          # the pieces were used
    assert got == want and len(got) == 7


def test_a_tint_goes_through_textuals_own_routine():
    styles = bordered()
    styles.tint = Color(0, 200, 0, 0.5)
    got, want, cache = render_both(styles, ["abc", "def"])
    assert cache._frame is None
    assert got == want


@slow
@pytest.mark.parametrize("scenario,size", [("healthy", (160, 48)), ("mem-kv-pressure", (80, 24))])
async def test_every_bar_row_is_textuals_own(scenario, size):
    """The header, findings strip, banner and status line (tui/widgets/bar.py) are drawn
    through the same cache: their rows, after ticks that changed them, are Textual's."""
    from infertop.tui.widgets.bar import Bar
    app = demo_app(scenario)
    async with app.run_test(size=size) as pilot:
        await ticked(app, pilot, 3)
        for _ in range(3):
            await app._poll()
            await pilot.pause()
            bars = [b for b in app.screen.query(Bar) if b.display and b.size.width]
            assert {b.id for b in bars} >= {"header", "status"}
            for bar in bars:
                assert isinstance(bar._styles_cache, PaneStylesCache)
                region = bar.size.region.__class__(0, 0, *bar.outer_size)
                got = bar._styles_cache.render_widget(bar, region)
                want = StylesCache().render_widget(bar, region)
                assert rows(got) == rows(want), bar.id
        assert any(fast_frame(b) is not None for b in bars)
