"""Slow-cadence NVML reads: limits, ECC, MIG, NVLink links up, per-process use, topology.

These change rarely or cost more (process lists allocate, topology is O(GPUs²) calls), so
the probe reads them every ``slow_every`` ticks and re-sends the last values in between.
What never changes while the GPU is on the bus (max clocks, memory bus width, CUDA cores,
compute capability: ``read_static``; the GPU pairs' topology) is read on the probe's
``static_every`` cadence instead (and topology again whenever a GPU is lost).
"""

from __future__ import annotations

import time
from typing import Any

from infertop.model import Reading, Status, make_labels
from infertop.probes.nvml.calls import GpuLost, NvmlCalls
from infertop.probes.nvml.decode import topology_name
from infertop.probes.nvml.gpu import (
    LOST_REASON,
    MHZ,
    GpuState,
    gmk,
    guarded,
    mk,
    read_one,
)
from infertop.probes.nvml.links import refresh_nvlink


def read_static(calls: NvmlCalls, g: GpuState) -> list[Reading]:
    """Facts of the board itself: the same answer for as long as the GPU is on the bus."""
    nvml = calls.nvml
    return [
        read_one(calls, g, "gpu.sm_clock_max_hz", "nvmlDeviceGetMaxClockInfo",
                 nvml.NVML_CLOCK_SM, scale=MHZ),
        read_one(calls, g, "gpu.mem_clock_max_hz", "nvmlDeviceGetMaxClockInfo",
                 nvml.NVML_CLOCK_MEM, scale=MHZ),
        # static facts for the speed-of-light peaks (infertop/peaks.py)
        read_one(calls, g, "gpu.mem_bus_width_bits", "nvmlDeviceGetMemoryBusWidth"),
        read_one(calls, g, "gpu.cuda_cores", "nvmlDeviceGetNumGpuCores"),
        compute_capability(calls, g),
    ]


def read_slow(calls: NvmlCalls, g: GpuState) -> list[Reading]:
    nvml = calls.nvml
    lab = g.labels
    out = [
        # a limit an admin (nvidia-smi -pl) or the data centre's power capping may move
        read_one(calls, g, "gpu.power_limit_watts", "nvmlDeviceGetEnforcedPowerLimit",
                 scale=1e-3),
        read_one(calls, g, "gpu.ecc_uncorrected_total", "nvmlDeviceGetTotalEccErrors",
                 nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC),
        read_one(calls, g, "gpu.ecc_corrected_total", "nvmlDeviceGetTotalEccErrors",
                 nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, nvml.NVML_VOLATILE_ECC),
        mem_temperature(calls, g),
    ]
    out += remapped_rows(calls, g)
    try:
        mode = calls("nvmlDeviceGetMigMode", g.handle)[0]
        g.mig = mode == getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1)
        out.append(mk("gpu.mig_enabled", 1.0 if g.mig else 0.0, lab))
    except GpuLost:
        raise
    except Exception as e:
        st, why = calls.failure(e, "nvmlDeviceGetMigMode", g.name)
        out.append(mk("gpu.mig_enabled", None, lab, st, why))
    refresh_nvlink(calls, g)
    if g.nvlink_count:
        out.append(mk("gpu.nvlink_links_active", float(len(g.nvlink_active)), lab))
    else:
        out.append(mk("gpu.nvlink_links_active", None, lab, Status.UNSUPPORTED,
                      g.nvlink_reason))
    out += processes(calls, g)
    return out


REMAP_KEYS = ("gpu.remapped_rows_correctable", "gpu.remapped_rows_uncorrectable",
              "gpu.row_remap_pending", "gpu.row_remap_failure")


def remapped_rows(calls: NvmlCalls, g: GpuState) -> list[Reading]:
    """nvmlDeviceGetRemappedRows -> (correctable rows, uncorrectable rows, pending, failure);
    Ampere and newer data-centre GPUs (older ones retire pages instead: NotSupported)."""
    fn = "nvmlDeviceGetRemappedRows"

    def ask() -> list[float]:
        values = [float(v) for v in tuple(calls(fn, g.handle))[:4]]
        if len(values) != 4:
            raise ValueError(f"{fn} returned {len(values)} values, expected 4")
        return values
    return guarded(calls, g, fn, fn, REMAP_KEYS, ask,
                   lambda values: [gmk(g, k, v) for k, v in zip(REMAP_KEYS, values)])


def mem_temperature(calls: NvmlCalls, g: GpuState) -> Reading:
    """HBM temperature: field NVML_FI_DEV_MEMORY_TEMP (82); NotSupported on GDDR boards."""
    fn = "nvmlDeviceGetFieldValues"
    key = "gpu.mem_temp_celsius"
    fid = getattr(calls.nvml, "NVML_FI_DEV_MEMORY_TEMP", 82)

    def use(fv: Any) -> list[Reading]:
        if fv.nvmlReturn != getattr(calls.nvml, "NVML_SUCCESS", 0):
            return [gmk(g, key, None, Status.UNSUPPORTED,
                        f"memory temperature not reported by {g.name} (NVML field 82)")]
        member = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal",
                  6: "usVal"}.get(fv.valueType, "uiVal")
        return [gmk(g, key, float(getattr(fv.value, member)))]
    return guarded(calls, g, key, fn, (key,), lambda: calls(fn, g.handle, [fid])[0], use)[0]


