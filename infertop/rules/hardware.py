"""Hardware rules: what the GPU itself says (NVML, GPM), per GPU."""

from __future__ import annotations

from collections.abc import Iterator

from ..findings import Evidence, RuleSpec, Severity
from ..key_symbols import K
from ..keysym import any_of
from ..model import Layer, Reading
from ..windowstat import recent_values
from .base import JUDGED_RAISE_AFTER, Candidate, Context, Rule, ev, sub
from .window import covered, value_at

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
        if ratio is not None and c is not None and cm is not None:
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
CRIT_XIDS = {48, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140, 145, 149}

# What to do about an Xid, by class (GPU health design citing Lablup, arXiv 2605.09370;
# NVIDIA's Xid catalogue): the application's fault or a contained error -> restart it;
# the GPU's firmware/engine hung -> reset the GPU; the GPU left the bus -> reboot.
XID_ACTIONS: dict[int, str] = {
    **dict.fromkeys((31, 43, 94), "restart the application (Xid {xid}: its context hit a "
                    "fault or a contained memory error; the GPU itself is usable)"),
    **dict.fromkeys((119, 145, 149), "drain the node and reset the GPU (nvidia-smi -r) (Xid "
                    "{xid}: the GPU's firmware or an engine stopped answering)"),
    79: "drain the node and reboot it (Xid 79: the GPU fell off the bus); replace the GPU "
        "if it repeats",
}


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
        gone = lost.get(gpu)
        if gone is not None and gone.value >= 1:
            evidence.append(ev(gone, gone.key, gone.labels, gone.value, 1, ">=",
                               "fell off the bus"))
            sev = CRIT
        remedy = None
        for d in counters.get(gpu, ()):
            note = f"new in the last {t.error_event_window:.0f} s"
            level = CRIT
            if d.key == "gpu.xid_new":
                x = xid_last.get(gpu)
                if x is not None:
                    xid = int(x.value)
                    note += f"; last Xid {xid}"
                    level = CRIT if xid in CRIT_XIDS else WARN
                    if xid in XID_ACTIONS:
                        remedy = XID_ACTIONS[xid].format(xid=xid)
            evidence.append(ev(d, d.key, d.labels, d.value, 0, ">", note))
            sev = level if sev is None else max(sev, level)
        if sev is not None:
            what = "lost" if evidence[0].key == "gpu.lost" else "reports errors"
            if what == "lost":
                remedy = XID_ACTIONS[79]
            yield Candidate(sub(gpu=gpu), sev, tuple(evidence), title=f"GPU {gpu} {what}",
                            remedy=remedy)


# ---- HW-006 GPU too hot (core or HBM, held) ----------------------------------------------
def _held_min(ctx: Context, r: Reading, seconds: float) -> float | None:
    """The lowest value of ``r``'s series over the last ``seconds``, once History covers
    them all (a temperature must hold, not touch, its limit); None before."""
    s = ctx.series(r.key, r.labels)
    if s is None or not covered(s, seconds, ctx.now):
        return None
    vals = recent_values(s, seconds, ctx.now)
    return min(vals) if vals else None


def too_hot(ctx: Context) -> Iterator[Candidate]:
    t = ctx.t
    levels = (("gpu.temp_celsius", "core", ((CRIT, t.gpu_very_hot_celsius, t.gpu_very_hot_seconds),
                                             (WARN, t.gpu_hot_celsius, t.gpu_hot_seconds))),
              ("gpu.mem_temp_celsius", "memory (HBM)",
               ((WARN, t.hbm_hot_celsius, t.hbm_hot_seconds),)))
    found: dict[str, list[tuple[Severity, Evidence, str]]] = {}
    for key, what, steps in levels:
        for gpu, r in ctx.per_gpu(key).items():
            for sev, limit, hold in steps:
                low = _held_min(ctx, r, hold)
                if ctx.past(low, ">", limit, sub(gpu=gpu), level=sev):
                    found.setdefault(gpu, []).append((sev, ev(
                        r, key, r.labels, low, limit, ">",
                        f"{what}: lowest of the last {hold:.0f} s; {r.value:.0f} C now"), what))
                    break
    for gpu, hits in sorted(found.items()):
        sev = max(h[0] for h in hits)
        names = " and ".join(h[2] for h in hits)
        yield Candidate(sub(gpu=gpu), sev, tuple(h[1] for h in hits),
                        title=f"GPU {gpu}: {names} too hot")


# ---- HW-007 hardware slowdown held ----------------------------------------------------------
HW_SLOWDOWN = 0x008


