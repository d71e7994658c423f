#!/usr/bin/env python3
"""Memory of a page with many series over a long run (issue 36, case 13: "a 50,000-series
page still grows 5.5 MB/min after 10 minutes (147 -> 205 MB)").

The page goes through the real dialect mapping and Pipeline (History, derive, every
rule) once per tick of a virtual clock, so 25 simulated minutes take about 5 minutes.
History keeps each series for its window (900 ticks at 1 s): RSS rises while the rings
fill and must be flat after that.  Prints RSS every 100 ticks.  Asserts nothing.

    python benchmarks/bench_series_memory.py [--series 50000] [--ticks 1500]

Measured 2026-12-03 (merged main of stop 30, 2-core box beside a CI run), 50,000 series
of vllm:kv_cache_usage_perc with random values: RSS 86.8 MB at tick 0, 117.0 at 500,
132.5 at 900, 134.8 at 1000-1400, 139.2 at 1499: the growth the issue saw at 10 minutes
is History filling its window; it stops at the window (+0.5 MB per 100 ticks after it,
against +4 MB before).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from infertop import dialects  # noqa: E402
from infertop.model import Sample, Snapshot  # noqa: E402
from infertop.pipeline import Pipeline  # noqa: E402


def page(n: int, rnd: random.Random) -> str:
    lines = ["# TYPE vllm:kv_cache_usage_perc gauge"]
    lines += [f'vllm:kv_cache_usage_perc{{engine="{i}",model_name="m"}} {rnd.random():.3f}'
              for i in range(n)]
    lines += ["# TYPE vllm:num_requests_running gauge",
              'vllm:num_requests_running{engine="0",model_name="m"} 3']
    return "\n".join(lines) + "\n"


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--series", type=int, default=50_000)
    ap.add_argument("--ticks", type=int, default=1500)
    a = ap.parse_args()
    rnd = random.Random(1)
    p = Pipeline()
    started = time.perf_counter()
    for i in range(a.ticks):
        expo = dialects.readings_from_exposition(page(a.series, rnd), "h:8000")
        s = Sample("server:h:8000", 1000.0 + i, tuple(expo.readings), meta=expo.meta)
        p.feed(Snapshot(1000.0 + i, {"server:h:8000": s}))
        if i % 100 == 0 or i == a.ticks - 1:
            print(f"tick {i:5d}  rss {rss_mb():7.1f} MB  "
                  f"wall {time.perf_counter() - started:6.1f} s", flush=True)


if __name__ == "__main__":
    main()
