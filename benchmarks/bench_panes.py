#!/usr/bin/env python3
"""Pane drawing at scale: time per frame for each pane, the pipeline's time, and how long
`q` takes to end the app while it runs (issue 9/11 bar: 20,000 engine series, `q` within
1 s, a frame at least every 2 s; 64 GPUs, 16 engines, 200 processes).

    python benchmarks/bench_panes.py [--ticks 5]

Sources are tests/helpers/big_source.py (deterministic).  Prints numbers; asserts nothing.
Drawing should grow with the rows shown, not with the series: compare the 1,000 / 5,000 /
20,000 engine lines (same pane size).
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
from helpers.panes import PANES  # noqa: E402
from infertop.cli.main import build_parser, make_pipeline  # noqa: E402
from infertop.pipeline import Pipeline  # noqa: E402
from infertop.themes import roles  # noqa: E402
from infertop.tui.panes.context import PaneContext  # noqa: E402


async def frames(src, pipe, ticks):
    feed_s = []
    frame = None
    for _ in range(ticks):
        snap = await src.next()
        t0 = time.perf_counter()
        frame = pipe.feed(snap)
        feed_s.append(time.perf_counter() - t0)
    return frame, feed_s


def draw_times(frame, width, height, reps=3):
    out = {}
    for name, cls in PANES.items():
        best = None
        for _ in range(reps):   # a fresh context each time: nothing cached across frames
            ctx = PaneContext(frame, roles({}), wide=width >= 110, height=height, width=width)
            t0 = time.perf_counter()
            text = cls().draw(ctx)
            dt = time.perf_counter() - t0
            best = dt if best is None else min(best, dt)
        out[name] = (best, len(text.plain.splitlines()))
    return out


def case(label, src, ticks, rules, width=76, height=20):
    pipe = make_pipeline(build_parser().parse_args([])) if rules else Pipeline()
    frame, feed_s = asyncio.run(frames(src, pipe, ticks))
    d = draw_times(frame, width, height)
    total = sum(v[0] for v in d.values())
    print(f"{label:<34} pipeline {statistics.median(feed_s) * 1000:8.1f} ms/tick   "
          f"6 panes {total * 1000:7.1f} ms  (" +
          " ".join(f"{k[:4]} {v[0] * 1000:.1f}" for k, v in d.items()) + ")")


async def quit_latency(engines: int) -> float:
    from textual import events

    from infertop.tui.app import InfertopApp
    app = InfertopApp(BigSource(gpus=8, engines=engines, procs=4), pipeline=Pipeline(),
                      interval=1.0)
    async with app.run_test(size=(160, 48)) as pilot:
        while app.ticks < 2:
            await pilot.pause(0.05)
        await asyncio.sleep(0.5)   # into the next tick's pipeline
        t0 = time.perf_counter()
        # the key as the terminal delivers it (Pilot.press would wait for the app to idle)
        app.post_message(events.Key("q", "q"))
        while app._exit_renderables == [] and app.return_code is None and \
                time.perf_counter() - t0 < 30:
            await asyncio.sleep(0.01)
        return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ticks", type=int, default=5)
    a = ap.parse_args()
    print("pane size 76x20 (one pane at 160x48); best of 3 draws, fresh context each")
    case("64 GPUs, 16 engines, 200 procs", BigSource(64, 16, 200), a.ticks, rules=True)
    for n in (1_000, 5_000, 20_000):
        case(f"8 GPUs, {n:,} engine series", BigSource(8, n, 4), a.ticks, rules=False)
    case("64 GPUs ... at 36x4 (80x24)", BigSource(64, 16, 200), a.ticks, rules=True,
         width=36, height=4)
    for n in (16, 20_000):
        q = asyncio.run(quit_latency(n))
        print(f"`q` to exit with {n:,} engine series: {q:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
