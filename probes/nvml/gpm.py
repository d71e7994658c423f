"""GPM (GPU Performance Monitoring, Hopper+) for one GPU: two reused sample buffers.

A GPM metric is the difference of two samples, and NVML wants them more than ~100 ms apart
("due to the internal sample refresh rate").  Each tick takes one new sample into the spare
buffer and compares it with the previous tick's; then the buffers swap roles.  If the new
sample came too soon, the older one is kept as the reference, so the next interval is longer
and the last computed values stay on screen meanwhile.  Buffers and the (19 KB) metrics
request struct are allocated once per GPU and reused.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from infertop.probes.nvml.calls import NvmlCalls

# reading key -> (GPM metric constant name, scale to the key's unit)
GPM_READINGS: tuple[tuple[str, str, float], ...] = (
    ("gpu.sm_active_ratio", "NVML_GPM_METRIC_SM_UTIL", 0.01),           # percent -> 0..1
    ("gpu.sm_occupancy_ratio", "NVML_GPM_METRIC_SM_OCCUPANCY", 0.01),
    ("gpu.tensor_active_ratio", "NVML_GPM_METRIC_ANY_TENSOR_UTIL", 0.01),
    ("gpu.dram_bw_util_ratio", "NVML_GPM_METRIC_DRAM_BW_UTIL", 0.01),
)
MIB = 1024 * 1024
# link-rate metrics, used for PCIe/NVLink rates when present (MiB/s -> bytes/s)
GPM_RATES: tuple[tuple[str, str, float], ...] = (
    ("gpu.pcie_tx_bytes_per_second", "NVML_GPM_METRIC_PCIE_TX_PER_SEC", MIB),
    ("gpu.pcie_rx_bytes_per_second", "NVML_GPM_METRIC_PCIE_RX_PER_SEC", MIB),
    ("gpu.nvlink_tx_bytes_per_second", "NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC", MIB),
    ("gpu.nvlink_rx_bytes_per_second", "NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC", MIB),
)


class GpmSampler:
    """Owns the two sample buffers of one GPU.  ``values`` maps reading key -> value or None
    (None: that metric's per-metric nvmlReturn was not SUCCESS; ``returns`` keeps the code)."""

    def __init__(self, calls: NvmlCalls, nvml: ModuleType, handle: object,
                 min_interval: float, clock: Callable[[], float]) -> None:
        self._calls = calls
        self._handle = handle
        self._min = min_interval
        self._clock = clock
        self._ok = nvml.NVML_SUCCESS
        self._nvml = nvml
        self._bufs = [calls("nvmlGpmSampleAlloc"), calls("nvmlGpmSampleAlloc")]
        self._ask(GPM_READINGS + GPM_RATES)
        self._prev: tuple[int, float] | None = None   # (buffer index, clock time)
        self.values: dict[str, float | None] = {}
        self.returns: dict[str, int] = {}
        self.interval = 0.0   # seconds between the two samples of ``values``

    def _ask(self, wanted: tuple[tuple[str, str, float], ...]) -> None:
        """The metrics request: which metrics each computed pair asks the driver for."""
        nvml = self._nvml
        self._keys = [k for k, _, _ in wanted]
        self._scale = [s for _, _, s in wanted]
        mg = nvml.c_nvmlGpmMetricsGet_t()
        mg.version = nvml.NVML_GPM_METRICS_GET_VERSION
        mg.numMetrics = len(wanted)
        for i, (_, const, _) in enumerate(wanted):
            mg.metrics[i].metricId = getattr(nvml, const)
        self._mg = mg
        self.rates = len(wanted) > len(GPM_READINGS)

    def drop_rates(self) -> None:
        """Stop asking for the PCIe/NVLink rate metrics (the links read them elsewhere:
        this GPU's GPM lacks them, or it has no NVLink): half the metrics per pair.  Their
        last values leave ``values``, so nothing reads a frozen rate."""
        self._ask(GPM_READINGS)
        for key, _, _ in GPM_RATES:
            self.values.pop(key, None)
            self.returns.pop(key, None)

    @property
    def ready(self) -> bool:
        return bool(self.values)

    def sample(self) -> bool:
        """Take this tick's sample; True when ``values`` were recomputed from a new pair."""
        cur = 0 if self._prev is None else 1 - self._prev[0]
        self._calls("nvmlGpmSampleGet", self._handle, self._bufs[cur])
        now = self._clock()
        if self._prev is None:
            self._prev = (cur, now)
            return False
        prev, t_prev = self._prev
        if now - t_prev < self._min:
            return False   # too close: keep the older reference, overwrite this buffer next time
        mg = self._mg
        mg.sample1 = self._bufs[prev]
        mg.sample2 = self._bufs[cur]
        try:
            self._calls("nvmlGpmMetricsGet", mg)
        finally:
            self._prev = (cur, now)   # a failed pair must not poison the next one
        ok = self._ok
        metrics = mg.metrics   # one lookup: each is a ctypes field access through pynvml
        for i, key in enumerate(self._keys):
            m = metrics[i]
            ret = int(m.nvmlReturn)
            self.returns[key] = ret
            self.values[key] = float(m.value) * self._scale[i] if ret == ok else None
        self.interval = now - t_prev
        return True

    def free(self) -> None:
        for b in self._bufs:
            try:
                self._calls("nvmlGpmSampleFree", b)
            except Exception:
                pass   # closing: nothing useful to do with a failure
        self._bufs = []
