"""NvmlProbe: per-GPU counters from NVML (nvidia-ml-py's ``pynvml``), GPM when the GPU has it.

What it reads (label gpu = NVML index), and how often:
  every tick   util, memory, power, temperature, clocks, clocks-event (throttle) reasons,
               PCIe link gen/width, PCIe and NVLink byte rates (nvml_links), GPM SM active,
               occupancy, tensor active, DRAM bandwidth (nvml_gpm), Xid events (an event
               set polled with timeout 0)
  slow ticks   power limit, ECC totals, HBM temperature, remapped rows, MIG mode, NVLink
  (slow_every) links up, per-process GPU memory and SM share (nvml_slow); re-sent in between
  static ticks max clocks, memory bus width, CUDA cores, compute capability, GPU-pair
  (static_every) topology (also re-read the tick a GPU is lost); re-sent in between

A call the GPU refused with NotSupported is asked again only every NOT_SUPPORTED_RECHECK
ticks, one the driver lacks (FunctionNotFound) never (gpu.refused); their readings are
re-sent meanwhile.  util and memory are asked every tick whatever happened, so a GPU that
falls off the bus is seen the tick it does.

Failure is per call: NotSupported -> that reading UNSUPPORTED "not supported on <GPU>";
NoPermission -> ERROR naming the call; GpuIsLost -> gpu.lost=1 and every reading of that GPU
ERROR "GPU lost (fell off the bus)", other GPUs untouched; collect never raises for a
per-call error.  pynvml is imported lazily in open: no library or driver is a Capability.
Every call is timed by name (``call_timings``) for scripts/gpu-check.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from infertop.meta import GpuName, NvmlMeta
from infertop.model import Capability, Reading, Sample, Status, make_labels
from infertop.probes.base import BlockingProbe, sample
from infertop.probes.flags import BUILTIN_FLAGS
from infertop.probes.nvml.calls import GpuLost, NvmlCalls
from infertop.probes.nvml.decode import decode_throttle
from infertop.probes.nvml.gpm import GPM_READINGS, GpmSampler
from infertop.probes.nvml.gpu import (
    LOST_REASON,
    MHZ,
    GpuState,
    dead_readings,
    fail_all,
    gmk,
    handle_addr,
    info_labels,
    mk,
    read_one,
    text_of,
    xid_readings,
)
from infertop.probes.nvml.links import link_rates, refresh_nvlink
from infertop.probes.nvml.owners import GpuProcessOwners
from infertop.probes.nvml.slow import read_slow, read_static, topology
from infertop.probes.registry import ProbeSpec, register

__all__ = ["NvmlProbe", "LOST_REASON"]


class NvmlProbe(BlockingProbe):
    name = "nvml"

    def __init__(self, *, nvml_module: ModuleType | None = None, slow_every: int = 5,
                 static_every: int = 60, gpm_min_interval: float = 0.1,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._module = nvml_module
        self.slow_every = max(1, int(slow_every))
        # a minute at 1 Hz: these facts cannot change while the GPU is on the bus; the
        # re-read is only a guard against a driver that answered oddly once
        self.static_every = max(1, int(static_every))
        self.gpm_min_interval = gpm_min_interval
        self._clock = clock            # GPM spacing and counter fallbacks (tests inject one)
        self._calls: NvmlCalls | None = None
        self._gpus: list[GpuState] = []
        self._by_addr: dict[int, GpuState] = {}
        self._event_set: Any = None
        self._topology: list[Reading] = []
        self._topology_of: tuple[int, ...] = ()   # the live GPUs _topology was read for
        self._owners = GpuProcessOwners()   # user and command of each GPU process
        self._owner_readings: list[Reading] = []
        self._meta = NvmlMeta()
        self._tick = 0
        self._initialized = False
        self.capability = Capability(self.name, False, "not opened")

    @property
    def call_timings(self) -> dict[str, float]:
        """NVML function name -> seconds its last call took (for scripts/gpu-check)."""
        return dict(self._calls.timings) if self._calls else {}

    @property
    def call_counts(self) -> dict[str, int]:
        return dict(self._calls.counts) if self._calls else {}

    @property
    def calls(self) -> NvmlCalls:
        assert self._calls is not None, "probe not opened"
        return self._calls

    # ---------------------------------------------------------------- open / close
    def open_blocking(self) -> Capability:
        self.capability = self._open()
        return self.capability

    def _open(self) -> Capability:
        nvml = self._module
        if nvml is None:
            try:
                import pynvml  # lazy: the core and the TUI never need it
            except ImportError:
                return Capability(self.name, False, "nvidia-ml-py (pynvml) is not installed")
            nvml = pynvml
        calls = self._calls = NvmlCalls(nvml)
        try:
            calls("nvmlInit")
        except Exception as e:
            return Capability(self.name, False, self._init_reason(e))
        self._initialized = True
        try:
            count = int(calls("nvmlDeviceGetCount"))
        except Exception as e:
            return Capability(self.name, False, f"NVML cannot count GPUs: {e}")
        if count == 0:
            return Capability(self.name, False, "no NVIDIA GPU visible to NVML")
        try:
            driver = text_of(calls("nvmlSystemGetDriverVersion"))
        except Exception:
            driver = "unknown"
        self._gpus = [self._open_gpu(i) for i in range(count)]
        self._by_addr = {handle_addr(g.handle): g for g in self._gpus if g.handle is not None}
        self._open_xid()
        self._topology = topology(calls, self._gpus)
        live = [g for g in self._gpus if not g.dead]
        self._topology_of = tuple(g.index for g in live)
        self._meta = NvmlMeta(
            gpus=tuple(GpuName(g.index, g.name, g.uuid) for g in self._gpus),
            driver=driver,
            gpm=tuple(g.index for g in live if g.gpm is not None),
            xid=tuple(g.index for g in live if g.xid))
        features = {f for f, has in (("gpm", any(g.gpm is not None for g in live)),
                                     ("nvlink", any(g.nvlink_count for g in live)),
                                     ("mig", any(g.mig for g in live)),
                                     ("xid", any(g.xid for g in live))) if has}
        if not live:
            return Capability(self.name, False, "; ".join(
                f"GPU {g.index}: {g.dead}" for g in self._gpus), frozenset(features))
        return Capability(self.name, True, "", frozenset(features))

    def _init_reason(self, e: Exception) -> str:
        err = self.calls.is_error
        if err(e, "NVMLError_LibraryNotFound"):
            return "NVML library not found (no NVIDIA driver?)"
        if err(e, "NVMLError_DriverNotLoaded"):
            return "NVIDIA driver not loaded (is the kernel module installed and loaded?)"
        if err(e, "NVMLError_LibRmVersionMismatch"):
            return "NVML and kernel driver versions differ (driver upgraded without reboot?)"
        if err(e, "NVMLError_NoPermission"):
            return "no permission to open NVML (access to /dev/nvidiactl denied)"
        if err(e, "NVMLError"):
            return f"NVML init failed: {e}"
        return f"NVML init failed: {type(e).__name__}: {e}"

    def _open_gpu(self, i: int) -> GpuState:
        calls = self.calls
        g = GpuState(i, make_labels(gpu=i))
        try:
            g.handle = calls("nvmlDeviceGetHandleByIndex", i)
            g.name = text_of(calls("nvmlDeviceGetName", g.handle))
            g.uuid = _try(lambda: text_of(calls("nvmlDeviceGetUUID", g.handle)), "")
            g.pci_bus_id = _try(
                lambda: text_of(calls("nvmlDeviceGetPciInfo", g.handle).busId), "")
            self._open_gpm(g)
            refresh_nvlink(calls, g)
            g.mig = _try(lambda: calls("nvmlDeviceGetMigMode", g.handle)[0]
                         == getattr(calls.nvml, "NVML_DEVICE_MIG_ENABLE", 1), None)
        except GpuLost:
            g.lost, g.dead = True, LOST_REASON
        except Exception as e:
            why = calls.failure(e, "nvmlDeviceGetHandleByIndex", f"GPU {i}")[1]
            g.dead = f"cannot open GPU {i}: {why}"
        g.pcie_src = "gpm" if g.gpm is not None else "fields"
        return g

    def _open_gpm(self, g: GpuState) -> None:
        calls = self.calls
        why_not = f"GPM not supported on {g.name} (needs Hopper or newer)"
        try:
            if not calls("nvmlGpmQueryDeviceSupport", g.handle).isSupportedDevice:
                g.gpm_status, g.gpm_reason = Status.UNSUPPORTED, why_not
                return
            g.gpm = GpmSampler(calls, calls.nvml, g.handle, self.gpm_min_interval, self._clock)
        except GpuLost:
            raise
        except Exception as e:
            st, why = calls.failure(e, "nvmlGpmQueryDeviceSupport", g.name)
            g.gpm_status, g.gpm_reason = st, (why_not if st is Status.UNSUPPORTED else why)

    def _open_xid(self) -> None:
        """Register every GPU that supports it for Xid critical errors on one event set.

        Where event sets are refused (NotSupported, NoPermission in some containers) the
        Xid readings are left out for that GPU; meta["xid"] lists the GPUs that have them.
        """
        calls = self.calls
        xid_bit = getattr(calls.nvml, "nvmlEventTypeXidCriticalError", 0x8)
        live = [g for g in self._gpus if not g.dead]
        if not live:
            return
        try:
            es = calls("nvmlEventSetCreate")
        except Exception:
            return
        for g in live:
            try:
                if calls("nvmlDeviceGetSupportedEventTypes", g.handle) & xid_bit:
                    calls("nvmlDeviceRegisterEvents", g.handle, xid_bit, es)
                    g.xid = True
            except Exception:
                g.xid = False
        if any(g.xid for g in live):
            self._event_set = es
        else:
            _try(lambda: calls("nvmlEventSetFree", es), None)

    def close_blocking(self) -> None:
        for g in self._gpus:
            if g.gpm is not None:
                g.gpm.free()
                g.gpm = None
        if self._calls is None:
            return
        calls = self._calls
        if self._event_set is not None:
            es, self._event_set = self._event_set, None
            _try(lambda: calls("nvmlEventSetFree", es), None)
        if self._initialized:
            self._initialized = False
            _try(lambda: calls("nvmlShutdown"), None)

    # ---------------------------------------------------------------- collect
    def collect_blocking(self) -> Sample:
        started = time.perf_counter()
        if not self.capability.available:
            return sample(self.name, [], status=Status.ERROR, reason=self.capability.reason,
                          started=started)
        slow = self._tick % self.slow_every == 0
        static = self._tick % self.static_every == 0
        tick = self._tick
        self._tick += 1
        self._drain_xid()
        out: list[Reading] = []
        for g in self._gpus:
            if not g.dead:
                g.tick = tick
                try:
                    out.extend(self._read_gpu(g, slow, static))
                    continue
                except GpuLost:
                    g.lost, g.dead, g.slow, g.static = True, LOST_REASON, [], []
                    g.gpm = None   # its buffers belong to a dead handle; freeing could hang
            out.extend(dead_readings(g))
        live = tuple(g.index for g in self._gpus if not g.dead)
        # tick 1 uses the topology read at open; a lost GPU's pairs go the tick it is lost
        if (static and self._tick > 1) or live != self._topology_of \
                or (slow and self._tick > 1 and not _settled(self._topology)):
            self._topology = topology(self.calls, self._gpus)
            self._topology_of = live
        out.extend(self._topology)
        if slow:   # on the process lists' cadence; re-sent in between like them
            pids = [int(r.label("pid")) for g in self._gpus for r in g.slow
                    if r.key == "process.gpu_mem_bytes" and r.label("pid").isdigit()]
            self._owner_readings = self._owners.readings(pids)
        out.extend(self._owner_readings)
        status, reason = Status.OK, ""
        if all(g.dead for g in self._gpus):
            status, reason = Status.ERROR, "no usable GPU: " + "; ".join(
                f"GPU {g.index}: {g.dead}" for g in self._gpus)
        return sample(self.name, out, status=status, reason=reason, meta=self._meta,
                      started=started)

    def _read_gpu(self, g: GpuState, slow: bool, static: bool) -> list[Reading]:
        calls = self.calls
        nvml = calls.nvml
        lab = g.labels
        if not g.info:   # name, UUID and bus id are read once, at open
            g.info = [mk("gpu.info", 1.0, info_labels(g), text=g.name),
                      mk("gpu.lost", 0.0, lab)]
        out = list(g.info)
        try:
            u = calls("nvmlDeviceGetUtilizationRates", g.handle)
            out += [gmk(g, "gpu.util_ratio", u.gpu / 100.0),
                    gmk(g, "gpu.mem_util_ratio", u.memory / 100.0)]
        except GpuLost:
            raise
        except Exception as e:
            out += fail_all(calls, g, ("gpu.util_ratio", "gpu.mem_util_ratio"), e,
                            "nvmlDeviceGetUtilizationRates")
        out += self._memory(g)
        out += [
            read_one(calls, g, "gpu.power_watts", "nvmlDeviceGetPowerUsage", scale=1e-3),
            read_one(calls, g, "gpu.temp_celsius", "nvmlDeviceGetTemperature",
                     nvml.NVML_TEMPERATURE_GPU),
            read_one(calls, g, "gpu.sm_clock_hz", "nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_SM,
                     scale=MHZ),
            read_one(calls, g, "gpu.mem_clock_hz", "nvmlDeviceGetClockInfo",
                     nvml.NVML_CLOCK_MEM, scale=MHZ),
            self._throttle(g),
            read_one(calls, g, "gpu.pcie_link_gen", "nvmlDeviceGetCurrPcieLinkGeneration"),
            read_one(calls, g, "gpu.pcie_link_width", "nvmlDeviceGetCurrPcieLinkWidth"),
        ]
        gpm_readings, gpm_failure = self._gpm(g)
        out += gpm_readings
        out += link_rates(calls, g, slow, gpm_failure, self._clock() * 1e6)
        if g.gpm is not None and g.gpm.rates and g.gpm.ready and g.pcie_src != "gpm" \
                and g.nvlink_src != "gpm":
            g.gpm.drop_rates()   # the links read another source: stop asking GPM for them
        out += xid_readings(g)
        if static or not g.static or (slow and not _settled(g.static)):
            g.static = read_static(calls, g)   # a passing error: asked again on slow ticks
        out += g.static
        if slow or not g.slow:
            g.slow = read_slow(calls, g)
        out += g.slow
        return out

    def _memory(self, g: GpuState) -> list[Reading]:
        calls = self.calls
        nvml = calls.nvml
        keys = ("gpu.mem_used_bytes", "gpu.mem_total_bytes")
        m = None
        if g.mem_v2 and hasattr(nvml, "nvmlMemory_v2"):
            # v2 'used' leaves out driver-reserved memory, as nvidia-smi shows it
            try:
                m = calls("nvmlDeviceGetMemoryInfo", g.handle, version=nvml.nvmlMemory_v2)
            except GpuLost:
                raise
            except Exception as e:
                if not (calls.is_error(e, "NVMLError_FunctionNotFound")
                        or calls.is_error(e, "NVMLError_ArgumentVersionMismatch")):
                    return fail_all(calls, g, keys, e, "nvmlDeviceGetMemoryInfo")
                g.mem_v2 = False   # older driver: v1 from now on
        if m is None:
            try:
                m = calls("nvmlDeviceGetMemoryInfo", g.handle)
            except GpuLost:
                raise
            except Exception as e:
                return fail_all(calls, g, keys, e, "nvmlDeviceGetMemoryInfo")
        return [gmk(g, "gpu.mem_used_bytes", float(m.used)),
                gmk(g, "gpu.mem_total_bytes", float(m.total))]

    def _throttle(self, g: GpuState) -> Reading:
        calls = self.calls
        try:
            mask = int(calls(g.throttle_fn, g.handle))
        except GpuLost:
            raise
        except Exception as e:
            old = "nvmlDeviceGetCurrentClocksThrottleReasons"
            if g.throttle_fn != old and (calls.is_error(e, "NVMLError_FunctionNotFound")
                                         or isinstance(e, AttributeError)):
                g.throttle_fn = old   # a driver older than the clocks-event rename
                return self._throttle(g)
            st, why = calls.failure(e, g.throttle_fn, g.name)
            return gmk(g, "gpu.throttle_reasons", None, st, why)
        return gmk(g, "gpu.throttle_reasons", float(mask),
                   text=lambda: decode_throttle(mask))   # decoded only when the mask moves

    def _gpm(self, g: GpuState) -> tuple[list[Reading], tuple[Status, str] | None]:
        """This tick's GPM readings, and the failure (if any) the link rates share."""
        keys = [k for k, _, _ in GPM_READINGS]
        if g.gpm is not None:
            try:
                g.gpm.sample()
            except GpuLost:
                raise
            except Exception as e:
                st, why = self.calls.failure(e, "GPM sampling", g.name)
                if st is not Status.UNSUPPORTED:
                    return [gmk(g, k, None, st, why) for k in keys], (st, why)
                # e.g. MIG switched on: GPM is gone for this GPU; links fall back to counters
                g.gpm.free()
                g.gpm, g.gpm_status, g.gpm_reason = None, st, f"GPM {why}"
                g.pcie_src = "fields" if g.pcie_src == "gpm" else g.pcie_src
                g.nvlink_src = "fields" if g.nvlink_src == "gpm" else g.nvlink_src
        gpm = g.gpm
        if gpm is None:
            return [gmk(g, k, None, g.gpm_status, g.gpm_reason) for k in keys], None
        if not gpm.ready:
            why = f"GPM needs two samples >= {self.gpm_min_interval:g} s apart"
            return [gmk(g, k, None, Status.NODATA, why) for k in keys], None
        out = []
        for k in keys:
            v = gpm.values.get(k)
            out.append(gmk(g, k, v) if v is not None else
                       gmk(g, k, None, Status.UNSUPPORTED,
                          f"GPM metric not supported on {g.name}"))
        return out, None

    def _drain_xid(self) -> None:
        """Poll the event set with timeout 0 until empty (bounded: a storm cannot stall us)."""
        es = self._event_set
        if es is None:
            return
        for _ in range(64):
            try:
                data = self.calls("nvmlEventSetWait_v2", es, 0)
            except Exception:
                return   # NVMLError_Timeout: nothing pending (anything else: next tick)
            g = self._by_addr.get(handle_addr(data.device))
            if g is not None:
                g.xid_total += 1
                g.xid_last = int(data.eventData)


