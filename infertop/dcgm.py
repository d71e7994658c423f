"""DCGM exporter series -> the GPU readings NVML produces, and Prometheus vectors -> families.

A fleet is read through Prometheus (``probes/prometheus``): its instant-query answer is a
list of series (labels with ``__name__``, one value).  Two pure steps turn that into the
same readings a local box gives:

* ``gpu_readings`` maps NVIDIA dcgm-exporter names onto the keys of ``infertop.keys``
  (docs/metrics.md#dcgm has the table, units and sources);
* ``families_from_series`` rebuilds exposition ``Family`` objects from the series, so a
  server's families go through ``infertop.dialects`` exactly as a direct scrape does.

Rules of the road (docs/metrics.md#dcgm): DCGM ``gpu`` is the device index like NVML's;
the host label is ``Hostname`` (``hostname`` on newer exporters, both accepted); a blank
field may be a huge sentinel (>= ~9.22e18), dropped; a profiling field the exporter does not
collect (``DCGM_FI_PROF_*`` are opt-in or need the profiling lock) is NODATA "not
collected", never 0; ``DCGM_FI_PROF_PCIE_*_BYTES`` are already per-second gauges.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from .keys import SPECS
from .meta import GpuName, NvmlMeta
from .model import Kind, Reading, Status, make_labels
from .promtext import Family, PromSample
from .units import natural_key

MIB = float(1 << 20)
SENTINEL = 9.2e18  # DCGM's "blank" values are int64 sentinels around 9.22e18

# exporter name -> (reading key, factor to the key's unit)
DCGM_FIELDS: dict[str, tuple[str, float]] = {
    "DCGM_FI_DEV_GPU_UTIL": ("gpu.util_ratio", 0.01),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("gpu.mem_util_ratio", 0.01),
    "DCGM_FI_DEV_FB_USED": ("gpu.mem_used_bytes", MIB),
    "DCGM_FI_DEV_POWER_USAGE": ("gpu.power_watts", 1.0),
    "DCGM_FI_DEV_GPU_TEMP": ("gpu.temp_celsius", 1.0),
    "DCGM_FI_DEV_SM_CLOCK": ("gpu.sm_clock_hz", 1e6),
    "DCGM_FI_DEV_MEM_CLOCK": ("gpu.mem_clock_hz", 1e6),
    "DCGM_FI_PROF_SM_ACTIVE": ("gpu.sm_active_ratio", 1.0),
    "DCGM_FI_PROF_SM_OCCUPANCY": ("gpu.sm_occupancy_ratio", 1.0),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("gpu.tensor_active_ratio", 1.0),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("gpu.dram_bw_util_ratio", 1.0),
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("gpu.pcie_tx_bytes_per_second", 1.0),
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("gpu.pcie_rx_bytes_per_second", 1.0),
}
FB_FREE = "DCGM_FI_DEV_FB_FREE"
FB_RESERVED = "DCGM_FI_DEV_FB_RESERVED"
XID = "DCGM_FI_DEV_XID_ERRORS"
# fields whose absence means "the exporter does not collect it" (opt-in profiling metrics)
PROFILING = tuple(n for n in DCGM_FIELDS if n.startswith("DCGM_FI_PROF_"))
# every name this module reads (the Prometheus query asks for exactly these)
DCGM_NAMES = tuple(DCGM_FIELDS) + (FB_FREE, FB_RESERVED, XID)


def hostname_of(labels: Mapping[str, str]) -> str:
    """The exporter's host label: ``Hostname`` (old) or ``hostname`` (dcgm-exporter main)."""
    return labels.get("Hostname") or labels.get("hostname") or ""


def gpu_id(labels: Mapping[str, str]) -> str:
    """The GPU's index as NVML numbers it; a MIG instance is ``gpu.instance``."""
    gpu = labels.get("gpu", "")
    inst = labels.get("GPU_I_ID")
    return f"{gpu}.{inst}" if gpu and inst not in (None, "") else gpu


