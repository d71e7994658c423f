#!/usr/bin/env python3
"""CPU time of the pipeline thread's work per tick, on a recording: History, derived
readings, rules and the Frame's indexes (``Pipeline.feed(snap).prepare()``, what the
app's "infertop-pipeline" thread runs each tick).  The snapshots are decoded before the
clock starts, no probe and no screen run: thread CPU time, so it moves little with the
machine's load.

    # the shared harness's recording (8 fake GPUs behind the real pynvml + demo-server)
    python benchmarks/bench_pipeline_ticks.py ../helpers/bin/harness-70s.jsonl
        [--rounds 5] [--profile out.prof] [--dump frames.jsonl]

Each round feeds the whole recording through a fresh Pipeline (default config, as the
app makes it, with the lookups the panes make at 160x48 seeded: PANE_LOOKUPS); the
first 5 ticks of a round are not timed (first-tick imports and caches).  Prints ms of
CPU per tick, median and min over rounds; asserts nothing.
``--dump`` writes every frame's readings and findings as JSON lines (one round), to
compare two versions' output exactly (``cmp a.jsonl b.jsonl``).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import statistics
import time

from recorded_snapshots import load_snapshots

from infertop.cli.main import build_parser, make_pipeline

WARM = 5

# the (key, label) lookups the panes make at 160x48 on the harness recording (what the
# app's Pipeline.asked holds after its first frames, printed from bench_screen_ticks):
# Frame.prepare builds these in the pipeline thread, so a round seeds them
PANE_LOOKUPS = [(k, "gpu") for k in (
    "gpu.dram_bw_util_ratio", "gpu.info", "gpu.lost", "gpu.mem_total_bytes",
    "gpu.mem_used_bytes", "gpu.nvlink_tx_bytes_per_second", "gpu.pcie_rx_bytes_per_second",
    "gpu.pcie_tx_bytes_per_second", "gpu.power_limit_watts", "gpu.power_watts",
    "gpu.sm_active_ratio", "gpu.sm_clock_hz", "gpu.sm_clock_max_hz",
    "gpu.sm_occupancy_ratio", "gpu.temp_celsius", "gpu.tensor_active_ratio",
    "gpu.throttle_reasons", "gpu.util_ratio")] + [(k, "quantile") for k in (
    "latency.e2e_seconds", "latency.itl_seconds", "latency.kv_transfer_seconds",
    "latency.queue_seconds", "latency.ttft_seconds")] + [(k, "pid") for k in (
    "process.cpu_ratio", "process.ctx_switches_per_second", "process.rss_bytes",
    "process.state", "process.threads")]


def new_pipeline():
    pipe = make_pipeline(build_parser().parse_args([]))
    if hasattr(pipe, "asked"):     # (a version before Frame.prepare learnt them has none)
        pipe.asked.update(PANE_LOOKUPS)
    return pipe


def frame_line(frame) -> str:
    """Everything a frame hands to a pane or a writer, in order: readings and findings."""
    return json.dumps({
        "time": frame.snapshot.time,
        "readings": [r.to_dict() for r in frame.all_readings()],
        "derived": [r.to_dict() for r in frame.derived],
        "stale": [r.to_dict() for r in frame.stale],
        "findings": [f.to_dict() for f in frame.findings],
    }, sort_keys=True)


def one_round(snaps: list, prof: cProfile.Profile | None = None) -> float:
    pipe = new_pipeline()
    for snap in snaps[:WARM]:
        pipe.feed(snap).prepare()
    if prof:
        prof.enable()
    t0 = time.thread_time()
    for snap in snaps[WARM:]:
        pipe.feed(snap).prepare()
    t1 = time.thread_time()
    if prof:
        prof.disable()
    return (t1 - t0) / (len(snaps) - WARM)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("recording")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--profile", help="write cProfile stats of one round here")
    ap.add_argument("--dump", help="write every frame's readings and findings here")
    args = ap.parse_args()
    snaps = asyncio.run(load_snapshots(args.recording))
    if args.dump:
        pipe = new_pipeline()
        with open(args.dump, "w") as f:
            for snap in snaps:
                f.write(frame_line(pipe.feed(snap).prepare()) + "\n")
    if args.profile:
        prof = cProfile.Profile()
        one_round(snaps, prof)
        prof.dump_stats(args.profile)
    per = [one_round(snaps) for _ in range(args.rounds)]
    print(f"{args.recording}: {len(snaps)} ticks, {args.rounds} rounds: pipeline thread "
          f"{1000 * statistics.median(per):.2f} ms/tick median, {1000 * min(per):.2f} min")


if __name__ == "__main__":
    main()
