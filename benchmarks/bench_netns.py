"""What reading a server in another network namespace costs (root only).

Builds one "pod" (a fake vLLM in its own network and PID namespaces behind a veth pair:
tests/helpers/netns_world.py), then prints:

- a connection made from inside its namespace (netns.connect_in: a one-shot thread that
  setns()es, connects and ends) against a plain connect to the same address from the
  host, median of ``--connects``; a scrape makes one only when its keep-alive connection
  was closed;
- ``collect()`` of a ServerMetricsProbe routed through the namespace against one reading
  the same page at the namespace's address directly, median wall and CPU time of this
  thread over ``--scrapes`` collects (the keep-alive connection is reused, so the
  namespace costs nothing per scrape);
- the planning at discovery (reach.plan_for: /proc reads of its namespace, cgroup, the
  runtime's metadata), median of 50.

Prints numbers, asserts nothing:

    sudo .venv/bin/python benchmarks/bench_netns.py [--connects 50] [--scrapes 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers.netns_world import Pod, why_not_root  # noqa: E402
from infertop.probes.server import netns  # noqa: E402
from infertop.probes.server.discovery import ServerProcess  # noqa: E402
from infertop.probes.server.metrics import ServerMetricsProbe  # noqa: E402
from infertop.probes.server.reach import Route, plan_for  # noqa: E402


def ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1e3:.3f} ms (min {min(xs) * 1e3:.3f})"


async def scrapes(probe: ServerMetricsProbe, n: int) -> tuple[list[float], list[float]]:
    wall, cpu = [], []
    await probe.open()
    await probe.collect()       # the first opens the connection
    for _ in range(n):
        w, c = time.perf_counter(), time.thread_time()
        await probe.collect()
        wall.append(time.perf_counter() - w)
        cpu.append(time.thread_time() - c)
        await asyncio.sleep(0.2)
    await probe.close()
    return wall, cpu


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--connects", type=int, default=50)
    ap.add_argument("--scrapes", type=int, default=20)
    a = ap.parse_args()
    why = why_not_root()
    if why:
        print(f"skipped: {why}")
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="bench-netns-"))
    with Pod(tmp, 8000, "bench") as pod:
        pid = pod.server_pid()
        inside, plain = [], []
        for _ in range(a.connects):
            t = time.perf_counter()
            netns.connect_in(pid, "127.0.0.1", 8000, 2.0).close()  # opens the namespace each time
            inside.append(time.perf_counter() - t)
            t = time.perf_counter()
            socket.create_connection((pod.addr, 8000), 2.0).close()
            plain.append(time.perf_counter() - t)
        print(f"connect inside its namespace (setns thread): {ms(inside)}")
        print(f"connect to its address from the host:        {ms(plain)}")
        routed = ServerMetricsProbe(f"http://{pod.addr}:8000", route=Route(
            f"http://{pod.addr}:8000", "bench", pid, "127.0.0.1"))
        direct = ServerMetricsProbe(f"http://{pod.addr}:8000")
        rw, rc = asyncio.run(scrapes(routed, a.scrapes))
        dw, dc = asyncio.run(scrapes(direct, a.scrapes))
        print(f"collect through the namespace: wall {ms(rw)}, loop CPU {ms(rc)}")
        print(f"collect at its address:        wall {ms(dw)}, loop CPU {ms(dc)}")
        server = ServerProcess(pid, "vllm", "vllm", [], 8000, "")
        plans = []
        os.environ["INFERTOP_HOST_ROOT"] = str(tmp / "hostroot")
        for _ in range(50):
            t = time.perf_counter()
            plan_for(server, [])
            plans.append(time.perf_counter() - t)
        print(f"plan_for (discovery, per server):            {ms(plans)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
