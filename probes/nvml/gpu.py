"""Per-GPU state of the NVML probe, and the helpers that turn NVML calls into Readings."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any

from infertop.keys import SPECS
from infertop.model import Labels, Reading, Status, make_labels

from infertop.probes.nvml.calls import GpuLost, NvmlCalls
from infertop.probes.nvml.gpm import GpmSampler

LOST_REASON = "GPU lost (fell off the bus)"
MHZ = 1e6
OK = Status.OK

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


def mk(key: str, value: float | None, labels: Labels, status: Status = OK,
       reason: str = "", text: str | None = None) -> Reading:
    """A Reading with the unit and kind its key is declared with (infertop.keys)."""
    spec = SPECS[key]
    ok = status is OK or status is Status.STALE
    return Reading(key, value if ok else None, spec.unit, labels, status, reason, spec.kind,
                   text)


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


def read_one(calls: NvmlCalls, g: GpuState, key: str, fn: str, *args: Any,
             scale: float = 1.0) -> Reading:
    """One call, one reading; a failure becomes that reading's status and reason."""
    try:
        v = calls(fn, g.handle, *args)
    except GpuLost:
        raise
    except Exception as e:
        st, why = calls.failure(e, fn, g.name)
        return mk(key, None, g.labels, st, why)
    return mk(key, float(v) * scale, g.labels)


def fail_all(calls: NvmlCalls, g: GpuState, keys: tuple[str, ...], e: BaseException,
             fn: str) -> list[Reading]:
    st, why = calls.failure(e, fn, g.name)
    return [mk(k, None, g.labels, st, why) for k in keys]


def xid_readings(g: GpuState) -> list[Reading]:
    if not g.xid:
        return []
    lab = g.labels
    last = (mk("gpu.xid_last", float(g.xid_last), lab) if g.xid_last is not None else
            mk("gpu.xid_last", None, lab, Status.NODATA,
               "no Xid error seen since infertop started"))
    return [mk("gpu.xid_total", float(g.xid_total), lab), last]


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
