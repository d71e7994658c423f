#!/usr/bin/env python3
"""CPU time of the whole screen per tick, headless, on a recording: a proxy for the shared
harness (benchmarks/harness/overhead.sh) that does not depend on how busy the machine is as
much as a wall-clock run does (CPU time, not elapsed; the snapshots are decoded before the
clock starts; no probe runs, so only the pipeline, the panes and Textual's compositor are
measured; the terminal write itself is not, the headless driver has none).

    # a recording of the harness: 8 fake GPUs behind the real pynvml + demo-server healthy
    FAKE_NVML_SPEC=../gpu8.json PYTHONPATH=benchmarks/harness/fakenvml \\
        .venv/bin/infertop record -o /tmp/h.jsonl --duration 70 --url http://127.0.0.1:18080
    python benchmarks/bench_screen_ticks.py /tmp/h.jsonl [--ticks 60] [--size 160x48]
        [--profile out.prof] [--settle-gc]

Prints ms of CPU per tick for the process (all threads) and for the main thread (panes,
compositor); repeat and compare medians, interleaving the versions compared.  Asserts
nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import time

from recorded_snapshots import load_snapshots

from infertop.cli.main import build_parser, make_pipeline
from infertop.source import SnapshotSource
from infertop.tui.modes import LiveApp
from infertop.tui.options import AppOptions


class Snapshots(SnapshotSource):
    """Decoded snapshots handed out in turn, as a live source would (its panes, its keys)."""

    kind = "live"

    def __init__(self, snaps: list) -> None:
        self.snaps, self.i = snaps, 0

    async def next(self):
        snap = self.snaps[self.i % len(self.snaps)]
        self.i += 1
        return snap


async def run(path: str, ticks: int, size: tuple[int, int], profile: str | None,
              settle_gc: bool = False) -> None:
    snaps = await load_snapshots(path)
    if len(snaps) < ticks + 6:
        raise SystemExit(f"{path}: {len(snaps)} ticks, need {ticks + 6} (no wrap-around: "
                         "time must not go back)")
    app = LiveApp(Snapshots(snaps), interval=1.0,
                  options=AppOptions(manual_ticks=True, settle_gc=settle_gc),
                  pipeline=make_pipeline(build_parser().parse_args([])))
    async with app.run_test(size=size) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        for _ in range(5):          # warm: first frames, caches
            await app._poll()
            await pilot.pause()
        prof = cProfile.Profile() if profile else None
        t0, m0 = time.process_time(), time.thread_time()
        if prof:
            prof.enable()
        for _ in range(ticks):
            await app._poll()
            await pilot.pause()      # the compositor draws what the tick changed
        if prof:
            prof.disable()
            prof.dump_stats(profile)
        t1, m1 = time.process_time(), time.thread_time()
    print(f"{ticks} ticks at {size[0]}x{size[1]}: process {1000 * (t1 - t0) / ticks:.2f} ms/tick, "
          f"main thread {1000 * (m1 - m0) / ticks:.2f} ms/tick")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("recording")
    ap.add_argument("--ticks", type=int, default=60)
    ap.add_argument("--size", default="160x48")
    ap.add_argument("--profile", help="write a cProfile of the measured ticks here")
    ap.add_argument("--settle-gc", action="store_true",
                    help="freeze the collector after the first frame, as the live screen "
                         "does (without it full collections of the startup objects land "
                         "on whatever allocates, and add to the ticks measured)")
    a = ap.parse_args()
    w, h = (int(x) for x in a.size.split("x"))
    asyncio.run(run(a.recording, a.ticks, (w, h), a.profile, a.settle_gc))


if __name__ == "__main__":
    main()
