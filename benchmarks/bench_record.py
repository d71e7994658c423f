"""What ``infertop record`` costs when left running: CPU at 1 Hz, and bytes per hour.

1. CPU: ``record_headless`` with a demo source at interval 1.0 s for --seconds (default 20),
   gzip output; CPU = (user + system time of this process, all threads) / wall time, as a
   percentage of one core.  The demo source builds its snapshots too (renders and parses a
   /metrics page, like a live scrape), so this is the whole headless recorder's cost.
   The recorder's own share (JSON encoding + compression) is printed separately.
2. Size: the same scenario recorded fast (interval 0) for --ticks snapshots, plain and
   gzip (gzip sync-flushed every line, as the recorder writes it), extrapolated to 3600
   snapshots (one hour at 1 Hz).

Numbers are printed, never asserted.
    .venv/bin/python benchmarks/bench_record.py [--seconds 20] [--scenario healthy]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import tempfile
import time
import zlib
from pathlib import Path

from infertop.probes.sources.demo import DemoSource
from infertop.probes.sources.recorder import record_headless
from infertop.recording import encode_snapshot


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def bench_cpu(scenario: str, seconds: float, path: Path) -> tuple[float, int]:
    t0, c0 = time.perf_counter(), cpu_seconds()
    ticks = asyncio.run(record_headless(DemoSource(scenario), path, seconds, 1.0))
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    return 100.0 * cpu / wall, ticks


def bench_encode(scenario: str, ticks: int) -> float:
    src = DemoSource(scenario)
    snaps = [src.next_sync() for _ in range(ticks)]
    z = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    t0 = time.perf_counter()
    for s in snaps:
        z.compress(encode_snapshot(s))
        z.flush(zlib.Z_SYNC_FLUSH)
    return (time.perf_counter() - t0) / ticks * 1000


def bench_size(scenario: str, ticks: int, tmp: Path) -> dict[str, float]:
    out = {}
    for suffix in (".jsonl", ".jsonl.gz"):
        p = tmp / f"size{suffix}"
        n = asyncio.run(record_headless(DemoSource(scenario), p, float(ticks), 0.0))
        out[suffix] = p.stat().st_size / n * 3600
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--ticks", type=int, default=300, help="snapshots for the size estimate")
    ap.add_argument("--scenario", default="healthy")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name in dict.fromkeys([args.scenario, "par-tp-straggler"]):
            sizes = bench_size(name, args.ticks, tmp)
            enc = bench_encode(name, 60)
            print(f"{name:18s} bytes/hour at 1 Hz: plain {sizes['.jsonl'] / 1e6:7.1f} MB, "
                  f"gzip {sizes['.jsonl.gz'] / 1e6:6.1f} MB "
                  f"(ratio {sizes['.jsonl'] / sizes['.jsonl.gz']:.1f}x); "
                  f"encode+gzip {enc:.2f} ms/snapshot")
        pct, ticks = bench_cpu(args.scenario, args.seconds, tmp / "cpu.jsonl.gz")
        print(f"{args.scenario:18s} record_headless at 1 Hz for {args.seconds:g} s "
              f"({ticks} snapshots, gzip): CPU {pct:.2f} % of one core "
              f"(target <= 0.5 %; includes building the demo snapshots)")


if __name__ == "__main__":
    main()
