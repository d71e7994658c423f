#!/usr/bin/env python3
"""Cost of one whole collection tick: 8 fake GPUs (faithful fake pynvml) + a server
serving the real vLLM busy fixture on a local socket (tests/helpers/raw_http.py), through
the hub, History, derive and all rules.  CPU time per tick (the server runs in the same
process, so building and sending its page is counted too); prints numbers, asserts nothing.

The fixture's counters are bumped each tick so rates, quantiles and the parser's
changed-line path are exercised as with a live server."""

from __future__ import annotations

import asyncio
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from helpers.fake_pynvml import FakeGPU, FakeNVML, GiB, ManualClock  # noqa: E402
from helpers.raw_http import RawServer, Resp  # noqa: E402
from infertop.pipeline import Pipeline  # noqa: E402
from infertop.probes.nvml.probe import NvmlProbe  # noqa: E402
from infertop.probes.server.metrics import ServerMetricsProbe  # noqa: E402
from infertop.probes.sources.hub import Hub  # noqa: E402
from infertop.rules.engine import Diagnoser  # noqa: E402

PAGE = (ROOT / "tests" / "fixtures" / "metrics" / "vllm-0.32-busy.prom").read_text()
NUM = re.compile(r"^((?:vllm:[a-z_]+_total|vllm:[a-z_]+_(?:bucket|count|sum))(?:\{[^}]*\})?) (\S+)$",
                 re.M)


def page(tick: int) -> str:
    """The fixture with every vLLM counter and histogram grown by the tick number."""
    return NUM.sub(lambda m: f"{m.group(1)} {float(m.group(2)) + 10 * tick}", PAGE)


async def main(ticks: int = 300) -> None:
    clock = ManualClock()
    gpus = [FakeGPU(processes=[(1000 + i, 70 * GiB)], process_sm={1000 + i: 90})
            for i in range(8)]
    fake = FakeNVML(gpus, clock=clock)
    state = {"tick": 0}

    def handler(req) -> Resp:
        return Resp(200, page(state["tick"]).encode(),
                    {"content-type": "text/plain; version=0.0.4"})

    async with RawServer(handler) as server:
        await run(fake, clock, state, server.url, ticks)


async def run(fake: FakeNVML, clock: ManualClock, state: dict, url: str, ticks: int) -> None:
    hub = Hub([NvmlProbe(nvml_module=fake.module, clock=clock),
               ServerMetricsProbe(url)], deadline=5.0)
    pipe = Pipeline(Diagnoser())
    await hub.start()
    cpu, wall = [], []
    readings = 0
    for i in range(ticks):
        state["tick"] = i
        c0, w0 = time.process_time(), time.perf_counter()
        snap = await hub.next()
        frame = pipe.feed(snap)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
        readings = sum(len(s.readings) for s in snap.samples.values()) + len(frame.derived)
        clock.advance(1.0)
    await hub.stop()
    steady = sorted(cpu[10:])
    print(f"one tick, 8 fake GPUs + vLLM fixture server ({readings} readings incl. derived), "
          f"{ticks} ticks:")
    print(f"  CPU per tick: mean {statistics.mean(steady) * 1e3:.2f} ms, "
          f"p99 {steady[int(0.99 * (len(steady) - 1))] * 1e3:.2f} ms "
          f"(= {statistics.mean(steady) * 100:.2f} % of one core at 1 Hz)")
    print(f"  wall per tick: mean {statistics.mean(wall[10:]) * 1e3:.2f} ms")
    print(f"  series in History: {len(pipe.history)}")


if __name__ == "__main__":
    asyncio.run(main())
