"""A scenario SimFrame as the Samples the live probes would produce: "nvml" and "process".

Same keys, labels and meta as the live NVML and process probes (keys.py), so every pane
and rule reads a demo exactly as it reads a real machine.  The server's own Sample is made
from exposition text (``scenario_expo``) through the same parser as live data.
"""

from __future__ import annotations

from infertop.config import Thresholds
from infertop.demo.scenario import THROTTLE_NAMES
from infertop.demo.sim import SimFrame
from infertop.keys import SPECS
from infertop.meta import GpuName, NvmlMeta, ProcessMeta, ServerInfo
from infertop.model import Kind, Reading, Sample, Status, make_labels
from infertop.servers import registry

_GPU_KEYS = (
    ("gpu.util_ratio", "util"), ("gpu.mem_util_ratio", "mem_util"),
    ("gpu.mem_used_bytes", "mem_used"), ("gpu.mem_total_bytes", "mem_total"),
    ("gpu.power_watts", "power"), ("gpu.power_limit_watts", "power_limit"),
    ("gpu.temp_celsius", "temp"), ("gpu.sm_clock_hz", "sm_clock"),
    ("gpu.sm_clock_max_hz", "sm_clock_max"), ("gpu.mem_clock_hz", "mem_clock"),
    ("gpu.mem_clock_max_hz", "mem_clock_max"),
    ("gpu.pcie_tx_bytes_per_second", "pcie_tx"), ("gpu.pcie_rx_bytes_per_second", "pcie_rx"),
)
_NVLINK_KEYS = (("gpu.nvlink_tx_bytes_per_second", "nvlink_tx"),
                ("gpu.nvlink_rx_bytes_per_second", "nvlink_rx"))
_GPM_KEYS = (("gpu.sm_active_ratio", "sm_active"), ("gpu.sm_occupancy_ratio", "occupancy"),
             ("gpu.tensor_active_ratio", "tensor"), ("gpu.dram_bw_util_ratio", "dram"))
GPU_LOST_REASON = "GPU lost (fell off the bus)"  # the live NVML probe's words
# every per-GPU key, ERROR on a lost GPU (as the live probe does)
LOST_KEYS = tuple(k for k, _ in _GPU_KEYS) + (
    "gpu.throttle_reasons", "gpu.pcie_link_gen", "gpu.pcie_link_width",
    "gpu.nvlink_tx_bytes_per_second", "gpu.nvlink_rx_bytes_per_second",
    "gpu.nvlink_links_active", "gpu.ecc_uncorrected_total", "gpu.ecc_corrected_total",
    "gpu.mig_enabled") + tuple(k for k, _ in _GPM_KEYS)


def _r(key: str, value: float | None, labels, *, text: str | None = None,
       status: Status = Status.OK, reason: str = "") -> Reading:
    spec = SPECS[key]
    if spec.kind is Kind.INFO and value is None and status is Status.OK:
        value = 1.0
    if value is not None and spec.kind is Kind.GAUGE:
        value = _round(value)  # counters stay exact: rounding would quantize their rates
    return Reading(key, value if status is Status.OK else None, spec.unit, labels, status,
                   reason, spec.kind, text)


def _round(v: float) -> float:
    """Six significant digits: plenty for a screen, and recordings stay small."""
    if v == 0 or v != v:
        return float(v)
    return float(f"{v:.6g}")


def throttle_text(mask: int) -> str:
    if not mask:
        return "none"
    return ",".join(n for i, n in enumerate(THROTTLE_NAMES) if mask & (1 << i))


def gpu_uuid(i: int) -> str:
    return f"GPU-5ce0a0de-0000-4000-8000-{i:012x}"


