"""PCIe and NVLink: which links a GPU has, and byte rates from the best source it offers.

Sources, best first (per GPU, decided as calls answer, never re-tried once refused):
  gpm         GPM's PCIE_TX/RX_PER_SEC and NVLINK_TOTAL_TX/RX_PER_SEC (MiB/s), free with GPM
  fields      byte counters via one nvmlDeviceGetFieldValues per tick (PCIe 197/198, NVLink
              data throughput 138/139 per active link, KiB), differenced here using NVML's
              per-field µs timestamps
  throughput  nvmlDeviceGetPcieThroughput (PCIe only; KiB/s over a 20 ms window, and the call
              blocks those 20 ms): on slow ticks only, the value re-sent in between
"""

from __future__ import annotations

from typing import Any

from infertop.model import Reading, Status
from infertop.probes.nvml.calls import GpuLost, NvmlCalls
from infertop.probes.nvml.gpu import GpuState, field_value, gmk, read_one

PCIE_KEYS = ("gpu.pcie_tx_bytes_per_second", "gpu.pcie_rx_bytes_per_second")
NVLINK_KEYS = ("gpu.nvlink_tx_bytes_per_second", "gpu.nvlink_rx_bytes_per_second")
GPM_WAIT = "GPM needs two samples"


def refresh_nvlink(calls: NvmlCalls, g: GpuState) -> None:
    """How many NVLink links the GPU has (asked once) and which are up (each call)."""
    nvml = calls.nvml
    if g.nvlink_count == 0 and not g.nvlink_reason:
        try:
            fv = calls("nvmlDeviceGetFieldValues", g.handle,
                       [nvml.NVML_FI_DEV_NVLINK_LINK_COUNT])[0]
            if int(fv.nvmlReturn) == nvml.NVML_SUCCESS:
                g.nvlink_count = int(field_value(fv))
        except GpuLost:
            raise
        except Exception:
            pass   # no answer: treated as no NVLink, said so in the readings
        if g.nvlink_count == 0:
            g.nvlink_reason, g.nvlink_src = f"no NVLink on {g.name}", "none"
            return
        g.nvlink_src = "gpm" if g.gpm is not None else "fields"
    if g.nvlink_count == 0:
        return
    active = []
    for link in range(g.nvlink_count):
        try:
            if calls("nvmlDeviceGetNvLinkState", g.handle, link):
                active.append(link)
        except GpuLost:
            raise
        except Exception:
            continue   # one link's state unreadable: count it as not up
    g.nvlink_active = active


def link_rates(calls: NvmlCalls, g: GpuState, slow: bool,
               gpm_failure: tuple[Status, str] | None, now_us: float) -> list[Reading]:
    """The four rate readings of this tick.  ``gpm_failure``: this tick's GPM error, if any."""
    fields = _read_fields(calls, g, now_us)
    return _pcie(calls, g, slow, fields, gpm_failure) + _nvlink(g, fields, gpm_failure)


def _read_fields(calls: NvmlCalls, g: GpuState, now_us: float) -> dict[str, Any]:
    """{"pcie"|"nvlink": (tx_rate, rx_rate) or (Status, reason)} from one field-values call."""
    nvml = calls.nvml
    want_pcie = g.pcie_src == "fields"
    want_nvl = g.nvlink_src == "fields" and bool(g.nvlink_active)
    if not (want_pcie or want_nvl):
        return {}
    ids: list[Any] = []
    if want_pcie:
        ids += [nvml.NVML_FI_DEV_PCIE_COUNT_TX_BYTES, nvml.NVML_FI_DEV_PCIE_COUNT_RX_BYTES]
    if want_nvl:
        for link in g.nvlink_active:
            ids += [(nvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, link),
                    (nvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, link)]
    res: dict[str, Any] = {}
    try:
        values = calls("nvmlDeviceGetFieldValues", g.handle, ids)
    except GpuLost:
        raise
    except Exception as e:   # whole-call failure: both groups share it
        failed = calls.failure(e, "nvmlDeviceGetFieldValues", g.name)
        if want_pcie:
            res["pcie"] = failed
        if want_nvl:
            res["nvlink"] = failed
        return res
    ok = nvml.NVML_SUCCESS
    pos = 0
    if want_pcie:
        tx, rx = values[0], values[1]
        pos = 2
        bad = next((fv for fv in (tx, rx) if int(fv.nvmlReturn) != ok), None)
        res["pcie"] = _field_failure(calls, bad, g) if bad is not None else (
            _rate(g, (197, 0), field_value(tx), int(tx.timestamp), now_us),
            _rate(g, (198, 0), field_value(rx), int(rx.timestamp), now_us))
    if want_nvl:
        sums, ts, bad = [0.0, 0.0], 0, None
        for j in range(pos, len(ids)):
            fv = values[j]
            if int(fv.nvmlReturn) != ok:
                bad = fv
                break
            sums[(j - pos) % 2] += field_value(fv) * 1024.0   # KiB counters -> bytes
            ts = max(ts, int(fv.timestamp))
        res["nvlink"] = _field_failure(calls, bad, g) if bad is not None else (
            _rate(g, (138, -1), sums[0], ts, now_us), _rate(g, (139, -1), sums[1], ts, now_us))
    return res


