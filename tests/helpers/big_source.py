"""A deterministic SnapshotSource for scale: many GPUs, engines (series) and processes.

``BigSource(gpus=64, engines=16, procs=200)`` or ``BigSource(engines=20_000)`` (a page
with 20,000 engine series, issue 9).  Engine ``hot`` carries a high error share and a
full KV cache, so rules have something to raise and panes something to keep in view.
Used by the scale Pilot test and by benchmarks/bench_panes.py.
"""

from __future__ import annotations

from typing import Any

from helpers.snapkit import reading
from infertop.meta import GpuName, NvmlMeta, ProcessMeta, ServerInfo, ServerMeta
from infertop.model import Capability, Sample, Snapshot
from infertop.source import SnapshotSource

ROLES = ("engine_core", "worker", "helper", "detokenizer")


class BigSource(SnapshotSource):
    kind = "live"
    label = "big"

    def __init__(self, gpus: int = 8, engines: int = 1, procs: int = 4, hot: int = 7) -> None:
        self.gpus, self.engines, self.procs, self.hot = gpus, engines, procs, min(hot, engines - 1)
        self.t = 1_700_000_000.0
        self.n = 0

    @property
    def realtime(self) -> bool:
        return False

    async def start(self):
        return {"process": Capability("process", True), "nvml": Capability("nvml", True)}

    async def next(self) -> Snapshot:
        self.n += 1
        self.t += 1.0
        t, n = self.t, self.n
        gpu = []
        for g in range(self.gpus):
            busy = 0.2 if g == 3 else 0.8          # GPU 3 lags: a spread to show
            gpu += [reading("gpu.info", 1, text="NVIDIA H100 80GB HBM3", gpu=g),
                    reading("gpu.util_ratio", 0.9, gpu=g),
                    reading("gpu.sm_active_ratio", busy, gpu=g),
                    reading("gpu.mem_used_bytes", 60e9 + g, gpu=g),
                    reading("gpu.mem_total_bytes", 80e9, gpu=g),
                    reading("gpu.power_watts", 400, gpu=g),
                    reading("gpu.temp_celsius", 60, gpu=g),
                    reading("gpu.pcie_tx_bytes_per_second", 1e9, gpu=g),
                    reading("gpu.pcie_rx_bytes_per_second", 2e9, gpu=g)]
        proc = [reading("process.info", 1, text="vllm serve m", pid=100, ppid=1, name="vllm",
                        role="api_server"),
                reading("process.cpu_ratio", 0.1, pid=100)]
        for i in range(self.procs - 1):
            pid = 1000 + i
            proc += [reading("process.info", 1, text="VLLM::Worker", pid=pid, ppid=100,
                             name=f"VLLM::Worker_{i}", role=ROLES[i % len(ROLES)]),
                     reading("process.cpu_ratio", 0.01 * (i % 90), pid=pid),
                     reading("process.rss_bytes", 1e9, pid=pid)]
            if i < self.gpus:
                proc.append(reading("process.gpu_mem_bytes", 5e10, pid=pid, gpu=i))
        srv = []
        for e in range(self.engines):
            lab: dict[str, Any] = dict(instance="127.0.0.1:8000", engine=e, model="m")
            hot = e == self.hot
            srv += [reading("server.requests_running", 40 if hot else e % 7, **lab),
                    reading("server.requests_waiting", 9 if hot else 0, **lab),
                    reading("kv.usage_ratio", 0.99 if hot else 0.3, **lab),
                    reading("server.generation_tokens_total", (100 + e % 13) * n, **lab),
                    reading("server.requests_finished_total", 10 * n, reason="stop", **lab),
                    reading("server.requests_finished_total", (30 if hot else 0) * n,
                            reason="error", **lab)]
        srv.append(reading("server.info", 1, text="vllm m", instance="127.0.0.1:8000",
                           engine=0, model="m"))
        samples = {"nvml": Sample("nvml", t, tuple(gpu),
                                  meta=NvmlMeta(gpus=tuple(GpuName(g) for g in range(self.gpus)))),
                   "process": Sample("process", t, tuple(proc),
                                     meta=ProcessMeta(server=ServerInfo(pid=100, kind="vllm"))),
                   "server:127.0.0.1:8000": Sample("server:127.0.0.1:8000", t, tuple(srv),
                                                   meta=ServerMeta(dialect="vllm", model="m"))}
        return Snapshot(t, samples, n, await self.start())
