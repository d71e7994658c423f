#!/usr/bin/env python3
"""Memory at steady state (issue 11, item 5): the whole TUI fed 30 simulated minutes.

An 8-GPU box with one vLLM server (benchmarks/scenarios/healthy-8gpu.toml, the healthy
demo on 8 GPUs, tensor parallel 8) goes through the real Pipeline (History, derive, all
rules) and the six panes draw every tick (App.run_test at 160x48, ticks driven by hand,
so 1800 ticks of the source's virtual clock take minutes, not half an hour).  History's
ring buffers are full after 900 ticks: RSS at tick 1800 is the steady state.

    python benchmarks/bench_memory.py [--ticks 1800] [--size 160x48] [--scenario PATH]

Prints RSS (VmRSS) at ticks 60, 900 and 1800 (and the last), the peak (VmHWM), and
History's own bytes (every object reachable from it, counted once).  Target: <= 60 MB
RSS at steady state.  Asserts nothing.

Measured (issue 11; RSS at ticks 60 / 900 / 1800, History at 1800):
  main (an object per point):          50.3 / 122.7 / 130.8 MB; History 68.4 MB, 119 B/point
  flat arrays per series:              46.9 /  58.5 /  59.6 MB; History 12.0 MB,  21 B/point
  + shared tick clock, constant values: 46.1 /  51.3 /  53.0 MB; History  4.6 MB,   8 B/point
  + float32 bucket counts when exact:  46.0 /  50.4 /  51.3 MB; History  3.8 MB,   7 B/point
The live screen on the same box for 30 minutes: bench_cpu_vs_nvitop.py --seconds 1800.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "benchmarks" / "scenarios" / "healthy-8gpu.toml"


def vm(field: str) -> float:
    """A /proc/self/status field (VmRSS, VmHWM) in MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


_SKIP = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
         types.MethodType, types.CodeType)


def deep_bytes(root) -> tuple[int, int]:
    """(bytes, objects) reachable from ``root``, each object counted once; classes,
    modules and functions are shared with everything else and not counted."""
    seen: set[int] = set()
    stack = [root]
    total = count = 0
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, _SKIP):
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        count += 1
        stack.extend(gc.get_referents(o))
    return total, count


def history_report(h) -> str:
    size, objs = deep_bytes(h)
    series = list(h)
    hists = sum(1 for s in series if s.kind.value == "histogram")
    points = sum(len(s.points) for s in series)
    return (f"History {size / 1e6:6.2f} MB in {objs} objects: {len(series)} series "
            f"({hists} histograms), {points} points, {size / max(points, 1):.0f} B/point")


async def run(ticks: int, size: tuple[int, int], scenario: str) -> None:
    from infertop.cli.main import build_parser, make_pipeline
    from infertop.probes.sources.demo import DemoSource
    from infertop.tui.modes import DemoApp
    from infertop.tui.options import AppOptions

    app = DemoApp(DemoSource(scenario), interval=1.0, options=AppOptions(manual_ticks=True),
                  pipeline=make_pipeline(build_parser().parse_args([])))
    marks = sorted({m for m in (60, 900, 1800) if m <= ticks} | {ticks})
    print(f"start RSS {vm('VmRSS'):.1f} MB   ({Path(scenario).name}, {size[0]}x{size[1]}, "
          f"{ticks} ticks)")
    async with app.run_test(size=size) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        t0 = time.perf_counter()
        while app.ticks < ticks:
            await app._poll()
            if app.ticks in marks:
                await pilot.pause()
                gc.collect()
                wall = time.perf_counter() - t0
                print(f"tick {app.ticks:5d}  RSS {vm('VmRSS'):6.1f} MB  peak {vm('VmHWM'):6.1f}"
                      f" MB  ({wall:.0f} s wall)  "
                      f"{history_report(app.pipeline.history)}", flush=True)
        print(f"pane lines drawn at the end: {sum(len(p.last_renderable.plain.splitlines()) for p in app.panes)}"
              if all(hasattr(p, 'last_renderable') for p in app.panes) else "")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ticks", type=int, default=1800)
    ap.add_argument("--size", default="160x48")
    ap.add_argument("--scenario", default=str(SCENARIO))
    a = ap.parse_args()
    w, h = (int(x) for x in a.size.split("x"))
    asyncio.run(run(a.ticks, (w, h), a.scenario))
    return 0


if __name__ == "__main__":
    sys.exit(main())