def nvml_sample(frame: SimFrame) -> Sample:
    s = frame.setup
    readings: list[Reading] = []
    gpus_meta = []
    nvlink_why = f"no NVLink on {s['gpu_name']} here (PCIe only)"
    for g in frame.gpus:
        lab = make_labels(gpu=g.index)
        uuid = gpu_uuid(g.index)
        bus = f"00000000:{0x18 + 0x10 * g.index:02X}:00.0"
        info = make_labels(gpu=g.index, uuid=uuid, pci_bus_id=bus)
        gpus_meta.append(GpuName(g.index, s["gpu_name"], uuid))
        xid = [_r("gpu.xid_total", float(g.xid_total), lab)]
        if g.xid_total:
            xid.append(_r("gpu.xid_last", float(g.xid_last), lab))
        else:
            xid.append(_r("gpu.xid_last", None, lab, status=Status.NODATA,
                          reason="no Xid error seen since infertop started"))
        if g.lost:
            readings.append(_r("gpu.info", None, info, text=s["gpu_name"], status=Status.ERROR,
                               reason=GPU_LOST_REASON))
            readings.append(_r("gpu.lost", 1.0, lab))
            for key in LOST_KEYS:
                readings.append(_r(key, None, lab, status=Status.ERROR, reason=GPU_LOST_REASON))
            readings += xid
            continue
        readings.append(_r("gpu.info", 1.0, info, text=s["gpu_name"]))
        readings.append(_r("gpu.lost", 0.0, lab))
        v = g.values
        for key, name in _GPU_KEYS:
            readings.append(_r(key, v[name], lab))
        readings.append(_r("gpu.throttle_reasons", float(g.throttle), lab,
                           text=throttle_text(g.throttle)))
        readings.append(_r("gpu.pcie_link_gen", float(s["pcie_gen"]), lab))
        readings.append(_r("gpu.pcie_link_width", float(s["pcie_width"]), lab))
        if s["nvlink"]:
            readings.append(_r("gpu.nvlink_links_active", 18.0, lab))
            for key, name in _NVLINK_KEYS:
                readings.append(_r(key, v[name], lab))
        else:
            for key in ("gpu.nvlink_links_active",) + tuple(k for k, _ in _NVLINK_KEYS):
                readings.append(_r(key, None, lab, status=Status.UNSUPPORTED, reason=nvlink_why))
        readings.append(_r("gpu.ecc_uncorrected_total", float(g.ecc_uncorrected), lab))
        readings.append(_r("gpu.ecc_corrected_total", 0.0, lab))
        readings.append(_r("gpu.mig_enabled", 0.0, lab))
        readings.append(_r("gpu.mem_bus_width_bits", float(s["mem_bus_width_bits"]), lab))
        readings.append(_r("gpu.cuda_cores", float(s["cuda_cores"]), lab))
        cc = str(s["compute_capability"])
        readings.append(_r("gpu.compute_capability", float(cc), lab, text=cc))
        if s["gpm"]:
            for key, name in _GPM_KEYS:
                readings.append(_r(key, v[name], lab))
        else:
            for key, _ in _GPM_KEYS:
                readings.append(_r(key, None, lab, status=Status.UNSUPPORTED,
                                   reason=f"GPM not supported on {s['gpu_name']} "
                                          "(needs Hopper or newer)"))
        readings += xid
        for pid, mem, sm in g.procs:
            pl = make_labels(gpu=g.index, pid=pid)
            readings.append(_r("process.gpu_mem_bytes", mem, pl))
            readings.append(_r("process.gpu_sm_ratio", max(0.0, min(1.0, sm)), pl))
        for pid, cmd in g.owners.items():   # a process outside the server's tree (NVML owner)
            readings.append(_r("process.gpu_owner", 1.0, make_labels(
                pid=pid, name=cmd.split()[0], user="alice"), text=cmd))
    live = [g for g in frame.gpus if not g.lost]
    half = max(1, len(frame.gpus) // 2)
    for i, a in enumerate(live):
        for b in live[i + 1:]:
            path = "NVLINK" if s["nvlink"] else (
                "PHB" if a.index // half == b.index // half else "SYS")
            for x, y in ((a, b), (b, a)):
                readings.append(_r("gpu.topology", 1.0, make_labels(gpu=x.index, peer=y.index),
                                   text=path))
    meta = NvmlMeta(gpus=tuple(gpus_meta), driver="580.95.05",
                    gpm=tuple(g.index for g in live if s["gpm"]),
                    xid=tuple(g.index for g in live), demo=True)
    return Sample("nvml", frame.time, tuple(readings), Status.OK, "", meta)


# Whoever else fills the demo host's CPUs (a noisy neighbour's batch job), as the live
# probe's /proc scan (probes/server/host_top.py) would find it; the sim's host share
# leaves this much for the system besides the server and that job.
NEIGHBOUR_PID, NEIGHBOUR_NAME, SYSTEM_CORES = 7301, "dataprep", 0.8
HOST_TOP_N = 5
HOST_TOP_SCAN_AT = Thresholds().host_top_scan_at   # the live probe's default mark


def host_top(frame: SimFrame) -> list[Reading]:
    """``host.top_cpu_cores`` while the host is near saturation, as the live probe reads
    them: the busiest processes of the whole host, the server's marked ``server=yes``."""
    h = frame.host
    if h["cpu_ratio"] < HOST_TOP_SCAN_AT:
        return []
    busy = [(p.cpu, p.pid, p.name, True) for p in frame.procs]
    other = h["cpu_ratio"] * h["cpu_count"] - sum(p.cpu for p in frame.procs) - SYSTEM_CORES
    if other >= 0.05:
        busy.append((other, NEIGHBOUR_PID, NEIGHBOUR_NAME, False))
    return [_r("host.top_cpu_cores", round(cores, 2),
               make_labels(pid=pid, name=name, server="yes" if mine else "no"))
            for cores, pid, name, mine in sorted(busy, reverse=True)[:HOST_TOP_N] if cores > 0]


def process_sample(frame: SimFrame, settings: dict[str, str] | None = None) -> Sample:
    """The server's process tree; ``settings`` are the entry point's command-line settings
    (the probes' discovery parses them, exactly as for a live server)."""
    readings: list[Reading] = []
    h = frame.host
    readings.append(_r("host.cpu_ratio", h["cpu_ratio"], ()))
    readings.append(_r("host.cpu_count", h["cpu_count"], ()))
    readings.append(_r("host.load1", h["load1"], ()))
    readings.append(_r("host.mem_used_bytes", h["mem_used"], ()))
    readings.append(_r("host.mem_total_bytes", h["mem_total"], ()))
    readings += host_top(frame)
    for p in frame.procs:
        base = make_labels(pid=p.pid, name=p.name)
        readings.append(_r("process.info", 1.0, make_labels(
            pid=p.pid, ppid=p.ppid, name=p.name, role=p.role, kind=frame.kind, user="demo"),
            text=" ".join(p.argv)))
        readings.append(_r("process.cpu_ratio", p.cpu, base))
        readings.append(_r("process.rss_bytes", p.rss, base))
        # like psutil: a process busy more than half the time is mostly seen running
        readings.append(_r("process.state", 1.0, base,
                           text="running" if p.cpu >= 0.5 else "sleeping"))
        readings.append(_r("process.threads", float(p.threads), base))
        readings.append(_r("process.ctx_switches_total", p.ctx_voluntary,
                           make_labels(base, type="voluntary")))
        readings.append(_r("process.ctx_switches_total", p.ctx_involuntary,
                           make_labels(base, type="involuntary")))
        for t in p.top_threads:
            readings.append(_r("thread.cpu_ratio", t.cpu,
                               make_labels(pid=p.pid, tid=t.tid, name=t.name)))
    for name, value in (settings or {}).items():
        readings.append(_r("server.setting", 1.0, make_labels(name=name), text=value))
    readings += model_readings(frame.setup)
    root = entry_process(frame)
    if root is not None:
        meta = ProcessMeta(in_container=False, server=ServerInfo(
            root.pid, frame.kind, root.name, "demo scenario", registry.default_port(frame.kind)),
            tree=tuple(p.pid for p in frame.procs))
        return Sample("process", frame.time, tuple(readings), Status.OK, "", meta)
    why = "server pid exited (the server is down)"
    meta = ProcessMeta(in_container=False, server=None, tree=(), reason=why)
    return Sample("process", frame.time, tuple(readings), Status.OK, why, meta)


def model_readings(s) -> list[Reading]:
    """What the process probe reads from the model's config.json (probes/server/
    model_config.py), from the scenario's setup."""
    lab = make_labels(model=s["model"])
    keys = ("model.params", "model.active_params", "model.weight_bytes",
            "model.kv_bytes_per_token")
    if not s["model_config"]:
        why = f"no config.json for {s['model']} (not a local directory, not in the HF cache)"
        return [_r(k, None, lab, status=Status.NODATA, reason=why) for k in keys]
    params = s["model_params_b"] * 1e9
    active = (s["active_params_b"] or s["model_params_b"]) * 1e9
    return [_r("model.info", 1.0, make_labels(model=s["model"], dtype="bfloat16"),
               text="LlamaForCausalLM (demo scenario)"),
            _r("model.params", params, lab), _r("model.active_params", active, lab),
            _r("model.weight_bytes", s["weights_gib"] * 2**30, lab),
            _r("model.kv_bytes_per_token", float(s["kv_bytes_per_token"]), lab)]


def entry_process(frame: SimFrame):
    """The server's root process (None while it is down)."""
    return next((p for p in frame.procs if p.ppid == 1), None)
