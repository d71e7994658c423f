"""Per-GPU state of the NVML probe, and the helpers that turn NVML calls into Readings."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from infertop.model import Labels, Reading, Status, make_labels
from infertop.probes.nvml.calls import GpuLost, NvmlCalls
from infertop.probes.nvml.gpm import GpmSampler

LOST_REASON = "GPU lost (fell off the bus)"
MHZ = 1e6
T = TypeVar("T")
OK = Status.OK
# A call a GPU refused with NotSupported is asked again after this many ticks (30 s at the
# screen's 1 Hz: a MIG switch or a driver setting can make it answer); one the driver
# library lacks (FunctionNotFound) is never asked again while we run.  In between its
# readings are re-sent as they were.  GpuIsLost and every other error are never
# remembered: the next tick asks again, and a GPU that fell off the bus is seen the tick
# it happens (util and memory, asked every tick, are never remembered either).
NOT_SUPPORTED_RECHECK = 30

# Every per-GPU key, so a lost GPU can mark each one ERROR (the screen shows why, not blanks).
GPU_KEYS: tuple[str, ...] = (
    "gpu.util_ratio", "gpu.mem_util_ratio", "gpu.mem_used_bytes", "gpu.mem_total_bytes",
    "gpu.power_watts", "gpu.power_limit_watts", "gpu.temp_celsius", "gpu.sm_clock_hz",
    "gpu.sm_clock_max_hz", "gpu.mem_clock_hz", "gpu.mem_clock_max_hz", "gpu.throttle_reasons",
    "gpu.pcie_tx_bytes_per_second", "gpu.pcie_rx_bytes_per_second", "gpu.pcie_link_gen",
    "gpu.pcie_link_width", "gpu.nvlink_tx_bytes_per_second", "gpu.nvlink_rx_bytes_per_second",
    "gpu.nvlink_links_active", "gpu.ecc_uncorrected_total", "gpu.ecc_corrected_total",
    "gpu.mig_enabled", "gpu.sm_active_ratio", "gpu.sm_occupancy_ratio",
    "gpu.tensor_active_ratio", "gpu.dram_bw_util_ratio",
    "gpu.mem_bus_width_bits", "gpu.cuda_cores", "gpu.compute_capability",
    "gpu.mem_temp_celsius", "gpu.remapped_rows_uncorrectable", "gpu.remapped_rows_correctable",
    "gpu.row_remap_pending", "gpu.row_remap_failure",
)
_VALUE_MEMBER = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal",
                 6: "usVal"}  # nvmlValueType_t -> c_nvmlValue_t union member


mk = Reading.of   # a Reading with the unit and kind its key is declared with


_FROM_VALUE = object()   # gmk's cache key part for a text computed from the value


def gmk(g: GpuState, key: str, value: float | None, status: Status = OK, reason: str = "",
        text: str | None | Callable[[], str] = None) -> Reading:
    """``mk`` with this GPU's labels, giving back the last tick's Reading when nothing in it
    changed (a steady GPU's temperature, clocks, memory total, a refusal's reason): a
    frozen Reading is shared, never changed, and building one is most of a cheap call's
    cost.  ``text`` may be a function of the value (e.g. a throttle mask's decoding):
    called only when the value changed."""
    what = (value, status, reason, _FROM_VALUE if callable(text) else text)
    hit = g.last.get(key)
    if hit is not None and hit[0] == what:
        return hit[1]
    r = mk(key, value, g.labels, status, reason,
           text() if callable(text) else text)
    g.last[key] = (what, r)
    return r


def text_of(v: Any) -> str:
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)


def handle_addr(handle: Any) -> int:
    """Address of an NVML device handle (c_nvmlDevice_t), to match Xid events to GPUs."""
    try:
        return ctypes.cast(handle, ctypes.c_void_p).value or 0
    except (TypeError, ctypes.ArgumentError):
        return id(handle)


def field_value(fv: Any) -> float:
    """The number in a c_nvmlFieldValue_t, read through the union member its type names."""
    return float(getattr(fv.value, _VALUE_MEMBER.get(int(fv.valueType), "ullVal")))


@dataclass(eq=False)
class GpuState:
    index: int
    labels: Labels
    handle: Any = None
    name: str = "unknown GPU"
    uuid: str = ""
    pci_bus_id: str = ""
    dead: str = ""                  # non-empty: unusable; every reading ERROR with this reason
    lost: bool = False
    gpm: GpmSampler | None = None
    gpm_status: Status = Status.UNSUPPORTED
    gpm_reason: str = ""
    pcie_src: str = "fields"        # gpm | fields | throughput | none
    pcie_reason: str = ""
    pcie_cache: list[Reading] = field(default_factory=list)
    nvlink_count: int = 0           # links the GPU has (0: no NVLink)
    nvlink_active: list[int] = field(default_factory=list)
    nvlink_src: str = "none"        # gpm | fields | none
    nvlink_reason: str = ""
    counters: dict[tuple[int, int], tuple[float, float]] = field(default_factory=dict)
    slow: list[Reading] = field(default_factory=list)   # last slow-tick readings, re-sent
    mig: bool | None = None
    mem_v2: bool = True
    throttle_fn: str = "nvmlDeviceGetCurrentClocksEventReasons"
    xid: bool = False
    xid_total: int = 0
    xid_last: int | None = None
    proc_ts: int = 0                # µs timestamp of the newest per-process sample seen
    static: list[Reading] = field(default_factory=list)  # never-changing facts, re-sent
    tick: int = 0                   # the probe's tick number (for ``refused`` expiry)
    # what -> (the readings a refused call gave, the tick to ask again; None: never)
    refused: dict[str, tuple[list[Reading], int | None]] = field(default_factory=dict)
    info: list[Reading] = field(default_factory=list)   # gpu.info and gpu.lost=0, built once
    last: dict[str, tuple[tuple, Reading]] = field(default_factory=dict)   # gmk's memory


def refused(g: GpuState, what: str) -> list[Reading] | None:
    """The readings a remembered refusal of ``what`` gave, or None: ask the GPU."""
    hit = g.refused.get(what)
    if hit is None:
        return None
    if hit[1] is not None and g.tick >= hit[1]:
        del g.refused[what]   # time to ask again
        return None
    return hit[0]


def remember(calls: NvmlCalls, g: GpuState, what: str, exc: BaseException,
             readings: list[Reading]) -> list[Reading]:
    """Keep ``readings`` (a failed call's) for ``what`` if the failure will last:
    missing function for good, NotSupported for NOT_SUPPORTED_RECHECK ticks."""
    if calls.is_missing(exc):
        g.refused[what] = (readings, None)
    elif calls.is_error(exc, "NVMLError_NotSupported"):
        g.refused[what] = (readings, g.tick + NOT_SUPPORTED_RECHECK)
    return readings


def guarded(calls: NvmlCalls, g: GpuState, what: str, fn: str, keys: tuple[str, ...],
            ask: Callable[[], T], use: Callable[[T], list[Reading]]) -> list[Reading]:
    """``use(ask())``: ``ask`` makes NVML call ``fn``; when it fails (anything but
    GpuLost) each of ``keys`` gets a reading with the failure's status and reason, kept
    under ``what`` while the failure lasts (``remember``), and given back without asking
    until then (``refused``)."""
    known = refused(g, what)
    if known is not None:
        return known
    try:
        got = ask()
    except GpuLost:
        raise
    except Exception as e:
        st, why = calls.failure(e, fn, g.name)
        return remember(calls, g, what, e, [gmk(g, k, None, st, why) for k in keys])
    return use(got)


def read_one(calls: NvmlCalls, g: GpuState, key: str, fn: str, *args: Any,
             scale: float = 1.0) -> Reading:
    """One call, one reading; a failure becomes that reading's status and reason (a
    lasting one is remembered per GPU: ``refused``)."""
    return guarded(calls, g, key, fn, (key,), lambda: calls(fn, g.handle, *args),
                   lambda v: [gmk(g, key, float(v) * scale)])[0]


def fail_all(calls: NvmlCalls, g: GpuState, keys: tuple[str, ...], e: BaseException,
             fn: str) -> list[Reading]:
    st, why = calls.failure(e, fn, g.name)
    return [gmk(g, k, None, st, why) for k in keys]


def xid_readings(g: GpuState) -> list[Reading]:
    if not g.xid:
        return []
    last = (gmk(g, "gpu.xid_last", float(g.xid_last)) if g.xid_last is not None else
            gmk(g, "gpu.xid_last", None, Status.NODATA,
                "no Xid error seen since infertop started"))
    return [gmk(g, "gpu.xid_total", float(g.xid_total)), last]


def info_labels(g: GpuState) -> Labels:
    return make_labels(gpu=g.index, uuid=g.uuid, pci_bus_id=g.pci_bus_id)


def dead_readings(g: GpuState) -> list[Reading]:
    """A lost/unusable GPU: its name stays, every value is an ERROR saying why."""
    lab, why = g.labels, g.dead
    out = [mk("gpu.info", None, info_labels(g), Status.ERROR, why, text=g.name),
           mk("gpu.lost", 1.0 if g.lost else 0.0, lab)]
    out.extend(mk(k, None, lab, Status.ERROR, why) for k in GPU_KEYS)
    out.extend(xid_readings(g))   # Xid 79 usually explains the loss: keep showing it
    return out
