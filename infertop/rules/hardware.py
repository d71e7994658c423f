"""Hardware rules: what the GPU itself says (NVML, GPM), per GPU."""

from __future__ import annotations

from typing import Iterator

from ..findings import RuleSpec, Severity
from ..model import Layer
from .base import JUDGED_RAISE_AFTER, Candidate, Context, Rule, ev, sub

HW = Layer.HARDWARE
NOTICE, WARN, CRIT = Severity.NOTICE, Severity.WARN, Severity.CRIT

SIXTEEN_BIT = ("float16", "bfloat16", "half", "fp16", "bf16", "torch.float16",
               "torch.bfloat16")


# ---- HW-001 busy but not working ------------------------------------------------------
def busy_not_working(ctx: Context) -> Iterator[Candidate]:
    t = ctx.t
    sm = ctx.per_gpu("gpu.sm_active_ratio")
    for gpu, u in ctx.per_gpu("gpu.util_ratio").items():
        s = sm.get(gpu)
        if s is None:
            continue
        subject = sub(gpu=gpu)
        um, smm = ctx.median(u), ctx.median(s)
        if ctx.past(um, ">=", t.busy_util_ratio, subject) and \
                ctx.past(smm, "<=", t.busy_sm_active_max, subject):
            yield Candidate(subject, WARN, (
                ev(u, u.key, u.labels, um, t.busy_util_ratio, ">=", ctx.median_note),
                ev(s, s.key, s.labels, smm, t.busy_sm_active_max, "<=",
                   f"share of SM cycles with work, {ctx.median_note}"),
            ), title=f"GPU {gpu}: busy but not working")


# ---- HW-002 tensor cores idle on a 16-bit model ----------------------------------------
def tensor_idle(ctx: Context) -> Iterator[Candidate]:
    t = ctx.t
    dtype = ctx.setting("dtype")
    if dtype is None or dtype.strip().lower() not in SIXTEEN_BIT:
        return
    tensor = ctx.per_gpu("gpu.tensor_active_ratio")
    for gpu, s in ctx.per_gpu("gpu.sm_active_ratio").items():
        te = tensor.get(gpu)
        if te is None:
            continue
        subject = sub(gpu=gpu)
        smm, tem = ctx.median(s), ctx.median(te)
        if ctx.past(smm, ">=", t.tensor_busy_sm_min, subject) and \
                ctx.past(tem, "<=", t.tensor_idle_max, subject):
            yield Candidate(subject, WARN, (
                ev(te, te.key, te.labels, tem, t.tensor_idle_max, "<=", ctx.median_note),
                ev(s, s.key, s.labels, smm, t.tensor_busy_sm_min, ">=", ctx.median_note),
                ev(None, "server.setting", sub(name="dtype"), dtype, None, "",
                   "model served in 16-bit: its matmuls should run on tensor cores"),
            ), title=f"GPU {gpu}: tensor cores idle while SMs compute (FP32 fallback?)")


# ---- HW-003 throttling ----------------------------------------------------------------
# NVML clocks-event reason bits (nvml.h ABI): bit, name, severity, what to do
THROTTLE = (
    (0x004, "sw_power_cap", NOTICE, "power-capped: raise the power limit (nvidia-smi -pl) or "
     "accept the clocks; check the limit was not lowered"),
    (0x008, "hw_slowdown", CRIT, "hardware slowdown (clocks halved or worse): check cooling, "
     "PSU and `nvidia-smi -q -d PERFORMANCE`; tell the host's admin"),
    (0x020, "sw_thermal", WARN, "too hot: check airflow, fans and inlet temperature"),
    (0x040, "hw_thermal", CRIT, "over temperature: check cooling now; the GPU protects itself"),
    (0x080, "hw_power_brake", CRIT, "power brake asserted by the chassis/PSU: check the "
     "system's power supply"),
)


