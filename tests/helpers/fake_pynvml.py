"""A faithful fake of the ``pynvml`` module (nvidia-ml-py 13.615.71) for tests without a GPU.

Faithful means: the same function names and parameter names as the real module (a test
compares signatures), the real module's constants, ctypes structs and NVMLError classes
(imported from it, so ``except pynvml.NVMLError_NotSupported`` behaves identically), the
same return shapes (ctypes structs, ``nvmlFriendlyObject`` process entries with
``usedGpuMemory=None`` when N/A, field-value arrays with per-field ``nvmlReturn``), the same
error behaviour (Uninitialized before nvmlInit, LibraryNotFound when the library is missing,
NotFound from nvmlDeviceGetProcessUtilization without samples, Timeout from an empty event
set).  Handles, GPM samples and event sets are real ctypes pointer types holding fake
addresses, so code that passes them into ctypes structs works as with the driver.

Functions the fake does not implement raise AttributeError naming themselves (a probe that
starts calling something new must add it here, not silently get the real, driverless one).

    fake = FakeNVML([FakeGPU(), FakeGPU(gpm=False)], clock=ManualClock())
    probe = NvmlProbe(nvml_module=fake.module, clock=fake.clock)
"""

from __future__ import annotations

import ctypes
import inspect
import itertools
import math
import threading
import time
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NoReturn

import pynvml as _real

GiB = 1024 ** 3
MiB = 1024 ** 2

# Pure helpers of the real module that need no library: safe to share.
_SHARED_FUNCTIONS = ("nvmlExceptionClass", "nvmlStructToFriendlyObject",
                     "nvmlFriendlyObjectToStruct", "convertStrBytes", "throwOnVersionMismatch")


def _raise(code: int) -> NoReturn:
    raise _real.NVMLError(code)   # __new__ maps the code to the real subclass


class ManualClock:
    """A clock tests advance by hand: GPM spacing and counter rates without sleeping."""

    def __init__(self, start: float = 1000.0) -> None:
        self.t = start

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def _default_gpm() -> dict[int, float | Callable[[float], float]]:
    """GPM metric id -> percent (or f(t) of the second sample's time): values that move."""
    return {
        _real.NVML_GPM_METRIC_SM_UTIL: lambda t: 60.0 + 20.0 * math.sin(t),
        _real.NVML_GPM_METRIC_SM_OCCUPANCY: lambda t: 30.0 + 10.0 * math.cos(t),
        _real.NVML_GPM_METRIC_ANY_TENSOR_UTIL: lambda t: 40.0 + 15.0 * math.sin(t / 2),
        _real.NVML_GPM_METRIC_DRAM_BW_UTIL: lambda t: 55.0 + 5.0 * math.cos(t / 3),
    }


