"""How much one server scrape costs on the event loop: ServerMetricsProbe.collect().

Starts ``infertop demo-server SCENARIO`` on a free port (or follows ``--url``), then runs
``--scrapes`` collects on one asyncio loop, ``--interval`` seconds apart (the demo's
values move between scrapes as they do live), and prints the CPU time of this thread per
collect (``time.thread_time``: the loop's own work, not the server's), median and min,
split into phases: fetch (HTTP request and body, with the awaits' wake-ups), parse
(promtext), map (dialects.readings_from_families) and the rest (decode, meta, roles).
``--profile OUT`` writes a cProfile of the measured collects.  Prints numbers, asserts
nothing.  Runs against any checkout's code (the phases are found by name), so it can
time main's and a branch's interleaved:

    .venv/bin/python benchmarks/bench_scrape.py [--scrapes 25] [--interval 0.5] [--url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import time
from collections import defaultdict

from demo_server import start_demo

import infertop.probes.server.metrics as metrics
from infertop.probes.server.metrics import ServerMetricsProbe


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PHASES: dict[str, list[float]] = defaultdict(list)
_current: dict[str, float] = defaultdict(float)


def _timed_sync(name: str, fn):
    def wrapped(*a, **k):
        t = time.thread_time()
        try:
            return fn(*a, **k)
        finally:
            _current[name] += time.thread_time() - t
    return wrapped


def _timed_async(name: str, fn):
    async def wrapped(*a, **k):
        t = time.thread_time()
        try:
            return await fn(*a, **k)
        finally:
            _current[name] += time.thread_time() - t
    return wrapped


def instrument() -> None:
    """Wrap the phases this checkout has (module-level names metrics.py calls)."""
    metrics.ServerMetricsProbe._fetch = _timed_async(  # type: ignore[method-assign]
        "fetch", metrics.ServerMetricsProbe._fetch)
    metrics.parse = _timed_sync("parse", metrics.parse)  # type: ignore[assignment]
    metrics.readings_from_families = _timed_sync(  # type: ignore[assignment]
        "map", metrics.readings_from_families)


async def run(url: str, scrapes: int, interval: float, warmup: int, profile: str) -> None:
    probe = ServerMetricsProbe(url)
    await probe.open()
    prof = None
    if profile:
        import cProfile
        prof = cProfile.Profile()
    try:
        for i in range(warmup + scrapes):
            await asyncio.sleep(interval)
            _current.clear()
            if prof is not None and i == warmup:
                prof.enable()
            t = time.thread_time()
            s = await probe.collect()
            total = time.thread_time() - t
            if i < warmup:
                continue
            PHASES["collect"].append(total)
            for k in ("fetch", "parse", "map"):
                PHASES[k].append(_current.get(k, 0.0))
            PHASES["rest"].append(total - sum(_current.values()))
            PHASES["readings"].append(len(s.readings) / 1000)
    finally:
        if prof is not None:
            prof.disable()
            prof.dump_stats(profile)
        await probe.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scrapes", type=int, default=25)
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--scenario", default="healthy")
    ap.add_argument("--url", default="")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--profile", default="")
    args = ap.parse_args()
    proc = None
    url = args.url
    if not url:
        port = args.port or free_port()
        proc = start_demo(port, args.scenario)
        url = f"http://127.0.0.1:{port}/metrics"
    instrument()
    try:
        asyncio.run(run(url, args.scrapes, args.interval, args.warmup, args.profile))
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait()
    n = len(PHASES["collect"])
    print(f"{n} collects of {url} ({PHASES['readings'][-1] * 1000:.0f} readings each), "
          "thread CPU ms per collect:")
    for k in ("collect", "fetch", "parse", "map", "rest"):
        v = [x * 1000 for x in PHASES[k]]
        print(f"  {k:8s} median {statistics.median(v):6.3f}  min {min(v):6.3f}")


if __name__ == "__main__":
    main()