def slowdown_held(ctx: Context) -> Iterator[Candidate]:
    t = ctx.t
    for gpu, r in ctx.per_gpu("gpu.throttle_reasons").items():
        if not int(r.value) & HW_SLOWDOWN:
            continue
        s = ctx.series(r.key, r.labels)
        if s is None or not covered(s, t.hw_slowdown_seconds, ctx.now):
            continue
        vals = recent_values(s, t.hw_slowdown_seconds, ctx.now)
        if not vals or not all(int(v) & HW_SLOWDOWN for v in vals):
            continue
        yield Candidate(sub(gpu=gpu), WARN, (
            ev(r, r.key, r.labels, "hw_slowdown", "none", "!=",
               f"on every tick of the last {t.hw_slowdown_seconds:.0f} s "
               f"(mask {int(r.value):#x})"),), title=f"GPU {gpu}: hardware slowdown held")


# ---- HW-008 memory rows remapped -----------------------------------------------------------
def rows_remapped(ctx: Context) -> Iterator[Candidate]:
    t = ctx.t
    unc = ctx.per_gpu("gpu.remapped_rows_uncorrectable")
    failed = ctx.per_gpu("gpu.row_remap_failure")
    pending = ctx.per_gpu("gpu.row_remap_pending")
    for gpu, corr in sorted(ctx.per_gpu("gpu.remapped_rows_correctable").items()):
        evidence: list[Evidence] = []
        sev: Severity | None = None
        u, f = unc.get(gpu), failed.get(gpu)
        if u is not None and u.value > 0:
            evidence.append(ev(u, u.key, u.labels, u.value, 0, ">",
                               "rows remapped after uncorrectable errors"))
            sev = CRIT
        if f is not None and f.value >= 1:
            evidence.append(ev(f, f.key, f.labels, f.value, 1, ">=",
                               "a remap failed: no spare rows left"))
            sev = CRIT
        s = ctx.series(corr.key, corr.labels)
        first = value_at(s, ctx.now - t.error_event_window) if s is not None else None
        if first is not None and corr.value > first:
            evidence.append(ev(corr, corr.key, corr.labels, corr.value - first, 0, ">",
                               f"new correctable remaps in the last "
                               f"{t.error_event_window:.0f} s ({corr.value:.0f} in all)"))
            sev = sev or WARN
        if sev is None:
            continue
        p = pending.get(gpu)
        if p is not None and p.value >= 1:
            evidence.append(ev(p, p.key, p.labels, p.value, None, "",
                               "a remap waits for a GPU reset"))
        remedy = ("a remap failed: drain the node and replace the GPU (RMA)"
                  if f is not None and f.value >= 1 else
                  "drain the node and reset the GPU so pending remaps apply (nvidia-smi -r); "
                  "replace it if remaps keep coming" if sev is CRIT else
                  "watch the trend: correctable remaps that keep growing precede "
                  "uncorrectable ones; plan a reset or a replacement")
        yield Candidate(sub(gpu=gpu), sev, tuple(evidence),
                        title=f"GPU {gpu}: memory rows remapped", remedy=remedy)