@dataclass
class FakeGPU:
    """One fake device.  Rates are bytes/s; the fake turns them into counters over its clock."""

    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = ""
    pci_bus_id: str = ""
    mem_total: int = 85520809984           # 81559 MiB, as an H100 80GB HBM3 reports
    mem_used: int = 60 * GiB
    util_gpu: int = 87
    util_mem: int = 45
    power_mw: int = 512_000
    power_limit_mw: int = 700_000
    temp_c: int = 61
    sm_clock_mhz: int = 1980
    sm_clock_max_mhz: int = 1980
    mem_clock_mhz: int = 2619
    mem_clock_max_mhz: int = 2619
    mem_bus_width: int = 5120               # bits (HBM3, 5 stacks)
    cuda_cores: int = 16896                 # 132 SMs x 128
    compute_capability: tuple[int, int] = (9, 0)
    clocks_event_reasons: int = 0
    pcie_gen: int = 5
    pcie_width: int = 16
    pcie_tx_bps: float = 2.0e9
    pcie_rx_bps: float = 1.0e9
    pcie_counters: bool = True              # fields 197/198 answer SUCCESS
    nvlinks: int = 18                       # links the GPU has; 0 = no NVLink at all
    nvlinks_active: int = 18
    nvlink_tx_bps: float = 100.0e9          # all links together
    nvlink_rx_bps: float = 90.0e9
    ecc_corrected: int | None = 0           # None: ECC NotSupported
    ecc_uncorrected: int | None = 0
    mem_temp_c: int | None = 58             # HBM temperature (field 82); None: NotSupported
    # (correctable rows, uncorrectable rows, pending, failure); None: NotSupported
    remapped_rows: tuple[int, int, int, int] | None = (0, 0, 0, 0)
    mig: bool | None = False                # None: not MIG-capable (NotSupported)
    gpm: bool = True                        # nvmlGpmQueryDeviceSupport().isSupportedDevice
    gpm_values: dict[int, Any] = field(default_factory=_default_gpm)
    gpm_pcie: bool = True                   # GPM answers PCIe/NVLink MiB/s metrics
    processes: list[tuple[int, int | None]] = field(
        default_factory=lambda: [(4242, 58 * GiB)])
    process_sm: dict[int, int] = field(default_factory=lambda: {4242: 83})
    event_types: int = 0x8 | 0x2 | 0x1      # Xid, double-bit ECC, single-bit ECC
    unsupported: set[str] = field(default_factory=set)     # function names -> NotSupported
    no_permission: set[str] = field(default_factory=set)   # function names -> NoPermission
    missing: set[str] = field(default_factory=set)         # symbol names -> FunctionNotFound
    lose_after_calls: int | None = None     # after this many calls on the handle: lost
    # runtime state
    index: int = -1
    lost: bool = False
    calls: int = 0


_DEVICE_BASE = 0x7F0000010000
_SAMPLE_BASE = 0x7F0000900000
_EVENTSET_BASE = 0x7F0000F00000


