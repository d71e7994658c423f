"""Fleet refresh against a real Prometheus: 64 nodes x 8 GPUs, one vLLM server each.

Starts ``infertop demo-server --nodes 64`` (benchmarks/fleet-node.toml: 8 GPUs, TP 8) and
Debian's ``prometheus`` scraping its 128 targets on loopback, then times infertop's side
of one refresh: the three concurrent Prometheus requests, the mapping to readings, and the
fleet pipeline (64 per-node Histories and rule sets, the cross-node rules).  Prints wall
and CPU time per refresh, and the share of one core at the refresh cadence infertop uses
(half the scrape interval).  The demo fleet and Prometheus run in other processes: their
CPU is not counted.  Numbers are printed, never asserted.

    .venv/bin/python benchmarks/bench_fleet.py [--nodes 64] [--scrape 5s] [--refreshes 12]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from helpers.prom_fleet import INSTALL_HINT, prometheus_binary, start_fleet  # noqa: E402


async def measure(url: str, refreshes: int, scrape_s: float) -> None:
    from infertop.fleet import FleetPipeline, diagnoser_factory
    from infertop.probes.prometheus.source import PrometheusSource

    src = PrometheusSource(url, refresh=1e-9, timeout=10.0)   # fetch on every call
    pipe = FleetPipeline(diagnoser_factory())
    await src.start()
    walls, cpus, fetch, feeds, sizes, series = [], [], [], [], [], 0
    try:
        for i in range(refreshes + 2):
            w0, c0 = time.perf_counter(), time.process_time()
            snap = await src.next()
            w1 = time.perf_counter()
            frame = pipe.feed(snap)
            w2, c2 = time.perf_counter(), time.process_time()
            if i >= 2:   # the first two build every series' History
                walls.append(w2 - w0)
                cpus.append(c2 - c0)
                fetch.append(w1 - w0)
                feeds.append(w2 - w1)
                sizes.append(src.client.last.bytes)
            series = sum(len(s.readings) for s in snap.samples.values())
            await asyncio.sleep(max(0.0, scrape_s / 2 - (time.perf_counter() - w0)))
    finally:
        await src.stop()
    nodes = len(frame.nodes)
    gpus = sum(len({r.label("gpu") for r in fr.by_key("gpu.info")}) for fr in frame.nodes.values())
    med = statistics.median
    print(f"fleet: {nodes} nodes, {gpus} GPUs, {series} readings per refresh, "
          f"{len(frame.findings)} findings")
    print(f"refresh wall   median {med(walls) * 1000:7.1f} ms   max {max(walls) * 1000:7.1f} ms"
          f"   (Prometheus requests {med(fetch) * 1000:.1f} ms, pipeline {med(feeds) * 1000:.1f} ms)")
    print(f"refresh CPU    median {med(cpus) * 1000:7.1f} ms   max {max(cpus) * 1000:7.1f} ms"
          f"   (infertop's process only)")
    for period in (scrape_s / 2, 7.5):
        print(f"share of a core at one refresh per {period:g} s: {med(cpus) / period:6.1%}")
    print(f"largest answer {max(sizes) / 1e6:.2f} MB (one of the two queries)")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--scrape", default="5s")
    ap.add_argument("--refreshes", type=int, default=12)
    args = ap.parse_args()
    if prometheus_binary() is None:
        print(f"bench_fleet: skipped: {INSTALL_HINT}")
        return 0
    work = Path(tempfile.mkdtemp(prefix="infertop-bench-fleet-"))
    t0 = time.monotonic()
    fleet = start_fleet(work, nodes=args.nodes, bad_node=None, dead=0,
                        scrape_interval=args.scrape, scenario=str(ROOT / "benchmarks" /
                                                                  "fleet-node.toml"),
                        ready_scrapes=2, timeout=240.0)
    print(f"fleet up and scraped twice in {time.monotonic() - t0:.0f} s "
          f"({args.nodes} nodes, scrape every {args.scrape})")
    try:
        asyncio.run(measure(fleet.url, args.refreshes, float(args.scrape.rstrip("s"))))
    finally:
        fleet.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