def gpu_readings(series: Iterable[tuple[Mapping[str, str], float]]
                 ) -> tuple[list[Reading], NvmlMeta]:
    """One node's DCGM series (labels with ``__name__``, value) -> GPU readings and meta.

    Every GPU seen by any field gets every mapped key: a value, or NODATA with the reason
    (a profiling field not collected, a blank sentinel)."""
    per_gpu: dict[str, dict[str, float]] = {}
    info: dict[str, dict[str, str]] = {}
    host = ""
    for labels, value in series:
        name = labels.get("__name__", "")
        g = gpu_id(labels)
        if not g or not name.startswith("DCGM_"):
            continue
        host = host or hostname_of(labels)
        fields = per_gpu.setdefault(g, {})
        if g not in info:
            info[g] = {"uuid": labels.get("UUID") or labels.get("uuid") or "",
                       "pci_bus_id": labels.get("pci_bus_id", ""),
                       "name": labels.get("modelName", "")}
        if math.isfinite(value) and abs(value) < SENTINEL:
            fields[name] = value
        else:
            fields.setdefault(name, math.nan)  # seen but blank
    readings: list[Reading] = []
    for g in sorted(per_gpu, key=natural_key):
        readings += _one_gpu(g, per_gpu[g], info[g])
    meta = NvmlMeta(hostname=host, gpus=tuple(GpuName(g, info[g]["name"], info[g]["uuid"])
                                              for g in sorted(per_gpu, key=natural_key)))
    return readings, meta


def _one_gpu(g: str, f: dict[str, float], facts: dict[str, str]) -> list[Reading]:
    lab = make_labels(gpu=g)
    info_lab = make_labels(gpu=g, uuid=facts["uuid"], pci_bus_id=facts["pci_bus_id"])
    out = [Reading("gpu.info", 1.0, "", info_lab, kind=Kind.INFO, text=facts["name"] or "GPU")]
    for name, (key, factor) in DCGM_FIELDS.items():
        v = f.get(name)
        if v is not None and not math.isnan(v):
            out.append(Reading(key, v * factor, SPECS[key].unit, lab))
            continue
        if name in PROFILING:
            why = (f"{name} not collected by dcgm-exporter (a profiling field: enable it in "
                   "the exporter's counters CSV; Nsight holds the profiling lock)")
        else:
            why = f"{name} not exported for this GPU"
        if v is not None:
            why = f"{name} is blank (DCGM sentinel)"
        if key == "gpu.mem_util_ratio" and v is None:
            continue  # off by default in dcgm-exporter and seldom wanted: do not nag
        if key == "gpu.mem_clock_hz" and v is None:
            continue
        out.append(Reading(key, None, SPECS[key].unit, lab, Status.NODATA, why))
    used, free = f.get("DCGM_FI_DEV_FB_USED"), f.get(FB_FREE)
    if used is not None and free is not None and not (math.isnan(used) or math.isnan(free)):
        reserved = f.get(FB_RESERVED)
        total = used + free + (reserved if reserved is not None and not math.isnan(reserved)
                               else 0.0)
        out.append(Reading("gpu.mem_total_bytes", total * MIB, "bytes", lab))
    xid = f.get(XID)
    if xid is not None and not math.isnan(xid) and xid > 0:
        out.append(Reading("gpu.xid_last", xid, "", lab))
    else:
        out.append(Reading("gpu.xid_last", None, "", lab, Status.NODATA,
                           "no Xid reported by DCGM"))
    return out


# ---- Prometheus vectors -> exposition families ---------------------------------------------

def families_from_series(series: Iterable[tuple[Mapping[str, str], float]]) -> list[Family]:
    """Rebuild exposition families from instant-query series (Prometheus drops the TYPE).

    A name ``X_bucket`` with an ``le`` label makes ``X`` a histogram (with ``X_sum`` and
    ``X_count``); ``X_total`` is the counter family ``X`` (the parser's convention, which
    the dialect tables name); ``_created`` samples are skipped; anything else is a gauge.
    TGI's counters lack ``_total`` and are read as gauges, which the dialect table maps by
    family name just the same."""
    rows = [(dict(lab), v) for lab, v in series]
    hist_bases = {lab["__name__"][:-7] for lab, _ in rows
                  if lab.get("__name__", "").endswith("_bucket") and "le" in lab}
    fams: dict[str, Family] = {}
    for lab, v in rows:
        name = lab.pop("__name__", "")
        if not name or name.endswith("_created"):
            continue
        fam, typ = name, "gauge"
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and name[:-len(suffix)] in hist_bases:
                fam, typ = name[:-len(suffix)], "histogram"
                break
        else:
            if name.endswith("_total"):
                fam, typ = name[:-6], "counter"
        f = fams.get(fam)
        if f is None:
            f = fams[fam] = Family(fam, typ, "")
        f.samples.append(PromSample(name, lab, v, None))
    return list(fams.values())