def _field_failure(calls: NvmlCalls, fv: Any, g: GpuState) -> tuple[Status, str]:
    """A per-field nvmlReturn, worded like the exception NVML would have raised."""
    try:
        exc: Exception = calls.nvml.NVMLError(int(fv.nvmlReturn))
    except Exception:
        exc = RuntimeError(f"NVML return {int(fv.nvmlReturn)}")
    return calls.failure(exc, f"field {int(fv.fieldId)}", g.name)


def _rate(g: GpuState, key: tuple[int, int], value: float, ts_us: int,
          now_us: float) -> float | None:
    t = float(ts_us) if ts_us > 0 else now_us   # a field without a timestamp: our clock
    prev = g.counters.get(key)
    g.counters[key] = (value, t)
    if prev is None:
        return None
    dv, dt = value - prev[0], (t - prev[1]) / 1e6
    if dt <= 0 or dv < 0:
        return None   # the same sample again, or the counter wrapped/reset
    return dv / dt


def _as_readings(g: GpuState, keys: tuple[str, ...], got: Any) -> list[Reading]:
    if got and isinstance(got[0], Status):
        return [gmk(g, k, None, got[0], got[1]) for k in keys]
    return [gmk(g, k, v) if v is not None else
            gmk(g, k, None, Status.NODATA, "rate needs two samples")
            for k, v in zip(keys, got)]


def _from_gpm(g: GpuState, keys: tuple[str, ...],
              gpm_failure: tuple[Status, str] | None) -> list[Reading] | None:
    """Rates from GPM; None when GPM lacks them (the caller switches source)."""
    assert g.gpm is not None
    if gpm_failure is not None:
        return [gmk(g, k, None, *gpm_failure) for k in keys]
    if not g.gpm.ready:
        return [gmk(g, k, None, Status.NODATA, GPM_WAIT) for k in keys]
    vals = [g.gpm.values.get(k) for k in keys]
    if all(v is not None for v in vals):
        return [gmk(g, k, v) for k, v in zip(keys, vals)]
    return None


def _pcie(calls: NvmlCalls, g: GpuState, slow: bool, fields: dict[str, Any],
          gpm_failure: tuple[Status, str] | None) -> list[Reading]:
    if g.pcie_src == "gpm" and g.gpm is not None:
        got = _from_gpm(g, PCIE_KEYS, gpm_failure)
        if got is not None:
            return got
        g.pcie_src = "fields"   # this driver's GPM lacks PCIe metrics: counters from next tick
        return [gmk(g, k, None, Status.NODATA, "switching to PCIe byte counters")
                for k in PCIE_KEYS]
    if g.pcie_src == "fields":
        got = fields.get("pcie")
        if not (got and got[0] is Status.UNSUPPORTED):
            return _as_readings(g, PCIE_KEYS, got or (None, None))
        g.pcie_src = "throughput"   # no byte counters: the slow, blocking call it is
    if g.pcie_src == "throughput":
        if slow or not g.pcie_cache:
            g.pcie_cache = _pcie_throughput(calls, g)
        return g.pcie_cache
    return [gmk(g, k, None, Status.UNSUPPORTED, g.pcie_reason) for k in PCIE_KEYS]


def _pcie_throughput(calls: NvmlCalls, g: GpuState) -> list[Reading]:
    nvml = calls.nvml
    out = []
    for key, counter in zip(PCIE_KEYS, (nvml.NVML_PCIE_UTIL_TX_BYTES,
                                        nvml.NVML_PCIE_UTIL_RX_BYTES)):
        r = read_one(calls, g, key, "nvmlDeviceGetPcieThroughput", counter, scale=1024.0)
        if r.status is Status.UNSUPPORTED:
            g.pcie_src, g.pcie_reason = "none", r.reason
        out.append(r)
    return out


def _nvlink(g: GpuState, fields: dict[str, Any],
            gpm_failure: tuple[Status, str] | None) -> list[Reading]:
    if g.nvlink_src == "none":
        return [gmk(g, k, None, Status.UNSUPPORTED, g.nvlink_reason) for k in NVLINK_KEYS]
    if not g.nvlink_active:
        return [gmk(g, k, 0.0) for k in NVLINK_KEYS]   # links exist, none is up
    if g.nvlink_src == "gpm" and g.gpm is not None:
        got = _from_gpm(g, NVLINK_KEYS, gpm_failure)
        if got is not None:
            return got
        g.nvlink_src = "fields"
        return [gmk(g, k, None, Status.NODATA, "switching to NVLink byte counters")
                for k in NVLINK_KEYS]
    got = fields.get("nvlink")
    if got and got[0] is Status.UNSUPPORTED:
        g.nvlink_src = "none"
        g.nvlink_reason = f"NVLink throughput counters not supported on {g.name}"
    return _as_readings(g, NVLINK_KEYS, got or (None, None))
