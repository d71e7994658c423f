#!/usr/bin/env python3
"""The whole app at scale (issue 11, item 4): 64 GPUs, 16 engines, 200 processes.

The real InfertopApp with the rules (tests/helpers/big_source.py as the source), at
160x48 and 80x24, ticks driven by hand so nothing else runs in between.  Per tick:

- pipeline: History, derive and all rules (``Pipeline.feed``, in the app's thread);
- panes: ``_apply`` (six ``render_frame`` + the bars; what the event loop pays per tick);
- paint: CPU time of the event loop until it is idle again after the tick (Textual
  renders the changed lines and composes the update; the headless driver writes nothing);
- screen: the compositor rendering every line of the screen once (a full repaint, what a
  resize costs; a tick repaints only the lines that changed);

then `q` as the terminal delivers it while the app runs at 1 Hz, to the app's exit.
Lines drawn are counted so the draw cost can be read per row: drawing should follow the
rows shown, not the series held (compare 8 and 64 GPUs at one size).

    python benchmarks/bench_scale.py [--ticks 10]

Prints numbers (medians); asserts nothing.  Bar: `q` within 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from helpers.big_source import BigSource  # noqa: E402
from infertop.cli.main import build_parser, make_pipeline  # noqa: E402
from infertop.tui.app import InfertopApp  # noqa: E402
from infertop.tui.options import AppOptions  # noqa: E402


def ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1000:7.1f}"


async def per_tick(gpus: int, engines: int, procs: int, size: tuple[int, int],
                   ticks: int) -> str:
    app = InfertopApp(BigSource(gpus, engines, procs),
                      pipeline=make_pipeline(build_parser().parse_args([])),
                      options=AppOptions(manual_ticks=True))
    feed_s: list[float] = []
    apply_s: list[float] = []
    screen_s: list[float] = []
    paint_s: list[float] = []
    feed, apply = app.pipeline.feed, app._apply

    def timed_feed(*a):
        t0 = time.perf_counter()
        try:
            return feed(*a)
        finally:
            feed_s.append(time.perf_counter() - t0)

    def timed_apply(frame):
        t0 = time.perf_counter()
        try:
            return apply(frame)
        finally:
            apply_s.append(time.perf_counter() - t0)

    app.pipeline.feed, app._apply = timed_feed, timed_apply
    async with app.run_test(size=size) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        feed_s.clear()
        apply_s.clear()
        for _ in range(ticks):
            await app._poll()
            c0 = time.process_time()
            await pilot.pause()
            paint_s.append(time.process_time() - c0)
            t0 = time.perf_counter()
            strips = app.screen._compositor.render_strips()
            screen_s.append(time.perf_counter() - t0)
        rows = sum(len(p.last_renderable.plain.splitlines()) for p in app.panes
                   if p.last_renderable is not None)
        more = sum("more (press" in p.last_renderable.plain for p in app.panes
                   if p.last_renderable is not None)
    per_row = statistics.median(apply_s) / max(rows, 1) * 1e6
    return (f"{gpus:3d} GPUs {engines:3d} engines {procs:4d} procs {size[0]:3d}x{size[1]:<3d} "
            f"pipeline {ms(feed_s)} ms  panes {ms(apply_s)} ms  paint {ms(paint_s)} ms  "
            f"screen {ms(screen_s)} ms  "
            f"({rows} pane rows, {per_row:.0f} us/row; {more}/6 panes '+N more'; "
            f"{len(strips)} lines)")


async def quit_time(gpus: int, engines: int, procs: int, size: tuple[int, int]) -> float:
    from textual import events
    app = InfertopApp(BigSource(gpus, engines, procs),
                      pipeline=make_pipeline(build_parser().parse_args([])), interval=1.0)
    async with app.run_test(size=size) as pilot:
        while app.ticks < 2:
            await pilot.pause(0.05)
        await asyncio.sleep(0.3)   # somewhere inside the next tick
        t0 = time.perf_counter()
        # the key as the terminal delivers it (Pilot.press would wait for the app to idle)
        app.post_message(events.Key("q", "q"))
        while app._exit_renderables == [] and app.return_code is None and \
                time.perf_counter() - t0 < 30:
            await asyncio.sleep(0.005)
        return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ticks", type=int, default=10)
    a = ap.parse_args()
    print(f"medians of {a.ticks} ticks; real app, all rules, manual ticks")
    for size in ((160, 48), (80, 24)):
        for gpus, engines, procs in ((8, 1, 20), (64, 16, 200)):
            print(asyncio.run(per_tick(gpus, engines, procs, size, a.ticks)), flush=True)
    # four times the data again on one size: the rows built stay bounded by the screen
    # (about two per row shown: a pane's tables each build up to its height); what still
    # grows with the data is the frame's per-key index that the panes' lookups use
    print(asyncio.run(per_tick(256, 64, 800, (160, 48), a.ticks)), flush=True)
    for size in ((160, 48), (80, 24)):
        qs = [asyncio.run(quit_time(64, 16, 200, size)) for _ in range(3)]
        print(f"`q` to exit, 64 GPUs 16 engines 200 procs at {size[0]}x{size[1]}: "
              + ", ".join(f"{q:.2f}" for q in qs) + " s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
