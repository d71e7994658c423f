"""Screens and widgets ask the app through typed Textual Messages (no getattr on the app):
a handler named after the message is how Textual routes it, so a renamed message or
handler would silently do nothing; these check that each one reaches the app."""

from __future__ import annotations

import pytest

from helpers.fleet_source import DemoFleetSource
from helpers.synthetic_source import SyntheticSource
from helpers.tui_demo import open_first_node
from infertop.fleet import FleetPipeline, diagnoser_factory
from infertop.pipeline import Pipeline
from infertop.tui.app import InfertopApp
from infertop.tui.modes import app_for_source
from infertop.tui.options import AppOptions
from infertop.tui.screens.fleet import NodeScreen
from infertop.tui.widgets.history_plot import HistoryPlot

pytestmark = pytest.mark.slow   # the whole app driven


def counting(obj, name: str) -> list[int]:
    """Count the calls of ``obj.name`` (still calling it)."""
    calls: list[int] = []
    original = getattr(obj, name)

    def wrapper(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    setattr(obj, name, wrapper)
    return calls


async def test_a_shown_history_plot_is_drawn_by_the_app():
    app = InfertopApp(SyntheticSource(gpus=2), pipeline=Pipeline(), interval=0.05,
                      options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(120, 40)) as pilot:
        while app.frame is None:
            await pilot.pause(0.01)
        plot = app.query_one(HistoryPlot)
        redraws = counting(app, "redraw")
        plot.on_resize(None)             # hidden: nothing to draw
        await pilot.pause()
        assert redraws == []
        await pilot.press("1", "h")      # zoomed, then its plot
        await pilot.pause()
        assert plot.visible
        before = len(redraws)
        plot.on_resize(None)             # shown or resized: the app draws it
        await pilot.pause()
        assert len(redraws) == before + 1


async def test_a_node_screen_asks_the_fleet_app_to_show_it_again():
    src = DemoFleetSource(2, {})
    app = app_for_source(src, pipeline=FleetPipeline(diagnoser_factory()), interval=1.0,
                         options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(160, 48)) as pilot:
        await open_first_node(app, pilot)
        node = app.screen
        assert isinstance(node, NodeScreen)
        shows = counting(node, "show")
        await pilot.press("1")           # zoom: the node's frame drawn again, no poll
        await pilot.pause()
        assert len(shows) == 1 and node.zoomed == 0
        await pilot.press("h")           # its plot toggled: drawn again (and once more
        await pilot.pause()              # when the plot, shown, asks the app: HistoryPlot.Shown)
        assert len(shows) >= 2