def throttling(ctx: Context) -> Iterator[Candidate]:
    t = ctx.t
    clk = ctx.per_gpu("gpu.sm_clock_hz")
    clk_max = ctx.per_gpu("gpu.sm_clock_max_hz")
    temp = ctx.per_gpu("gpu.temp_celsius")
    for gpu, r in ctx.per_gpu("gpu.throttle_reasons").items():
        mask = int(r.value)
        c, cm = clk.get(gpu), clk_max.get(gpu)
        ratio = c.value / cm.value if c is not None and cm is not None and cm.value else None
        hits = []
        for bit, name, sev, remedy in THROTTLE:
            if not mask & bit:
                continue
            if bit == 0x004 and (ratio is None or ratio >= t.throttle_clock_ratio):
                continue  # at the power limit yet near full clocks: normal under load
            hits.append((name, sev, remedy))
        if not hits:
            continue
        sev = max(h[1] for h in hits)
        names = ",".join(h[0] for h in hits)
        evidence = [ev(r, r.key, r.labels, names, "none", "!=",
                       f"mask {mask:#x}" + (f", NVML: {r.text}" if r.text else ""))]
        if ratio is not None:
            capped = any(h[0] == "sw_power_cap" for h in hits)  # the clock is its evidence
            evidence.append(ev(c, c.key, c.labels, c.value,
                               t.throttle_clock_ratio * cm.value if capped else None,
                               "<" if capped else "",
                               f"{ratio:.0%} of max {cm.value / 1e6:.0f} MHz"))
        if gpu in temp:
            tr = temp[gpu]
            evidence.append(ev(tr, tr.key, tr.labels, tr.value, None, ""))
        worst = [h for h in hits if h[1] == sev][0]
        yield Candidate(sub(gpu=gpu), sev, tuple(evidence),
                        title=f"GPU {gpu}: clocks throttled ({names})", remedy=worst[2])


# ---- HW-004 PCIe saturated ------------------------------------------------------------
# usable bytes/s per lane per direction, by PCIe generation (after line encoding)
PCIE_LANE_BYTES = {1: 0.25e9, 2: 0.5e9, 3: 0.985e9, 4: 1.969e9, 5: 3.938e9, 6: 7.563e9}


def pcie_capacity(ctx: Context, gpu: str) -> float | None:
    """The link's bytes/s per direction at the best generation/width seen for this GPU
    (links train down to Gen1 when idle, so the current value under-states capacity)."""
    g = ctx.per_gpu("gpu.pcie_link_gen").get(gpu)
    w = ctx.per_gpu("gpu.pcie_link_width").get(gpu)
    best = ctx.state.setdefault("pcie_best", {})
    cur = best.get(gpu, (0, 0))
    gen = max(cur[0], int(g.value) if g is not None else 0)
    width = max(cur[1], int(w.value) if w is not None else 0)
    best[gpu] = (gen, width)
    if gen <= 0 or width <= 0:
        return None
    return PCIE_LANE_BYTES.get(gen, PCIE_LANE_BYTES[6]) * width


def pcie_saturated(ctx: Context) -> Iterator[Candidate]:
    t = ctx.t
    tx = ctx.per_gpu("gpu.pcie_tx_bytes_per_second")
    rx = ctx.per_gpu("gpu.pcie_rx_bytes_per_second")
    for gpu in sorted(set(tx) | set(rx)):
        cap = pcie_capacity(ctx, gpu)
        if not cap:
            continue
        for r in (tx.get(gpu), rx.get(gpu)):
            if r is None:
                continue
            rate = ctx.median(r)
            if rate is None:
                continue
            share = rate / cap
            if ctx.past(share, ">=", t.pcie_saturated_ratio, sub(gpu=gpu)):
                gen, width = ctx.state["pcie_best"][gpu]
                yield Candidate(sub(gpu=gpu), WARN, (
                    ev(r, r.key, r.labels, rate, t.pcie_saturated_ratio * cap, ">=",
                       f"{share:.0%} of Gen{gen} x{width} ({cap / 1e9:.1f} GB/s), "
                       f"{ctx.median_note}"),
                ), title=f"GPU {gpu}: PCIe saturated")
                break


# ---- HW-005 GPU lost, new Xid or ECC errors ----------------------------------------------
# Xids that mean the GPU (or its memory) can no longer be trusted
CRIT_XIDS = {48, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140}