RULES = (
    Rule(RuleSpec(
        "HW-001", HW, "busy but not working",
        "NVML says a kernel is always running (util high) but GPM shows most SM cycles idle: "
        "tiny kernels, launch gaps or synchronisation waits, not compute.",
        (K.gpu.util_ratio, K.gpu.sm_active_ratio),
        {"thresholds.busy_util_ratio": None, "thresholds.busy_sm_active_max": None},
        "capture a timeline (nsys) to see which kernels and gaps; bigger batches or CUDA graphs "
        "when the CPU launches too slowly", raise_after=JUDGED_RAISE_AFTER,
        judged="median over diagnosis.judge_window of util and of SM active"), busy_not_working),
    Rule(RuleSpec(
        "HW-002", HW, "tensor cores idle (FP32 fallback?)",
        "SMs are busy but the tensor pipes are nearly idle on a model served in 16-bit: its "
        "matmuls run on CUDA cores (an FP32 op, an unsupported kernel/backend).",
        (K.gpu.sm_active_ratio, K.gpu.tensor_active_ratio, K.server.setting.where(name="dtype")),
        {"thresholds.tensor_busy_sm_min": None, "thresholds.tensor_idle_max": None},
        "find the FP32 kernels with a capture (nsys); check the attention backend and "
        "quantization support this GPU", raise_after=JUDGED_RAISE_AFTER,
        judged="median over diagnosis.judge_window of SM active and of tensor activity"), tensor_idle),
    Rule(RuleSpec(
        "HW-003", HW, "clocks throttled",
        "The driver holds clocks down for a reason other than idleness: thermal, hardware "
        "slowdown, power brake (critical/warning) or the power cap with clocks well below max "
        "(notice).",
        (K.gpu.throttle_reasons,),
        {"thresholds.throttle_clock_ratio": None},
        "depends on the reason: cooling for thermal, PSU/chassis for power brake, the power "
        "limit (nvidia-smi -pl) for the power cap",
        optional=(K.gpu.sm_clock_hz, K.gpu.sm_clock_max_hz, K.gpu.temp_celsius),
        judged="each tick's reason bits (a bitmask has no median); raise_after holds them"),
        throttling),
    Rule(RuleSpec(
        "HW-004", HW, "PCIe saturated",
        "Host<->device traffic in one direction near the link's capacity (from its generation "
        "and width, best seen): copies, CPU offload or swapping compete with the model.",
        (any_of(K.gpu.pcie_tx_bytes_per_second, K.gpu.pcie_rx_bytes_per_second),
         K.gpu.pcie_link_gen, K.gpu.pcie_link_width),
        {"thresholds.pcie_saturated_ratio": None},
        "check host-device copies with a capture (nsys); avoid CPU offload/KV swap; pin host "
        "memory; check the link runs at full generation and width",
        raise_after=JUDGED_RAISE_AFTER, judged="median over diagnosis.judge_window of each direction's rate"),
        pcie_saturated),
    Rule(RuleSpec(
        "HW-005", HW, "GPU lost or reporting errors",
        "The GPU fell off the bus, or new Xid critical errors or uncorrected ECC errors "
        "appeared (counted over a window; errors from before are not findings).",
        (any_of(K.gpu.lost, K.gpu.xid_total, K.gpu.ecc_uncorrected_total),),
        {"thresholds.error_event_window": None},
        "drain this GPU: read dmesg / nvidia-smi -q for the Xid, reset or replace it; restart "
        "the server on healthy GPUs",
        optional=(K.gpu.xid_last,), raise_after=0.0,
        judged="new errors over thresholds.error_event_window (derived gpu.xid_new, "
               "gpu.ecc_uncorrected_new)",
        notes="The remedy follows the Xid's class: 31/43/94 restart the application; "
              "119/145/149 reset the GPU; 79 (fell off the bus) reboot the node."),
        gpu_errors),
    Rule(RuleSpec(
        "HW-006", HW, "GPU too hot",
        "The core temperature stayed above its limits for minutes (warning above 85 C for "
        "5 min, critical above 92 C for 2 min), or the memory (HBM) above its own; the GPU "
        "slows itself down and ages faster.",
        (any_of(K.gpu.temp_celsius, K.gpu.mem_temp_celsius),),
        {"thresholds.gpu_hot_celsius": None, "thresholds.gpu_hot_seconds": None,
         "thresholds.gpu_very_hot_celsius": None, "thresholds.gpu_very_hot_seconds": None,
         "thresholds.hbm_hot_celsius": None, "thresholds.hbm_hot_seconds": None},
        "check cooling: fans, airflow, inlet temperature, a blocked or failed chassis fan; "
        "move load off this GPU until it cools", raise_after=0.0,
        judged="the lowest reading over each hold (the temperature must stay above the limit "
               "for the whole hold; History must cover it)"), too_hot),
    Rule(RuleSpec(
        "HW-007", HW, "hardware slowdown held",
        "The hardware-slowdown clock event reason (0x8: clocks halved or worse by the board) "
        "was set on every tick for minutes: a degraded board or power supply, not a "
        "transient spike.",
        (K.gpu.throttle_reasons,),
        {"thresholds.hw_slowdown_seconds": None},
        "drain the node: check the PSU, power cables and cooling with the host's admin; "
        "`nvidia-smi -q -d PERFORMANCE` names the reason", raise_after=0.0,
        judged="every tick of thresholds.hw_slowdown_seconds (HW-003 reports the reason at "
               "once; this one says it stays)"), slowdown_held),
    Rule(RuleSpec(
        "HW-008", HW, "memory rows remapped",
        "The GPU remapped memory rows after uncorrectable errors, or a remap failed "
        "(critical), or its correctable remaps grew over the window (warning): its memory is "
        "wearing out.",
        (K.gpu.remapped_rows_correctable,),
        {"thresholds.error_event_window": None},
        "reset the GPU so pending remaps apply; replace it after a remap failure or when "
        "remaps keep coming",
        optional=(K.gpu.remapped_rows_uncorrectable, K.gpu.row_remap_failure,
                  K.gpu.row_remap_pending), raise_after=0.0,
        judged="each tick's remap counts; correctable growth over "
               "thresholds.error_event_window"), rows_remapped),
)
