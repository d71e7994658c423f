"""Cost of one diagnosis tick: every rule over 8 GPUs and all sources.

    .venv/bin/python benchmarks/bench_rules.py [--ticks N]

A synthetic host: 8 GPUs with GPM, topology, per-process memory; a vLLM server with two
data-parallel engines of TP=4 (API server, 2 engine cores, 8 workers, busiest threads);
/metrics with counters and nine histograms per engine.  History is warmed with 10 minutes
of ticks first (full ring buffers: the windowed look-ups pay their real price).  Prints
the Diagnoser.evaluate CPU time per tick (thread CPU time, so other processes on a shared
box do not count; mean, p50, p99), and derive() beside it for scale.
Two runs: a healthy load, and a troubled one where several rules hold at once.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time

from infertop.derive import derive
from infertop.history import History
from infertop.keys import SPECS
from infertop.model import Kind, Reading, Sample, Snapshot, make_labels
from infertop.rules.engine import Diagnoser

GIB = float(1 << 30)
N_GPU = 8
LAT_BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
              7.5, 10.0, 20.0, 40.0, 80.0, math.inf)
TOK_BOUNDS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, math.inf)


def r(key, value, text=None, **labels):
    s = SPECS[key]
    return Reading(key, value, s.unit, make_labels(labels), kind=s.kind, text=text)


class Host:
    def __init__(self, troubled: bool) -> None:
        self.troubled = troubled
        self.rng = random.Random(7)
        self.counters: dict = {}
        self.hists: dict = {}

    def count(self, key, inc, **labels):
        k = (key, tuple(sorted(labels.items())))
        self.counters[k] = self.counters.get(k, 0.0) + inc
        return r(key, self.counters[k], **labels)

    def hist(self, key, bounds, mean, n, **labels):
        k = (key, tuple(sorted(labels.items())))
        counts, total, sm = self.hists.get(k, ([0.0] * len(bounds), 0.0, 0.0))
        for _ in range(n):
            v = self.rng.expovariate(1 / mean)
            for i, b in enumerate(bounds):
                if v <= b:
                    counts[i] += 1
                    break
            total += 1
            sm += v
        self.hists[k] = (counts, total, sm)
        cum, acc = [], 0.0
        for b, c in zip(bounds, counts):
            acc += c
            cum.append((b, acc))
        s = SPECS[key]
        return Reading(key, total, s.unit, make_labels(labels), kind=Kind.HISTOGRAM,
                       buckets=tuple(cum), hist_sum=sm)

    def snapshot(self, t: float) -> Snapshot:
        rnd = self.rng.uniform
        bad = self.troubled
        gpu = []
        for g in range(N_GPU):
            sm = 0.2 if bad and g == 3 else rnd(0.55, 0.75)
            gpu += [r("gpu.info", 1.0, "NVIDIA H100 80GB HBM3", gpu=g), r("gpu.lost", 0.0, gpu=g),
                    r("gpu.util_ratio", rnd(0.9, 1.0), gpu=g),
                    r("gpu.mem_util_ratio", rnd(0.3, 0.6), gpu=g),
                    r("gpu.mem_used_bytes", (72 if bad else 60) * GIB, gpu=g),
                    r("gpu.mem_total_bytes", 80 * GIB, gpu=g),
                    r("gpu.power_watts", rnd(450, 650), gpu=g),
                    r("gpu.power_limit_watts", 700.0, gpu=g),
                    r("gpu.temp_celsius", rnd(55, 70), gpu=g),
                    r("gpu.sm_clock_hz", 1.98e9, gpu=g), r("gpu.sm_clock_max_hz", 1.98e9, gpu=g),
                    r("gpu.mem_clock_hz", 2.6e9, gpu=g), r("gpu.mem_clock_max_hz", 2.6e9, gpu=g),
                    r("gpu.throttle_reasons", 0x40 if bad and g == 5 else 0.0, gpu=g),
                    r("gpu.pcie_tx_bytes_per_second", rnd(1e8, 2e9), gpu=g),
                    r("gpu.pcie_rx_bytes_per_second", rnd(1e8, 2e9), gpu=g),
                    r("gpu.pcie_link_gen", 5.0, gpu=g), r("gpu.pcie_link_width", 16.0, gpu=g),
                    r("gpu.nvlink_tx_bytes_per_second", rnd(1e10, 5e10), gpu=g),
                    r("gpu.nvlink_rx_bytes_per_second", rnd(1e10, 5e10), gpu=g),
                    r("gpu.nvlink_links_active", 18.0, gpu=g),
                    r("gpu.ecc_uncorrected_total", 0.0, gpu=g),
                    r("gpu.ecc_corrected_total", 3.0, gpu=g),
                    r("gpu.xid_total", 0.0, gpu=g), r("gpu.mig_enabled", 0.0, gpu=g),
                    r("gpu.sm_active_ratio", sm, gpu=g),
                    r("gpu.sm_occupancy_ratio", sm * 0.5, gpu=g),
                    r("gpu.tensor_active_ratio", rnd(0.2, 0.4), gpu=g),
                    r("gpu.dram_bw_util_ratio", rnd(0.5, 0.8), gpu=g),
                    r("process.gpu_mem_bytes", 70 * GIB, gpu=g, pid=300 + g)]
            gpu += [r("gpu.topology", 1.0, "NVLINK", gpu=g, peer=p) for p in range(N_GPU) if p != g]
        proc = [r("host.cpu_ratio", 0.95 if bad else rnd(0.2, 0.4)), r("host.cpu_count", 64.0),
                r("host.load1", 12.0), r("host.mem_used_bytes", 300 * GIB),
                r("host.mem_total_bytes", 1024 * GIB)]
        pids = [(100, 1, "python", "api_server"), (200, 100, "VLLM::EngineCore", "engine_core"),
                (201, 100, "VLLM::EngineCore", "engine_core")]
        pids += [(300 + g, 200 + g // 4, "VLLM::Worker", "worker") for g in range(N_GPU)]
        for pid, ppid, name, role in pids:
            proc += [r("process.info", 1.0, f"{name} --model meta-llama/Llama-3-70B", pid=pid,
                       ppid=ppid, name=name, role=role, kind="vllm"),
                     r("process.cpu_ratio", rnd(0.3, 0.9), pid=pid, name=name),
                     r("process.rss_bytes", 4 * GIB, pid=pid, name=name),
                     r("process.threads", 120.0, pid=pid, name=name),
                     self.count("process.ctx_switches_total", 500, pid=pid, name=name,
                                type="voluntary"),
                     self.count("process.ctx_switches_total", 20, pid=pid, name=name,
                                type="involuntary")]
            proc += [r("thread.cpu_ratio", rnd(0.0, 0.6), pid=pid, tid=pid * 10 + i, name="python")
                     for i in range(8)]
        for name, val in (("model", "meta-llama/Llama-3-70B"), ("tensor_parallel_size", "4"),
                          ("data_parallel_size", "2"), ("dtype", "bfloat16"),
                          ("cuda_graphs", "on (default)"), ("max_num_seqs", "256")):
            proc.append(r("server.setting", 1.0, val, name=name))
        srv = []
        for e in range(2):
            lab = {"instance": "localhost:8000", "engine": e, "model": "llama"}
            srv += [r("server.requests_running", 60.0 if not bad or e else 5.0, **lab),
                    r("server.requests_waiting", 0.0 if not bad else 30.0 * (1 - e), **lab),
                    r("kv.usage_ratio", 0.6 if not bad else 0.97 - 0.5 * e, **lab),
                    self.count("server.preemptions_total", 1 if bad else 0, **lab),
                    self.count("kv.prefix_cache_queries_total", 4000, **lab),
                    self.count("kv.prefix_cache_hits_total", 1500, **lab),
                    self.count("server.prompt_tokens_total", 4000, **lab),
                    self.count("server.generation_tokens_total", 3000, **lab),
                    self.count("server.engine_steps_total", 40, **lab),
                    self.count("server.requests_finished_total", 20, reason="stop", **lab),
                    self.count("server.requests_finished_total", 1 if bad else 0, reason="error",
                               **lab),
                    self.count("server.requests_finished_total", 0, reason="abort", **lab),
                    r("server.process_start_seconds", 1.7e9, **lab)]
            for key, mean in (("latency.ttft_seconds", 0.5 if bad else 0.02),
                              ("latency.itl_seconds", 0.02), ("latency.tpot_seconds", 0.02),
                              ("latency.e2e_seconds", 6.0), ("latency.queue_seconds", 0.01),
                              ("latency.prefill_seconds", 0.05), ("latency.decode_seconds", 5.0)):
                srv.append(self.hist(key, LAT_BOUNDS, mean, 20, **lab))
            srv.append(self.hist("request.prompt_tokens", TOK_BOUNDS, 400, 20, **lab))
            srv.append(self.hist("request.generation_tokens", TOK_BOUNDS, 150, 20, **lab))
            srv.append(self.hist("server.iteration_tokens", TOK_BOUNDS, 80, 40, **lab))
        return Snapshot(t, {"nvml": Sample("nvml", t, tuple(gpu)),
                            "process": Sample("process", t, tuple(proc)),
                            "server:localhost:8000": Sample("server:localhost:8000", t,
                                                            tuple(srv))})


def run(troubled: bool, ticks: int, warm: int) -> dict:
    host = Host(troubled)
    hist = History()
    diag = Diagnoser()
    t = 1_800_000_000.0
    eval_us, derive_us = [], []
    readings = 0
    for i in range(warm + ticks):
        snap = host.snapshot(t)
        hist.add(snap)
        t0 = time.thread_time()
        derived = derive(hist)
        t1 = time.thread_time()
        hist.add_readings(t, derived)
        t1b = time.thread_time()
        findings = diag.evaluate(hist, snap, derived)
        t2 = time.thread_time()
        if i >= warm:
            derive_us.append((t1 - t0) * 1e6)
            eval_us.append((t2 - t1b) * 1e6)
            readings = sum(len(s.readings) for s in snap.samples.values())
        t += 1.0
    assert not diag.rule_errors, diag.rule_errors
    eval_us.sort()
    return {"readings": readings, "series": len(hist), "findings": [f.code for f in findings],
            "mean": statistics.fmean(eval_us), "p50": eval_us[len(eval_us) // 2],
            "p99": eval_us[int(len(eval_us) * 0.99) - 1], "derive": statistics.fmean(derive_us)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ticks", type=int, default=300)
    ap.add_argument("--warm", type=int, default=600)
    a = ap.parse_args()
    for troubled in (False, True):
        res = run(troubled, a.ticks, a.warm)
        print(f"{'troubled' if troubled else 'healthy '}: {res['readings']} readings/tick, "
              f"{res['series']} series; Diagnoser.evaluate mean {res['mean']:.0f} µs, "
              f"p50 {res['p50']:.0f} µs, p99 {res['p99']:.0f} µs "
              f"(derive {res['derive']:.0f} µs); findings: {', '.join(res['findings']) or 'none'}")


if __name__ == "__main__":
    main()
