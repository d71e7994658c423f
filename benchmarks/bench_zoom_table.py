#!/usr/bin/env python3
"""A zoomed pane's table (issue 11, item 2): time to draw a zoomed pane with its table
sorted, filtered and scrolled, at 64 GPUs / 200 processes and at 20,000 engine series.

    python benchmarks/bench_zoom_table.py

A zoomed pane builds up to ZOOM_ROWS rows per table (the scroll, sort and filter range)
and draws only the window that fits: compare "own order" with "sorted" and "filtered" (the
sort is over the built rows) and "no view" (zoomed as before: rows for its height only).
Prints numbers; asserts nothing.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from helpers.big_source import BigSource  # noqa: E402
from helpers.panes import PANES  # noqa: E402
from infertop.pipeline import Pipeline  # noqa: E402
from infertop.themes import roles  # noqa: E402
from infertop.tui.panes.context import PaneContext  # noqa: E402
from infertop.tui.zoom_table import ZOOM_ROWS, TableView  # noqa: E402


def frame_of(src, ticks=3):
    async def run():
        pipe, frame = Pipeline(), None
        for _ in range(ticks):
            frame = pipe.feed(await src.next())
        return frame
    return asyncio.run(run())


def best_ms(frame, layer, view, width=150, height=40, reps=5):
    best = None
    for _ in range(reps):
        ctx = PaneContext(frame, roles({}), wide=True, height=height, width=width)
        t0 = time.perf_counter()
        PANES[layer]().draw(ctx, zoomed=True, view=view)
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return best * 1000


def main() -> None:
    print(f"zoomed pane 150x40, rows built per table <= {ZOOM_ROWS}; best of 5, ms")
    for label, src, layers in (
            ("64 GPUs, 200 processes", BigSource(gpus=64, engines=16, procs=200),
             ("hardware", "memory", "scheduling")),
            ("20,000 engine series", BigSource(gpus=8, engines=20_000, procs=4),
             ("parallelism", "memory"))):
        frame = frame_of(src)
        print(f"== {label}")
        for layer in layers:
            cases = {"no view": None, "own order": TableView(),
                     "sorted col 2": TableView(sort=2, reverse=True),
                     "filtered": TableView(query="1"),
                     "scrolled 100": TableView(offset=100)}
            cells = [f"{name} {best_ms(frame, layer, v):7.1f}" for name, v in cases.items()]
            print(f"  {layer:12s} " + "  ".join(cells))


if __name__ == "__main__":
    main()
