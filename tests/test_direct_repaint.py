"""A pane's or a bar's repaint goes straight to its screen (tui/repaint.py): the screen
paints it in its next pass, the widget's own message pump is not woken, and what it shows
is the new content; a layout or a widget not on a screen goes through Textual."""

from __future__ import annotations

import pytest
from rich.text import Text
from textual.geometry import Region

from infertop.cli.main import build_parser, make_pipeline
from infertop.probes.sources.demo import DemoSource
from infertop.tui.modes import DemoApp
from infertop.tui.options import AppOptions
from infertop.tui.widgets.bar import Bar

slow = pytest.mark.slow   # the whole app driven


def demo_app() -> DemoApp:
    return DemoApp(DemoSource("healthy"), interval=1.0, options=AppOptions(manual_ticks=True),
                   pipeline=make_pipeline(build_parser().parse_args([])))


def screen_text(app) -> list[str]:
    return ["".join(seg.text for seg in strip)
            for strip in app.screen._compositor.render_strips()]


@slow
async def test_a_repaint_is_handed_to_the_screen_without_waking_the_widget():
    app = demo_app()
    async with app.run_test(size=(160, 48)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        await pilot.pause()
        screen = app.screen
        pane, status = app.panes[0], app.query_one("#status", Bar)
        for widget in (pane, status):
            screen._dirty_widgets.clear()
            widget.refresh(Region(0, 0, 3, 1)) if widget is pane else \
                status.update(Text("tick 999 · direct"), layout=False)
            assert widget in screen._dirty_widgets
            assert widget._message_queue.empty()      # no Prompt: its task stays asleep
            assert not widget._repaint_required
        await pilot.pause()
        assert not screen._dirty_widgets              # painted in the screen's next pass
        assert screen_text(app)[-2].strip().startswith("tick 999 · direct")


@slow
async def test_a_layout_goes_through_textual():
    app = demo_app()
    async with app.run_test(size=(160, 48)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        await pilot.pause()
        pane = app.panes[0]
        app.screen._dirty_widgets.clear()
        pane.refresh(layout=True)
        assert pane._layout_required and pane._repaint_required
        assert pane not in app.screen._dirty_widgets      # Textual's round, as before


def test_a_widget_not_on_a_screen_goes_through_textual():
    loose = Bar("not mounted")
    assert loose.refresh() is loose and loose._repaint_required
