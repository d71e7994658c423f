"""A small deterministic SnapshotSource for TUI tests (no probes, no threads)."""

from __future__ import annotations

from typing import Any

from helpers.snapkit import hist, reading
from infertop.meta import GpuName, NvmlMeta, ProcessMeta, ServerInfo, ServerMeta
from infertop.model import Capability, Sample, Snapshot
from infertop.source import SnapshotSource


class SyntheticSource(SnapshotSource):
    kind = "live"
    label = "synthetic"

    def __init__(self, gpus: int = 2, server: bool = True, kv: float = 0.4,
                 realtime: bool = False) -> None:
        self.t = 1_700_000_000.0
        self.n = 0
        self.gpus = gpus
        self.server = server
        self.kv = kv
        self._realtime = realtime
        self.stopped = False

    @property
    def realtime(self) -> bool:
        return self._realtime

    async def start(self):
        caps = {"process": Capability("process", True)}
        caps["nvml"] = Capability("nvml", self.gpus > 0,
                                  "" if self.gpus else "NVML library not found (no NVIDIA driver?)")
        return caps

    async def next(self) -> Snapshot:
        self.n += 1
        self.t += 1.0
        t, n = self.t, self.n
        gpu = []
        for g in range(self.gpus):
            gpu += [reading("gpu.info", 1, text="NVIDIA H100 80GB HBM3", gpu=g, uuid=f"GPU-{g}"),
                    reading("gpu.util_ratio", 0.9, gpu=g),
                    reading("gpu.sm_active_ratio", 0.7 - 0.1 * g, gpu=g),
                    reading("gpu.tensor_active_ratio", 0.4, gpu=g),
                    reading("gpu.mem_used_bytes", 60e9, gpu=g),
                    reading("gpu.mem_total_bytes", 80e9, gpu=g),
                    reading("gpu.power_watts", 500, gpu=g),
                    reading("gpu.power_limit_watts", 700, gpu=g),
                    reading("gpu.temp_celsius", 61, gpu=g),
                    reading("gpu.sm_clock_hz", 1.98e9, gpu=g),
                    reading("gpu.sm_clock_max_hz", 1.98e9, gpu=g),
                    reading("gpu.throttle_reasons", 0, text="none", gpu=g)]
        samples = {}
        if gpu:
            samples["nvml"] = Sample("nvml", t, tuple(gpu),
                                     meta=NvmlMeta(gpus=tuple(GpuName(g) for g in range(self.gpus))))
        proc = [reading("process.info", 1, text="python -m vllm.entrypoints.openai.api_server",
                        pid=100, ppid=1, name="python", role="api_server"),
                reading("process.info", 1, text="VLLM::EngineCore", pid=101, ppid=100,
                        name="VLLM::EngineCore", role="engine_core"),
                reading("process.cpu_ratio", 0.2, pid=100),
                reading("process.cpu_ratio", 0.95, pid=101),
                reading("thread.cpu_ratio", 0.9, pid=101, tid=101, name="VLLM::EngineCor"),
                reading("host.cpu_ratio", 0.5), reading("host.cpu_count", 16)]
        samples["process"] = Sample("process", t, tuple(proc),
                                    meta=ProcessMeta(server=ServerInfo(pid=100, kind="vllm")))
        if self.server:
            lab: dict[str, Any] = dict(instance="127.0.0.1:8000", engine=0, model="tiny-llama")
            srv = [reading("server.info", 1, text="vllm tiny-llama", **lab),
                   reading("server.requests_running", 8, **lab),
                   reading("server.requests_waiting", 0, **lab),
                   reading("kv.usage_ratio", self.kv, **lab),
                   reading("server.generation_tokens_total", 100 * n, **lab),
                   reading("server.prompt_tokens_total", 400 * n, **lab),
                   hist("latency.ttft_seconds", {0.05: 5 * n, 0.1: 10 * n}, 0.6 * n, **lab),
                   hist("latency.itl_seconds", {0.01: 50 * n, 0.025: 100 * n}, 1.5 * n, **lab)]
            samples["server:127.0.0.1:8000"] = Sample(
                "server:127.0.0.1:8000", t, tuple(srv),
                meta=ServerMeta(dialect="vllm", model="tiny-llama", url="http://127.0.0.1:8000"))
        return Snapshot(t, samples, n, await self.start())

    async def stop(self):
        self.stopped = True
