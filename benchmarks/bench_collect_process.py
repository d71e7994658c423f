"""How much one ProcessProbe.collect() costs, on this host, against a live server.

Starts ``infertop demo-server healthy`` on a free port (or follows ``--url``), lets the
probe find it, then runs ``--ticks`` collects back to back and prints the CPU time of
one collect (the probe thread's own cost: psutil and /proc reads, Reading construction)
and how many files it opened and directories it listed per tick (builtins.open/os.open,
os.listdir/os.scandir, counted in this process).  Prints numbers, asserts nothing.

    .venv/bin/python benchmarks/bench_collect_process.py [--ticks 200] [--url URL]
"""

from __future__ import annotations

import argparse
import builtins
import os
import socket
import statistics
import time
from collections import Counter

from demo_server import start_demo

from infertop.probes.server.process import ProcessProbe


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Opens:
    """Counts the files and directories the probe opens (this thread's calls only)."""

    def __init__(self) -> None:
        self.n: Counter[str] = Counter()
        self._saved = (builtins.open, os.open, os.listdir, os.scandir)

    def __enter__(self) -> Opens:
        b_open, o_open, listdir, scandir = self._saved

        def count(kind, fn):
            def wrapped(*a, **k):
                self.n[kind] += 1
                return fn(*a, **k)
            return wrapped
        builtins.open = count("open", b_open)
        os.open = count("open", o_open)
        os.listdir = count("listdir", listdir)
        os.scandir = count("listdir", scandir)
        return self

    def __exit__(self, *exc) -> None:
        builtins.open, os.open, os.listdir, os.scandir = self._saved


class TickClock:
    """The probe's clock, one second a tick: its every-N-seconds work (the tree's
    membership, server rediscovery) comes at the 1 Hz screen's cadence however fast the
    loop runs."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def bench(url: str, ticks: int, interval: float, profile: str | None,
          host_top_at: float | None) -> None:
    clock = TickClock()
    kw = {} if host_top_at is None else {"host_top_at": host_top_at}
    probe = ProcessProbe(url=url, clock=clock, **kw)
    cap = probe.open_blocking()
    assert cap.available, cap.reason
    for _ in range(3):   # find the server, list its tree, first CPU rates
        s = probe.collect_blocking()
        clock.t += 1.0
        time.sleep(interval)
    server = s.meta.server if s.meta else None
    print(f"ProcessProbe against {url}: server {server.pid if server else None}, "
          f"tree {list(probe.tree)}, {len(s.readings)} readings/tick")
    cpu = []
    prof = None
    if profile:
        import cProfile
        prof = cProfile.Profile()
    with Opens() as opens:
        for _ in range(ticks):
            t0 = time.thread_time()
            if prof is not None:
                prof.runcall(probe.collect_blocking)
            else:
                probe.collect_blocking()
            cpu.append(time.thread_time() - t0)
            clock.t += 1.0
            if interval:
                time.sleep(interval)
    if prof is not None:
        prof.dump_stats(profile)
    ms = 1000.0
    print(f"  collect_blocking CPU : mean {statistics.mean(cpu) * ms:.3f} ms   "
          f"median {statistics.median(cpu) * ms:.3f} ms   max {max(cpu) * ms:.3f} ms "
          f"({ticks} ticks, {interval:g} s apart, 1 s apart on the probe's clock)")
    print("  per tick: " + ", ".join(f"{k} {v / ticks:.1f}" for k, v in sorted(opens.n.items())))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ticks", type=int, default=200)
    ap.add_argument("--interval", type=float, default=0.02,
                    help="seconds between collects (CPU rates need some time to pass)")
    ap.add_argument("--profile", help="write a cProfile of the collects to this file")
    ap.add_argument("--host-top-at", type=float,
                    help="host CPU ratio from which every process is scanned for the top "
                         "consumers (SCH-004; default the probe's); 2 turns it off")
    ap.add_argument("--url", help="follow this server instead of starting a demo-server")
    a = ap.parse_args()
    demo = None
    url = a.url
    if url is None:
        port = free_port()
        demo = start_demo(port)
        url = f"http://127.0.0.1:{port}"
    try:
        bench(url, a.ticks, a.interval, a.profile, a.host_top_at)
    finally:
        if demo is not None:
            demo.terminate()
            demo.wait(5)


if __name__ == "__main__":
    main()