class FakeNVML:
    """The fake library.  ``module`` is what a probe receives in place of ``pynvml``."""

    def __init__(self, gpus: Iterable[FakeGPU] | None = None, *, lib_missing: bool = False,
                 init_error: int | None = None, driver: str = "580.95.05",
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time,
                 topology: dict[tuple[int, int], str] | None = None,
                 event_set_error: int | None = None) -> None:
        self.gpus = list(gpus) if gpus is not None else [FakeGPU(), FakeGPU()]
        for i, g in enumerate(self.gpus):
            g.index = i
            g.uuid = g.uuid or f"GPU-{i:08x}-1c2d-3e4f-5a6b-7c8d9e0f1a2b"
            g.pci_bus_id = g.pci_bus_id or f"00000000:{0x18 + 0x10 * i:02X}:00.0"
        self.lib_missing = lib_missing
        self.init_error = init_error
        self.driver = driver
        self.clock = clock
        self.wall = wall
        self.topology = topology or {}
        self.event_set_error = event_set_error
        self.refcount = 0
        self.calls: dict[str, int] = {}
        self.hung = threading.Event()          # set when a call enters a hang
        self._release = threading.Event()
        self._hangs: set[tuple[int, str]] = set()
        self._lock = threading.Lock()
        self._samples: dict[int, dict[str, Any] | None] = {}
        self._sample_ids = itertools.count(_SAMPLE_BASE, 0x40)
        self._event_sets: dict[int, dict[str, Any]] = {}
        self._event_ids = itertools.count(_EVENTSET_BASE, 0x40)
        self._proc_ts: dict[int, int] = {}
        self.module = self._build_module()

    # ------------------------------------------------------------ test controls
    def lose(self, index: int) -> None:
        """The GPU falls off the bus: every later call on its handle raises GpuIsLost."""
        self.gpus[index].lost = True

    def hang(self, index: int, function: str) -> None:
        """Calls of ``function`` on GPU ``index`` block until ``release()``."""
        self._release.clear()
        self.hung.clear()
        self._hangs.add((index, function))

    def release(self) -> None:
        self._hangs.clear()
        self._release.set()

    def emit_xid(self, index: int, code: int) -> None:
        """Queue an Xid critical error event for every event set registered for the GPU."""
        with self._lock:
            for es in self._event_sets.values():
                if index in es["devices"]:
                    es["queue"].append((index, code))

    def install(self, monkeypatch: Any) -> types.ModuleType:
        """Make ``import pynvml`` return the fake (for code that imports it itself)."""
        import sys
        monkeypatch.setitem(sys.modules, "pynvml", self.module)
        return self.module

    # ------------------------------------------------------------ plumbing
    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def _need_init(self, name: str) -> None:
        self._count(name)
        if self.refcount <= 0:
            # real pynvml: _nvmlGetFunctionPointer with no library loaded -> Uninitialized
            _raise(_real.NVML_ERROR_UNINITIALIZED)

    def _gpu(self, handle: Any, name: str) -> FakeGPU:
        """Resolve a handle and apply this GPU's scripted behaviour for ``name``."""
        self._need_init(name)
        try:
            addr = ctypes.cast(handle, ctypes.c_void_p).value or 0
        except (TypeError, ctypes.ArgumentError):
            _raise(_real.NVML_ERROR_INVALID_ARGUMENT)
        idx, rem = divmod(addr - _DEVICE_BASE, 0x100)
        if rem or not 0 <= idx < len(self.gpus):
            _raise(_real.NVML_ERROR_INVALID_ARGUMENT)
        g = self.gpus[idx]
        g.calls += 1
        if g.lose_after_calls is not None and g.calls > g.lose_after_calls:
            g.lost = True
        if g.lost:
            _raise(_real.NVML_ERROR_GPU_IS_LOST)
        if (idx, name) in self._hangs:
            self.hung.set()
            self._release.wait(60.0)   # a stuck driver call; bounded so a bad test ends
        if name in g.missing:
            _raise(_real.NVML_ERROR_FUNCTION_NOT_FOUND)
        if name in g.no_permission:
            _raise(_real.NVML_ERROR_NO_PERMISSION)
        if name in g.unsupported:
            _raise(_real.NVML_ERROR_NOT_SUPPORTED)
        return g

    @staticmethod
    def _handle(index: int) -> Any:
        return ctypes.cast(_DEVICE_BASE + 0x100 * index, _real.c_nvmlDevice_t)

    def _build_module(self) -> types.ModuleType:
        mod = types.ModuleType("pynvml", "fake pynvml (tests/helpers/fake_pynvml.py)")
        for k, v in vars(_real).items():
            if k.startswith("__"):
                continue
            if inspect.isfunction(v) and k not in _SHARED_FUNCTIONS:
                continue   # library calls: only the fake's own versions below
            setattr(mod, k, v)
        for name in dir(self):
            if name.startswith("nvml"):
                setattr(mod, name, getattr(self, name))

        def __getattr__(name: str) -> Any:
            raise AttributeError(f"fake pynvml does not implement {name} "
                                 "(add it to tests/helpers/fake_pynvml.py)")
        # the module's PEP 562 __getattr__ lives in its dict (ModuleType declares it a method)
        vars(mod)["__getattr__"] = __getattr__
        mod.FAKE = self  # type: ignore[attr-defined]
        return mod

    # ------------------------------------------------------------ init / system
    def nvmlInitWithFlags(self, flags):
        self._count("nvmlInitWithFlags")
        if self.lib_missing:
            _raise(_real.NVML_ERROR_LIBRARY_NOT_FOUND)
        if self.init_error is not None:
            _raise(self.init_error)
        self.refcount += 1

    def nvmlInit(self):
        self.nvmlInitWithFlags(0)

    def nvmlShutdown(self):
        self._need_init("nvmlShutdown")
        self.refcount -= 1

    def nvmlSystemGetDriverVersion(self):
        self._need_init("nvmlSystemGetDriverVersion")
        return self.driver

    def nvmlDeviceGetCount(self):
        self._need_init("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        self._need_init("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.gpus):
            _raise(_real.NVML_ERROR_INVALID_ARGUMENT)
        if self.gpus[index].lost:
            _raise(_real.NVML_ERROR_GPU_IS_LOST)
        return self._handle(index)

    # ------------------------------------------------------------ identity
    def nvmlDeviceGetName(self, handle):
        return self._gpu(handle, "nvmlDeviceGetName").name

    def nvmlDeviceGetUUID(self, handle):
        return self._gpu(handle, "nvmlDeviceGetUUID").uuid

    def nvmlDeviceGetIndex(self, handle):
        return self._gpu(handle, "nvmlDeviceGetIndex").index

    def nvmlDeviceGetPciInfo(self, handle):
        g = self._gpu(handle, "nvmlDeviceGetPciInfo")
        info = _real.nvmlPciInfo_t()
        info.busId = g.pci_bus_id.encode()
        info.busIdLegacy = g.pci_bus_id[4:].encode()
        info.domain, info.bus, info.device = 0, 0x18 + 0x10 * g.index, 0
        info.pciDeviceId = 0x233010DE   # H100 SXM5
        return info   # real: a ctypes struct; .busId reads back as bytes

    # ------------------------------------------------------------ basic counters
    def nvmlDeviceGetUtilizationRates(self, handle):
        g = self._gpu(handle, "nvmlDeviceGetUtilizationRates")
        if g.mig:
            _raise(_real.NVML_ERROR_NOT_SUPPORTED)   # whole-GPU util is N/A with MIG on
        return _real.c_nvmlUtilization_t(gpu=g.util_gpu, memory=g.util_mem)

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        g = self._gpu(handle, "nvmlDeviceGetMemoryInfo")
        if version:
            if "nvmlDeviceGetMemoryInfo_v2" in g.missing:
                _raise(_real.NVML_ERROR_FUNCTION_NOT_FOUND)
            if version != _real.nvmlMemory_v2:
                _raise(_real.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
            reserved = 512 * MiB
            m = _real.c_nvmlMemory_v2_t()
            m.version, m.total, m.reserved = version, g.mem_total, reserved
            m.used = g.mem_used
            m.free = g.mem_total - reserved - g.mem_used
            return m
        m = _real.c_nvmlMemory_t()
        m.total, m.used = g.mem_total, g.mem_used + 512 * MiB   # v1 'used' counts reserved
        m.free = g.mem_total - m.used
        return m

    def nvmlDeviceGetPowerUsage(self, handle):
        return self._gpu(handle, "nvmlDeviceGetPowerUsage").power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return self._gpu(handle, "nvmlDeviceGetEnforcedPowerLimit").power_limit_mw

    def nvmlDeviceGetTemperature(self, handle, sensor):
        g = self._gpu(handle, "nvmlDeviceGetTemperature")
        if sensor != _real.NVML_TEMPERATURE_GPU:
            _raise(_real.NVML_ERROR_INVALID_ARGUMENT)
        return g.temp_c

    def nvmlDeviceGetClockInfo(self, handle, type):
        g = self._gpu(handle, "nvmlDeviceGetClockInfo")
        return {_real.NVML_CLOCK_GRAPHICS: g.sm_clock_mhz, _real.NVML_CLOCK_SM: g.sm_clock_mhz,
                _real.NVML_CLOCK_MEM: g.mem_clock_mhz, _real.NVML_CLOCK_VIDEO: 1755}[type]

    def nvmlDeviceGetMaxClockInfo(self, handle, type):
        g = self._gpu(handle, "nvmlDeviceGetMaxClockInfo")
        return {_real.NVML_CLOCK_GRAPHICS: g.sm_clock_max_mhz,
                _real.NVML_CLOCK_SM: g.sm_clock_max_mhz,
                _real.NVML_CLOCK_MEM: g.mem_clock_max_mhz, _real.NVML_CLOCK_VIDEO: 1980}[type]

    def nvmlDeviceGetMemoryBusWidth(self, device):
        return self._gpu(device, "nvmlDeviceGetMemoryBusWidth").mem_bus_width

    def nvmlDeviceGetNumGpuCores(self, device):
        return self._gpu(device, "nvmlDeviceGetNumGpuCores").cuda_cores

    def nvmlDeviceGetCudaComputeCapability(self, handle):
        return tuple(self._gpu(handle, "nvmlDeviceGetCudaComputeCapability").compute_capability)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return self._gpu(handle, "nvmlDeviceGetCurrentClocksEventReasons").clocks_event_reasons

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        return self._gpu(handle,
                         "nvmlDeviceGetCurrentClocksThrottleReasons").clocks_event_reasons

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle):
        return self._gpu(handle, "nvmlDeviceGetCurrPcieLinkGeneration").pcie_gen

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle):
        return self._gpu(handle, "nvmlDeviceGetCurrPcieLinkWidth").pcie_width

    def nvmlDeviceGetPcieThroughput(self, device, counter):
        g = self._gpu(device, "nvmlDeviceGetPcieThroughput")
        # real: KiB/s measured over a 20 ms window (the call blocks that long; the fake doesn't)
        if counter == _real.NVML_PCIE_UTIL_TX_BYTES:
            return int(g.pcie_tx_bps / 1024)
        if counter == _real.NVML_PCIE_UTIL_RX_BYTES:
            return int(g.pcie_rx_bps / 1024)
        _raise(_real.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetTotalEccErrors(self, handle, errorType, counterType):
        g = self._gpu(handle, "nvmlDeviceGetTotalEccErrors")
        v = g.ecc_uncorrected if errorType == _real.NVML_MEMORY_ERROR_TYPE_UNCORRECTED \
            else g.ecc_corrected
        if v is None:
            _raise(_real.NVML_ERROR_NOT_SUPPORTED)
        return v

    def nvmlDeviceGetRemappedRows(self, device):
        g = self._gpu(device, "nvmlDeviceGetRemappedRows")
        if g.remapped_rows is None:
            _raise(_real.NVML_ERROR_NOT_SUPPORTED)
        return tuple(g.remapped_rows)

    def nvmlDeviceGetMigMode(self, device):
        g = self._gpu(device, "nvmlDeviceGetMigMode")
        if g.mig is None:
            _raise(_real.NVML_ERROR_NOT_SUPPORTED)
        mode = _real.NVML_DEVICE_MIG_ENABLE if g.mig else _real.NVML_DEVICE_MIG_DISABLE
        return [mode, mode]

    # ------------------------------------------------------------ NVLink and fields
    def nvmlDeviceGetNvLinkState(self, device, link):
        g = self._gpu(device, "nvmlDeviceGetNvLinkState")
        if g.nvlinks == 0:
            _raise(_real.NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= link < g.nvlinks:
            _raise(_real.NVML_ERROR_INVALID_ARGUMENT)
        return _real.NVML_FEATURE_ENABLED if link < g.nvlinks_active else \
            _real.NVML_FEATURE_DISABLED

    def _field(self, g: FakeGPU, fid: int, scope: int, now: float) -> tuple[int, int, Any]:
        """(nvmlReturn, valueType, value) for one field, counters integrated over the clock."""
        R = _real
        ull = R.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
        if fid == R.NVML_FI_DEV_MEMORY_TEMP:
            return (R.NVML_SUCCESS, R.NVML_VALUE_TYPE_UNSIGNED_INT, g.mem_temp_c) \
                if g.mem_temp_c is not None else (R.NVML_ERROR_NOT_SUPPORTED, 0, 0)
        if fid == R.NVML_FI_DEV_NVLINK_LINK_COUNT:
            return (R.NVML_SUCCESS, R.NVML_VALUE_TYPE_UNSIGNED_INT, g.nvlinks) if g.nvlinks \
                else (R.NVML_ERROR_NOT_SUPPORTED, 0, 0)
        if fid in (R.NVML_FI_DEV_PCIE_COUNT_TX_BYTES, R.NVML_FI_DEV_PCIE_COUNT_RX_BYTES):
            if not g.pcie_counters:
                return R.NVML_ERROR_NOT_SUPPORTED, 0, 0
            rate = g.pcie_tx_bps if fid == R.NVML_FI_DEV_PCIE_COUNT_TX_BYTES else g.pcie_rx_bps
            return R.NVML_SUCCESS, ull, int(rate * now)
        if fid in (R.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, R.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX):
            if g.nvlinks == 0 or scope >= g.nvlinks:
                return R.NVML_ERROR_NOT_SUPPORTED, 0, 0
            if scope >= g.nvlinks_active:
                return R.NVML_SUCCESS, ull, 0
            total = g.nvlink_tx_bps if fid == R.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX \
                else g.nvlink_rx_bps
            return R.NVML_SUCCESS, ull, int(total / g.nvlinks_active * now / 1024)   # KiB
        return R.NVML_ERROR_NOT_SUPPORTED, 0, 0

    def nvmlDeviceGetFieldValues(self, handle, fieldIds):
        g = self._gpu(handle, "nvmlDeviceGetFieldValues")
        values = (_real.c_nvmlFieldValue_t * len(fieldIds))()
        now = self.clock()
        members = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal",
                   6: "usVal"}
        for i, fid in enumerate(fieldIds):
            try:
                (values[i].fieldId, values[i].scopeId) = fid
            except TypeError:
                values[i].fieldId = fid
            ret, vtype, val = self._field(g, values[i].fieldId, values[i].scopeId, now)
            values[i].nvmlReturn = ret
            values[i].timestamp = int(now * 1e6)
            values[i].latencyUsec = 3
            values[i].valueType = vtype
            if ret == _real.NVML_SUCCESS:
                setattr(values[i].value, members[vtype], val)
        return values

    # ------------------------------------------------------------ processes
    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        g = self._gpu(handle, "nvmlDeviceGetComputeRunningProcesses")
        if "nvmlDeviceGetComputeRunningProcesses_v3" in g.missing:
            # real: @throwOnVersionMismatch turns FunctionNotFound into this
            raise _real.NVMLLibraryMismatchError(
                "Unversioned function called and the pyNVML version does not match the "
                "NVML lib version.")
        return self._procs(g)

    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle):
        return self._procs(self._gpu(handle, "nvmlDeviceGetComputeRunningProcesses_v2"))

    @staticmethod
    def _procs(g: FakeGPU) -> list[Any]:
        out = []
        for pid, mem in g.processes:
            s = _real.c_nvmlProcessInfo_v2_t()
            s.pid = pid
            s.usedGpuMemory = _real.NVML_VALUE_NOT_AVAILABLE_ulonglong.value \
                if (mem is None or g.mig) else mem
            obj = _real.nvmlStructToFriendlyObject(s)
            if obj.usedGpuMemory == _real.NVML_VALUE_NOT_AVAILABLE_ulonglong.value:
                obj.usedGpuMemory = None   # exactly as the real wrapper does
            out.append(obj)
        return out

    def nvmlDeviceGetProcessUtilization(self, handle, timeStamp):
        g = self._gpu(handle, "nvmlDeviceGetProcessUtilization")
        # one sample per busy process, stamped now (µs since epoch, strictly increasing)
        ts = max(self._proc_ts.get(g.index, 0) + 1, int(self.wall() * 1e6))
        self._proc_ts[g.index] = ts
        samples = []
        for pid, sm in g.process_sm.items():
            if ts > timeStamp:
                s = _real.c_nvmlProcessUtilizationSample_t()
                s.pid, s.timeStamp, s.smUtil, s.memUtil = pid, ts, sm, sm // 2
                samples.append(s)
        if not samples:
            _raise(_real.NVML_ERROR_NOT_FOUND)   # real: first call didn't say INSUFFICIENT_SIZE
        return samples

    # ------------------------------------------------------------ topology
    def _pair(self, a: FakeGPU, b: FakeGPU) -> str:
        key = (min(a.index, b.index), max(a.index, b.index))
        if key in self.topology:
            return self.topology[key]
        return "NVLINK" if (a.nvlinks_active and b.nvlinks_active) else "SYS"

    def nvmlDeviceGetP2PStatus(self, device1, device2, p2pIndex):
        a = self._gpu(device1, "nvmlDeviceGetP2PStatus")
        b = self._gpu(device2, "nvmlDeviceGetP2PStatus")
        if p2pIndex == _real.NVML_P2P_CAPS_INDEX_NVLINK:
            return _real.NVML_P2P_STATUS_OK if self._pair(a, b) == "NVLINK" \
                else _real.NVML_P2P_STATUS_NOT_SUPPORTED
        return _real.NVML_P2P_STATUS_OK

    def nvmlDeviceGetTopologyCommonAncestor(self, device1, device2):
        a = self._gpu(device1, "nvmlDeviceGetTopologyCommonAncestor")
        b = self._gpu(device2, "nvmlDeviceGetTopologyCommonAncestor")
        kind = self._pair(a, b)
        return {"PIX": _real.NVML_TOPOLOGY_SINGLE, "PXB": _real.NVML_TOPOLOGY_MULTIPLE,
                "PHB": _real.NVML_TOPOLOGY_HOSTBRIDGE, "NODE": _real.NVML_TOPOLOGY_NODE,
                "SYS": _real.NVML_TOPOLOGY_SYSTEM,
                "NVLINK": _real.NVML_TOPOLOGY_SYSTEM}[kind]   # NVSwitch boxes: PCIe path SYS

    # ------------------------------------------------------------ GPM
    def nvmlGpmQueryDeviceSupport(self, device):
        g = self._gpu(device, "nvmlGpmQueryDeviceSupport")
        s = _real.c_nvmlGpmSupport_t()
        s.version = _real.NVML_GPM_SUPPORT_VERSION
        s.isSupportedDevice = 1 if g.gpm else 0
        return s

    def nvmlGpmSampleAlloc(self):
        self._need_init("nvmlGpmSampleAlloc")
        addr = next(self._sample_ids)
        self._samples[addr] = None   # allocated, not yet filled
        return ctypes.cast(addr, _real.c_nvmlGpmSample_t)

    def _sample_addr(self, gpmSample: Any) -> int:
        try:
            addr = ctypes.cast(gpmSample, ctypes.c_void_p).value or 0
        except (TypeError, ctypes.ArgumentError):
            _raise(_real.NVML_ERROR_INVALID_ARGUMENT)
        if addr not in self._samples:
            _raise(_real.NVML_ERROR_INVALID_ARGUMENT)   # freed or never allocated
        return addr

    def nvmlGpmSampleFree(self, gpmSample):
        self._need_init("nvmlGpmSampleFree")
        del self._samples[self._sample_addr(gpmSample)]

    def nvmlGpmSampleGet(self, device, gpmSample):
        g = self._gpu(device, "nvmlGpmSampleGet")
        if not g.gpm:
            _raise(_real.NVML_ERROR_NOT_SUPPORTED)
        self._samples[self._sample_addr(gpmSample)] = {"gpu": g.index, "t": self.clock()}
        return gpmSample

    def nvmlGpmMetricsGet(self, metricsGet):
        self._need_init("nvmlGpmMetricsGet")
        if metricsGet.version != _real.NVML_GPM_METRICS_GET_VERSION:
            _raise(_real.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        s1 = self._samples.get(self._sample_addr(metricsGet.sample1))
        s2 = self._samples.get(self._sample_addr(metricsGet.sample2))
        if s1 is None or s2 is None or s1["gpu"] != s2["gpu"] or s2["t"] <= s1["t"]:
            _raise(_real.NVML_ERROR_INVALID_ARGUMENT)
        g = self.gpus[s1["gpu"]]
        t = s2["t"]
        rates = {_real.NVML_GPM_METRIC_PCIE_TX_PER_SEC: g.pcie_tx_bps / MiB,
                 _real.NVML_GPM_METRIC_PCIE_RX_PER_SEC: g.pcie_rx_bps / MiB,
                 _real.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC:
                     g.nvlink_tx_bps / MiB if g.nvlinks_active else 0.0,
                 _real.NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC:
                     g.nvlink_rx_bps / MiB if g.nvlinks_active else 0.0}
        for i in range(metricsGet.numMetrics):
            m = metricsGet.metrics[i]
            v = g.gpm_values.get(m.metricId)
            if v is None and g.gpm_pcie:
                v = rates.get(m.metricId)
            if v is None:
                m.nvmlReturn, m.value = _real.NVML_ERROR_NOT_SUPPORTED, 0.0
            else:
                m.nvmlReturn, m.value = _real.NVML_SUCCESS, float(v(t) if callable(v) else v)
        return metricsGet

    # ------------------------------------------------------------ events (Xid)
    def nvmlEventSetCreate(self):
        self._need_init("nvmlEventSetCreate")
        if self.event_set_error is not None:
            _raise(self.event_set_error)
        addr = next(self._event_ids)
        self._event_sets[addr] = {"devices": set(), "queue": []}
        return ctypes.cast(addr, _real.c_nvmlEventSet_t)

    def _event_set(self, eventSet: Any) -> dict[str, Any]:
        addr = ctypes.cast(eventSet, ctypes.c_void_p).value or 0
        es = self._event_sets.get(addr)
        if es is None:
            _raise(_real.NVML_ERROR_INVALID_ARGUMENT)
        return es

    def nvmlDeviceGetSupportedEventTypes(self, handle):
        return self._gpu(handle, "nvmlDeviceGetSupportedEventTypes").event_types

    def nvmlDeviceRegisterEvents(self, handle, eventTypes, eventSet):
        g = self._gpu(handle, "nvmlDeviceRegisterEvents")
        if eventTypes & ~g.event_types:
            _raise(_real.NVML_ERROR_NOT_SUPPORTED)
        self._event_set(eventSet)["devices"].add(g.index)

    def nvmlEventSetWait_v2(self, eventSet, timeoutms):
        self._need_init("nvmlEventSetWait_v2")
        es = self._event_set(eventSet)
        with self._lock:
            item = es["queue"].pop(0) if es["queue"] else None
        if item is None:
            _raise(_real.NVML_ERROR_TIMEOUT)   # nothing within timeoutms (the fake never waits)
        index, code = item
        data = _real.c_nvmlEventData_t()
        data.device = self._handle(index)
        data.eventType = _real.nvmlEventTypeXidCriticalError
        data.eventData = code
        return data

    def nvmlEventSetWait(self, eventSet, timeoutms):
        return self.nvmlEventSetWait_v2(eventSet, timeoutms)

    def nvmlEventSetFree(self, eventSet):
        self._need_init("nvmlEventSetFree")
        addr = ctypes.cast(eventSet, ctypes.c_void_p).value or 0
        if self._event_sets.pop(addr, None) is None:
            _raise(_real.NVML_ERROR_INVALID_ARGUMENT)


def h100_pair(clock: Callable[[], float] | None = None, **kw: Any) -> FakeNVML:
    """The common case: two NVLinked H100s with GPM, one vLLM worker on each."""
    gpus = [FakeGPU(processes=[(4242 + i, 58 * GiB)], process_sm={4242 + i: 80 + i})
            for i in range(2)]
    return FakeNVML(gpus, clock=clock or ManualClock(), **kw)