def _settled(readings: list[Reading]) -> bool:
    """Every reading an answer (or a lasting refusal): nothing to ask again before the
    static cadence.  An error (permission, timeout, unknown) may pass: slow cadence."""
    return all(r.status is Status.OK or r.status is Status.UNSUPPORTED for r in readings)


def _try(fn: Callable[[], Any], default: Any) -> Any:
    """A best-effort call whose failure only means 'unknown' (but a lost GPU still is lost)."""
    try:
        return fn()
    except GpuLost:
        raise
    except Exception:
        return default


SPEC = register(ProbeSpec(
    name="nvml", order=10,
    keys=("gpu.info", "gpu.lost", "gpu.util_ratio", "gpu.mem_util_ratio", "gpu.mem_used_bytes",
          "gpu.mem_total_bytes", "gpu.power_watts", "gpu.power_limit_watts", "gpu.temp_celsius",
          "gpu.mem_temp_celsius", "gpu.sm_clock_hz", "gpu.sm_clock_max_hz", "gpu.mem_clock_hz",
          "gpu.mem_clock_max_hz", "gpu.throttle_reasons", "gpu.pcie_tx_bytes_per_second",
          "gpu.pcie_rx_bytes_per_second", "gpu.pcie_link_gen", "gpu.pcie_link_width",
          "gpu.nvlink_tx_bytes_per_second", "gpu.nvlink_rx_bytes_per_second",
          "gpu.nvlink_links_active", "gpu.ecc_uncorrected_total", "gpu.ecc_corrected_total",
          "gpu.xid_last", "gpu.xid_total", "gpu.mig_enabled", "gpu.remapped_rows_uncorrectable",
          "gpu.remapped_rows_correctable", "gpu.row_remap_pending", "gpu.row_remap_failure",
          "gpu.mem_bus_width_bits", "gpu.cuda_cores", "gpu.compute_capability",
          "gpu.sm_active_ratio", "gpu.sm_occupancy_ratio", "gpu.tensor_active_ratio",
          "gpu.dram_bw_util_ratio", "gpu.topology", "process.gpu_mem_bytes",
          "process.gpu_sm_ratio", "process.gpu_owner"),
    needs="NVML (nvidia-ml-py and an NVIDIA driver); GPM readings need Hopper or newer",
    build=lambda args, target: [NvmlProbe()],
    flags=BUILTIN_FLAGS["nvml"],   # declared in probes/flags.py: --help imports no probe
    off=lambda args: "GPU readings off (--no-gpu)" if getattr(args, "no_gpu", False) else "",
    demo="infertop.demo.readings:nvml_sample",
))
