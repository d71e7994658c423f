"""How long one NvmlProbe.collect() takes with 8 fake GPUs (the probe's own cost).

The fake answers in microseconds, so this measures what infertop adds per tick: Python
call overhead, Reading construction, GPM buffer handling, field-value decoding.  A real
driver adds its own call latencies on top (scripts/gpu-check prints those per call).

    .venv/bin/python benchmarks/bench_collect_nvml.py [--gpus 8] [--ticks 200]

``--fakenvml DIR --spec FILE``: the issue-23 harness instead (the REAL pynvml over the fake
driver library in DIR, e.g. benchmarks/harness/fakenvml, GPUs from the spec FILE): every
pynvml wrapper runs, as on the screen's harness.  CPU is the thread's own time per
collect; the probe's clock moves 1 s a tick (GPM pairs, slow and static cadences as at
1 Hz) however fast the loop runs.  Prints the calls per GPU per tick too.  To compare
with another checkout, run this file with that checkout's python.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers.fake_pynvml import FakeGPU, FakeNVML, GiB, ManualClock  # noqa: E402
from infertop.probes.nvml.probe import NvmlProbe  # noqa: E402


def p99(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(0.99 * (len(s) - 1))))]


def fake_box(n: int, clock: ManualClock) -> FakeNVML:
    gpus = [FakeGPU(processes=[(1000 + i, 70 * GiB), (2000 + i, 2 * GiB)],
                    process_sm={1000 + i: 90, 2000 + i: 3}) for i in range(n)]
    return FakeNVML(gpus, clock=clock)


async def bench(n_gpus: int, ticks: int, slow_every: int) -> None:
    clock = ManualClock()
    fake = fake_box(n_gpus, clock)
    probe = NvmlProbe(nvml_module=fake.module, clock=clock, slow_every=slow_every)
    t0 = time.perf_counter()
    cap = await probe.open()
    t_open = time.perf_counter() - t0
    assert cap.available, cap.reason
    # warm-up pair so GPM/rates are in steady state
    for _ in range(2):
        await probe.collect()
        clock.advance(1.0)
    total, inner, fast, slow = [], [], [], []
    nread = 0
    for _ in range(ticks):
        is_slow = probe._tick % probe.slow_every == 0
        t0 = time.perf_counter()
        s = await probe.collect()
        dt = time.perf_counter() - t0
        total.append(dt)
        inner.append(s.duration)
        (slow if is_slow else fast).append(dt)
        nread = len(s.readings)
        clock.advance(1.0)
    await probe.close()
    ms = 1000.0
    print(f"NvmlProbe, {n_gpus} fake GPUs, {ticks} ticks, slow_every={slow_every}, "
          f"{nread} readings/tick, open {t_open * ms:.2f} ms")
    print(f"  collect() via executor : mean {statistics.mean(total) * ms:.3f} ms   "
          f"p99 {p99(total) * ms:.3f} ms   max {max(total) * ms:.3f} ms")
    print(f"  collect_blocking (work): mean {statistics.mean(inner) * ms:.3f} ms   "
          f"p99 {p99(inner) * ms:.3f} ms")
    if fast and slow:
        print(f"  fast ticks mean {statistics.mean(fast) * ms:.3f} ms, "
              f"slow ticks mean {statistics.mean(slow) * ms:.3f} ms")


def bench_harness(fakenvml: str, spec: str, ticks: int, rounds: int) -> None:
    """The real pynvml over the harness's fake driver library, CPU per collect."""
    import os
    os.environ["FAKE_NVML_SPEC"] = spec
    sys.path.insert(0, fakenvml)
    import pynvml
    import sitecustomize  # noqa: F401  (installs the fake library under pynvml)
    if type(pynvml.nvmlLib).__name__ != "FakeNvmlLib":
        sitecustomize._install()   # another sitecustomize was imported first
    clock = ManualClock()
    probe = NvmlProbe(clock=clock)
    cap = probe.open_blocking()
    assert cap.available, cap.reason
    n = len(probe._gpus)
    for _ in range(3):
        probe.collect_blocking()
        clock.advance(1.0)
    before = probe.call_counts
    per_round = []
    for _ in range(rounds):
        t0 = time.thread_time()
        for _ in range(ticks):
            s = probe.collect_blocking()
            clock.advance(1.0)
        per_round.append((time.thread_time() - t0) / ticks)
    counts = probe.call_counts
    probe.close_blocking()
    total = sum(counts.values()) - sum(before.values())
    ms = 1000.0
    print(f"NvmlProbe over the harness's fake driver ({n} GPUs, real pynvml), "
          f"{len(s.readings)} readings/tick, {rounds} rounds of {ticks} ticks")
    print(f"  CPU per collect: median {statistics.median(per_round) * ms:.3f} ms "
          f"(rounds: {', '.join(f'{x * ms:.3f}' for x in per_round)})")
    print(f"  NVML calls per tick: {total / ticks / rounds:.1f} "
          f"({total / ticks / rounds / n:.2f} per GPU)")
    for name in sorted(counts, key=lambda k: before.get(k, 0) - counts[k]):
        d = counts[name] - before.get(name, 0)
        if d:
            print(f"    {name:45s} {d / ticks / rounds / n:5.2f} per GPU per tick")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--ticks", type=int, default=200)
    ap.add_argument("--slow-every", type=int, default=5)
    ap.add_argument("--fakenvml", help="the harness's fake driver folder (sitecustomize.py)")
    ap.add_argument("--spec", help="its GPU spec (JSON)")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    if a.fakenvml:
        if not a.spec:
            ap.error("--fakenvml needs --spec")
        bench_harness(a.fakenvml, a.spec, a.ticks, a.rounds)
        return
    asyncio.run(bench(a.gpus, a.ticks, a.slow_every))


if __name__ == "__main__":
    main()