def gpu_errors(ctx: Context) -> Iterator[Candidate]:
    """New Xid/ECC errors are the derived ``gpu.xid_new``/``gpu.ecc_uncorrected_new``
    (increase over ``thresholds.error_event_window``, computed once in derive)."""
    t = ctx.t
    lost = ctx.per_gpu("gpu.lost")
    xid_last = ctx.per_gpu("gpu.xid_last")
    counters: dict[str, list] = {}
    for key in ("gpu.xid_new", "gpu.ecc_uncorrected_new"):
        for r in ctx.derived_of(key):
            if r.value > 0 and r.label("gpu"):
                counters.setdefault(r.label("gpu"), []).append(r)
    for gpu in sorted(set(lost) | set(counters)):
        evidence, sev = [], None
        r = lost.get(gpu)
        if r is not None and r.value >= 1:
            evidence.append(ev(r, r.key, r.labels, r.value, 1, ">=", "fell off the bus"))
            sev = CRIT
        for d in counters.get(gpu, ()):
            note = f"new in the last {t.error_event_window:.0f} s"
            level = CRIT
            if d.key == "gpu.xid_new":
                x = xid_last.get(gpu)
                if x is not None:
                    note += f"; last Xid {int(x.value)}"
                    level = CRIT if int(x.value) in CRIT_XIDS else WARN
            evidence.append(ev(d, d.key, d.labels, d.value, 0, ">", note))
            sev = level if sev is None else max(sev, level)
        if sev is not None:
            what = "lost" if evidence[0].key == "gpu.lost" else "reports errors"
            yield Candidate(sub(gpu=gpu), sev, tuple(evidence), title=f"GPU {gpu} {what}")


RULES = (
    Rule(RuleSpec(
        "HW-001", HW, "busy but not working",
        "NVML says a kernel is always running (util high) but GPM shows most SM cycles idle: "
        "tiny kernels, launch gaps or synchronisation waits, not compute.",
        ("gpu.util_ratio", "gpu.sm_active_ratio"),
        {"thresholds.busy_util_ratio": None, "thresholds.busy_sm_active_max": None},
        "capture a timeline (nsys) to see which kernels and gaps; bigger batches or CUDA graphs "
        "when the CPU launches too slowly", raise_after=JUDGED_RAISE_AFTER,
        judged="median over diagnosis.judge_window of util and of SM active"), busy_not_working),
    Rule(RuleSpec(
        "HW-002", HW, "tensor cores idle (FP32 fallback?)",
        "SMs are busy but the tensor pipes are nearly idle on a model served in 16-bit: its "
        "matmuls run on CUDA cores (an FP32 op, an unsupported kernel/backend).",
        ("gpu.sm_active_ratio", "gpu.tensor_active_ratio", "server.setting{name=dtype}"),
        {"thresholds.tensor_busy_sm_min": None, "thresholds.tensor_idle_max": None},
        "find the FP32 kernels with a capture (nsys); check the attention backend and "
        "quantization support this GPU", raise_after=JUDGED_RAISE_AFTER,
        judged="median over diagnosis.judge_window of SM active and of tensor activity"), tensor_idle),
    Rule(RuleSpec(
        "HW-003", HW, "clocks throttled",
        "The driver holds clocks down for a reason other than idleness: thermal, hardware "
        "slowdown, power brake (critical/warning) or the power cap with clocks well below max "
        "(notice).",
        ("gpu.throttle_reasons",),
        {"thresholds.throttle_clock_ratio": None},
        "depends on the reason: cooling for thermal, PSU/chassis for power brake, the power "
        "limit (nvidia-smi -pl) for the power cap",
        optional=("gpu.sm_clock_hz", "gpu.sm_clock_max_hz", "gpu.temp_celsius"),
        judged="each tick's reason bits (a bitmask has no median); raise_after holds them"),
        throttling),
    Rule(RuleSpec(
        "HW-004", HW, "PCIe saturated",
        "Host<->device traffic in one direction near the link's capacity (from its generation "
        "and width, best seen): copies, CPU offload or swapping compete with the model.",
        ("gpu.pcie_tx_bytes_per_second|gpu.pcie_rx_bytes_per_second", "gpu.pcie_link_gen",
         "gpu.pcie_link_width"),
        {"thresholds.pcie_saturated_ratio": None},
        "check host-device copies with a capture (nsys); avoid CPU offload/KV swap; pin host "
        "memory; check the link runs at full generation and width",
        raise_after=JUDGED_RAISE_AFTER, judged="median over diagnosis.judge_window of each direction's rate"),
        pcie_saturated),
    Rule(RuleSpec(
        "HW-005", HW, "GPU lost or reporting errors",
        "The GPU fell off the bus, or new Xid critical errors or uncorrected ECC errors "
        "appeared (counted over a window; errors from before are not findings).",
        ("gpu.lost|gpu.xid_total|gpu.ecc_uncorrected_total",),
        {"thresholds.error_event_window": None},
        "drain this GPU: read dmesg / nvidia-smi -q for the Xid, reset or replace it; restart "
        "the server on healthy GPUs",
        optional=("gpu.xid_last",), raise_after=0.0,
        judged="new errors over thresholds.error_event_window (derived gpu.xid_new, "
               "gpu.ecc_uncorrected_new)"), gpu_errors),
)