def compute_capability(calls: NvmlCalls, g: GpuState) -> Reading:
    """gpu.compute_capability: value major + minor / 10, text "major.minor"."""
    fn = "nvmlDeviceGetCudaComputeCapability"
    key = "gpu.compute_capability"

    def ask() -> tuple[int, int]:
        major, minor = calls(fn, g.handle)
        return major, minor

    def use(got: tuple[int, int]) -> list[Reading]:
        major, minor = int(got[0]), int(got[1])
        return [gmk(g, key, major + minor / 10, text=f"{major}.{minor}")]
    return guarded(calls, g, fn, fn, (key,), ask, use)[0]


def processes(calls: NvmlCalls, g: GpuState) -> list[Reading]:
    """process.gpu_mem_bytes / process.gpu_sm_ratio per pid.

    PIDs are NVML's, i.e. the host's pid namespace: inside a container they may not match
    the pids psutil sees.
    """
    fn = "nvmlDeviceGetComputeRunningProcesses"
    try:
        try:
            procs = calls(fn, g.handle)
        except Exception as e:
            # pynvml's @throwOnVersionMismatch: the driver lacks the _v3 symbol
            if type(e).__name__ != "NVMLLibraryMismatchError":
                raise
            fn = "nvmlDeviceGetComputeRunningProcesses_v2"
            procs = calls(fn, g.handle)
    except GpuLost:
        raise
    except Exception as e:
        st, why = calls.failure(e, fn, g.name)
        # no pid label: one reading per GPU saying why its process list is missing
        return [mk("process.gpu_mem_bytes", None, g.labels, st, why),
                mk("process.gpu_sm_ratio", None, g.labels, st, why)]
    out: list[Reading] = []
    pids: list[int] = []
    for p in procs:
        pid = int(p.pid)
        pids.append(pid)
        plab = make_labels(gpu=g.index, pid=pid)
        if p.usedGpuMemory is None:
            out.append(mk("process.gpu_mem_bytes", None, plab, Status.UNSUPPORTED,
                          f"per-process memory not reported on {g.name} (MIG or WDDM)"))
        else:
            out.append(mk("process.gpu_mem_bytes", float(p.usedGpuMemory), plab))
    return out + _process_sm(calls, g, pids)


def _process_sm(calls: NvmlCalls, g: GpuState, pids: list[int]) -> list[Reading]:
    """Mean SM share per pid over the driver's samples since the last slow tick."""
    fn = "nvmlDeviceGetProcessUtilization"
    since = g.proc_ts or int(time.time() * 1e6) - 1_000_000   # first time: the last second
    try:
        samples = calls(fn, g.handle, since)
    except GpuLost:
        raise
    except Exception as e:
        if not calls.is_error(e, "NVMLError_NotFound"):
            st, why = calls.failure(e, fn, g.name)
            return [mk("process.gpu_sm_ratio", None, make_labels(gpu=g.index, pid=pid), st, why)
                    for pid in pids]
        samples = []   # NOT_FOUND: no process ran a kernel since `since`: all idle
    acc: dict[int, list[float]] = {}
    for s in samples:
        acc.setdefault(int(s.pid), []).append(float(s.smUtil))
        g.proc_ts = max(g.proc_ts, int(s.timeStamp))
    out = []
    for pid in dict.fromkeys(pids + list(acc)):
        vals = acc.get(pid)
        ratio = sum(vals) / len(vals) / 100.0 if vals else 0.0
        out.append(mk("process.gpu_sm_ratio", ratio, make_labels(gpu=g.index, pid=pid)))
    return out


def topology(calls: NvmlCalls, gpus: list[GpuState]) -> list[Reading]:
    """gpu.topology for every ordered pair of usable GPUs (both directions, same text)."""
    live = [g for g in gpus if not g.dead]
    out: list[Reading] = []
    for i, a in enumerate(live):
        for b in live[i + 1:]:
            status, reason, text = Status.OK, "", None
            try:
                text = _link_type(calls, a, b)
            except GpuLost:
                status, reason = Status.ERROR, LOST_REASON
            except Exception as e:
                status, reason = calls.failure(e, "nvmlDeviceGetTopologyCommonAncestor",
                                               a.name)
            for x, y in ((a, b), (b, a)):
                out.append(mk("gpu.topology", 1.0, make_labels(gpu=x.index, peer=y.index),
                              status, reason, text=text))
    return out


def _link_type(calls: NvmlCalls, a: GpuState, b: GpuState) -> str:
    nvml = calls.nvml
    if a.nvlink_count and b.nvlink_count:
        # the common-ancestor call only knows PCIe; NVLink shows up as P2P over NVLink
        try:
            st = calls("nvmlDeviceGetP2PStatus", a.handle, b.handle,
                       nvml.NVML_P2P_CAPS_INDEX_NVLINK)
            if st == nvml.NVML_P2P_STATUS_OK:
                return "NVLINK"
        except GpuLost:
            raise
        except Exception:
            pass   # no NVLink P2P answer: fall back to the PCIe path
    return topology_name(calls("nvmlDeviceGetTopologyCommonAncestor", a.handle, b.handle))
