"""Fleet refresh against a real Prometheus: 64 nodes x 8 GPUs, one vLLM server each.

Starts ``infertop demo-server --nodes 64`` (benchmarks/fleet-node.toml: 8 GPUs, TP 8) and
Debian's ``prometheus`` scraping its 128 targets on loopback, then times infertop's side
of one refresh: the three concurrent Prometheus requests, the mapping to readings, and the
fleet pipeline (64 per-node Histories and rule sets, the cross-node rules).  Prints wall
and CPU time per refresh, and the share of one core at the refresh cadence infertop uses
(half the scrape interval).  The demo fleet and Prometheus run in other processes: their
CPU is not counted.  Numbers are printed, never asserted.

    .venv/bin/python benchmarks/bench_fleet.py [--nodes 64] [--scrape 5s] [--refreshes 12]

Measured on the shared 2-core dev box (stop 16, Prometheus on the same box):
  --scrape 15s: wall median 338 ms, CPU 289 ms a refresh = 3.8 % of a core at 7.5 s
  --scrape 5s:  wall 328-489 ms, CPU 241-299 ms a refresh = 9.6-11.1 % at 2.5 s (4 runs)
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
    from infertop.model import Snapshot
    from infertop.probes.prometheus.client import PrometheusError
    from infertop.probes.prometheus.source import PrometheusSource, build_samples

    src = PrometheusSource(url, timeout=20.0)
    failed: list[str] = []
    pipe = FleetPipeline(diagnoser_factory())
    await src.start()
    rows = []   # (wall, cpu, fetch wall, fetch cpu, map cpu, pipeline cpu, bytes)
    try:
        for i in range(refreshes + 2):
            w0, c0 = time.perf_counter(), time.process_time()
            try:
                answers = await src.fetch()       # targets + two instant queries, concurrent
            except PrometheusError as e:          # a starved Prometheus: say it, go on
                failed.append(str(e))
                continue
            w1, c1 = time.perf_counter(), time.process_time()
            samples = build_samples(*answers, now=time.time(), cache=src.cache)
            c2 = time.process_time()
            frame = pipe.feed(Snapshot(time.time(), samples, i))
            w3, c3 = time.perf_counter(), time.process_time()
            if i >= 2:   # the first two build every series' History
                rows.append((w3 - w0, c3 - c0, w1 - w0, c1 - c0, c2 - c1, c3 - c2,
                             src.client.last.bytes, src.asked))
            await asyncio.sleep(max(0.0, scrape_s / 2 - (time.perf_counter() - w0)))
    finally:
        await src.stop()
    if failed:
        print(f"{len(failed)} refreshes failed: {failed[0]}")
    if not rows:
        print("no refresh succeeded: nothing to report")
        return
    nodes = len(frame.nodes)
    gpus = sum(len({r.label("gpu") for r in fr.by_key("gpu.info")}) for fr in frame.nodes.values())
    down = sum(1 for n, s in frame.raw.samples.items() for r in s.readings
               if r.key == "node.up" and r.value == 0)

    def med(i: int) -> float:
        return statistics.median(r[i] for r in rows) * 1000

    def top(i: int) -> float:
        return max(r[i] for r in rows) * 1000
    print(f"fleet: {nodes} nodes, {gpus} GPUs, {sum(len(s.readings) for s in samples.values())} "
          f"readings; {down} targets down at the end (a starved demo fleet misses scrapes); "
          f"findings: {sorted({f.code for f in frame.findings})}")
    print(f"refresh wall  median {med(0):7.1f} ms  max {top(0):7.1f} ms  (of which waiting on "
          f"Prometheus {med(2):.1f} ms)")
    print(f"refresh CPU   median {med(1):7.1f} ms  max {top(1):7.1f} ms  = HTTP+JSON "
          f"{med(3):.1f} + mapping {med(4):.1f} + pipeline {med(5):.1f} ms (medians; "
          "infertop's process only)")
    print(f"nodes re-fed {len(rows) * nodes - pipe.reused} of {len(rows) * nodes} "
          f"(unchanged since the last scrape: kept)")
    cpu = statistics.median(r[1] for r in rows)
    print(f"share of one core at one refresh per {scrape_s / 2:g} s (half the scrape "
          f"interval): {cpu / (scrape_s / 2):6.1%}")
    print(f"largest answer {max(r[6] for r in rows) / 1e6:.2f} MB; targets asked per refresh "
          f"(scraped since the last one): {[r[7] for r in rows]} of {2 * nodes}")


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
