"""Draw one pane's content straight from a Frame, without an App: pane content is a pure
function of the Frame (``render_frame``), so tests of what a pane shows need no Pilot."""

from __future__ import annotations

import asyncio
import io

from rich.console import Console
from rich.text import Text
from textual.app import App

from infertop.pipeline import Frame, Pipeline
from infertop.source import SnapshotSource
from infertop.themes import roles
from infertop.tui.app import PANE_CLASSES
from infertop.tui.panes.context import PaneContext
from infertop.tui.panes.widget import LayerPane

PANES = {cls.pane_layer.value: cls for cls in PANE_CLASSES}


def frames_of(source: SnapshotSource, ticks: int, pipeline: Pipeline | None = None) -> Frame:
    """Feed ``ticks`` snapshots of a source through a Pipeline; the last Frame."""
    pipeline = pipeline or Pipeline()

    async def run() -> Frame:
        await source.start()
        frame = None
        for _ in range(ticks):
            snap = await source.next()
            assert snap is not None, "the source ended before the ticks asked for"
            frame = pipeline.feed(snap, source.epoch)
        await source.stop()
        assert frame is not None, "no tick fed (ticks < 1)"
        return frame

    return asyncio.run(run())


def pane_text(layer: str, frame: Frame, *, width: int = 150, height: int = 40,
              wide: bool = True, view=None, summaries=None) -> str:
    """The plain text the ``layer`` pane draws for ``frame`` at this size; ``view`` (a
    TableView) draws it as a zoomed pane in the app does, its table sorted, filtered and
    scrolled."""
    pane = PANES[layer]()
    ctx = PaneContext(frame, roles({}), wide=wide, height=height, width=width)
    if summaries is not None:
        ctx.summaries = summaries
    con = Console(width=width, record=True, color_system=None, file=io.StringIO())
    con.print(pane.draw(ctx, zoomed=wide or view is not None, view=view), no_wrap=True,
              overflow="ellipsis", crop=True)
    return con.export_text()


def painted_text(app: App, layer: str) -> str:
    """The plain text a running app's pane of ``layer`` last painted (``#pane-<layer>``);
    fails the test when it painted no Text yet."""
    shown = app.query_one(f"#pane-{layer}", LayerPane).last_renderable
    assert isinstance(shown, Text), f"pane {layer} painted {shown!r}"
    return shown.plain
