"""Parallelism rules: tensor-parallel groups in step, their links, data-parallel balance."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator

from ..findings import Evidence, RuleSpec, Severity
from ..key_symbols import K
from ..keysym import any_of
from ..model import Layer, make_labels
from .base import JUDGED_RAISE_AFTER, Candidate, Context, Rule, ev, server_subject, sub
from .hardware import pcie_capacity

PAR = Layer.PARALLELISM
WARN = Severity.WARN
SPLIT = "pd.ttft_split_seconds"   # infertop/pdsplit.py


# ---- PAR-001 straggler in a TP group ----------------------------------------------------
def tp_straggler(ctx: Context) -> Iterator[Candidate]:
    t = ctx.t
    sm = ctx.per_gpu("gpu.sm_active_ratio")
    util = ctx.per_gpu("gpu.util_ratio")
    throttle = ctx.per_gpu("gpu.throttle_reasons")
    for group in ctx.tp_groups:
        src = sm if all(g in sm for g in group) else util
        if not all(g in src for g in group):
            continue
        gl = ",".join(group)
        meds = {g: ctx.median(src[g]) for g in group}
        vals = {g: m for g, m in meds.items() if m is not None}
        if len(vals) < len(meds):
            continue
        mean = sum(vals.values()) / len(vals)
        spread = max(vals.values()) - min(vals.values())
        if mean < t.tp_busy_min or not ctx.past(spread, ">=", t.tp_imbalance, sub(gpus=gl)):
            continue
        median = statistics.median(vals.values())
        odd = max(group, key=lambda g: (abs(vals[g] - median), g))
        key = src[odd].key
        note = f"GPU {odd} {vals[odd]:.0%} against a median of {median:.0%}"
        th = throttle.get(odd)
        if th is not None and int(th.value) & ~0x1:
            note += f"; it is throttled ({th.text or hex(int(th.value))}, see HW-003)"
        evidence = [Evidence(key, sub(gpus=gl), spread, t.tp_imbalance, ">=", "ratio",
                             f"max - min across TP group {gl} of each GPU's "
                             f"{ctx.median_note}: " + note)]
        evidence += [ev(src[g], key, src[g].labels, vals[g], None, "", ctx.median_note)
                     for g in group]
        yield Candidate(sub(gpus=gl), WARN, tuple(evidence),
                        title=f"GPU {odd} out of step with its TP group ({gl})")


# ---- PAR-002 TP over PCIe without NVLink ----------------------------------------------------
def tp_over_pcie(ctx: Context) -> Iterator[Candidate]:
    t = ctx.t
    if not ctx.tp_groups:
        return
    topo = {(r.label("gpu"), r.label("peer")): r.text for r in ctx.ok("gpu.topology")
            if r.text}
    tx = ctx.per_gpu("gpu.pcie_tx_bytes_per_second")
    rx = ctx.per_gpu("gpu.pcie_rx_bytes_per_second")
    for group in ctx.tp_groups:
        paths = [(a, b, topo.get((a, b)) or topo.get((b, a)))
                 for i, a in enumerate(group) for b in group[i + 1:]]
        pcie = [(a, b, p) for a, b, p in paths if p and not p.upper().startswith("NV")]
        if not pcie:
            continue  # all NVLink (or unknown): not this rule
        heavy = []
        for g in group:
            rates = [r for r in (tx.get(g), rx.get(g)) if r is not None]
            if not rates:
                continue
            top = max(rates, key=lambda r: r.value)
            cap = pcie_capacity(ctx, g)
            limit = t.tp_pcie_heavy_ratio * cap if cap else t.tp_pcie_heavy_bytes
            if top.value >= limit:
                heavy.append((top, limit, cap))
        if not heavy or len(heavy) * 2 < len(group):
            continue
        gl = ",".join(group)
        worst_path = max(pcie, key=lambda x: _PATH_RANK.get(x[2].upper(), 0))
        evidence = [Evidence("gpu.topology", sub(gpu=worst_path[0], peer=worst_path[1]),
                             worst_path[2], "NVLINK", "!=", "",
                             f"{len(pcie)} of {len(paths)} GPU pairs of TP group {gl} "
                             "talk over PCIe")]
        for r, limit, cap in heavy:
            evidence.append(ev(r, r.key, r.labels, r.value, limit, ">=",
                               f"{r.value / cap:.0%} of the link" if cap else ""))
        yield Candidate(sub(gpus=gl), WARN, tuple(evidence),
                        title=f"TP group {gl} all-reduces over PCIe ({worst_path[2]})")


# how far apart two GPUs are on the PCIe tree (nvidia-smi topo -m)
_PATH_RANK = {"PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5}


# ---- PAR-003 DP engines unevenly loaded ---------------------------------------------------
def dp_unbalanced(ctx: Context) -> Iterator[Candidate]:
    t = ctx.t
    # engines compare with their peers: the same model and the same P/D role (a prefill
    # instance runs few requests briefly, a decode instance many for long: not imbalance)
    by_model: dict[tuple[str, str], list] = {}
    for r in ctx.ok("server.requests_running"):
        role = ctx.peer("server.disagg_role", r.labels)
        by_model.setdefault((r.label("model"), (role.text or "") if role else ""),
                            []).append(r)
    for (model, _), engines in sorted(by_model.items()):
        if len(engines) < 2:
            continue
        loads = []
        for r in engines:
            w = ctx.peer("server.requests_waiting", r.labels)
            kv = ctx.peer("kv.usage_ratio", r.labels)
            loads.append((r.value + (w.value if w is not None else 0.0), r,
                          kv.value if kv is not None else None))
        hi = max(loads, key=lambda x: x[0])
        lo = min(loads, key=lambda x: x[0])
        by_load = hi[0] - lo[0] >= t.dp_load_min_gap and \
            hi[0] >= t.dp_load_ratio * (lo[0] + 1.0)
        kvs = [(kv, r) for _, r, kv in loads if kv is not None]
        kv_hi = max(kvs, key=lambda x: x[0]) if kvs else None
        kv_lo = min(kvs, key=lambda x: x[0]) if kvs else None
        by_kv = kv_hi is not None and kv_lo is not None and \
            kv_hi[0] - kv_lo[0] >= t.dp_kv_gap and kv_hi[0] >= 0.5
        if not (by_load or by_kv):
            continue
        evidence = []
        if by_load:
            evidence.append(Evidence("server.requests_running", hi[1].labels, hi[0],
                                     t.dp_load_ratio * (lo[0] + 1.0), ">=", "count",
                                     f"running+waiting {hi[0]:.0f} against {lo[0]:.0f} on "
                                     f"{_who(lo[1])}"))
        if by_kv and kv_hi is not None and kv_lo is not None:
            evidence.append(Evidence("kv.usage_ratio", kv_hi[1].labels, kv_hi[0],
                                     kv_lo[0] + t.dp_kv_gap, ">=", "ratio",
                                     f"against {kv_lo[0]:.0%} on {_who(kv_lo[1])}"))
        yield Candidate(sub(model=model) if model else (), WARN, tuple(evidence),
                        title=f"data-parallel engines unevenly loaded ({_who(hi[1])} busiest)")


def _who(r) -> str:
    parts = [f"{k} {r.label(k)}" for k in ("instance", "engine") if r.label(k)]
    return ", ".join(parts) or "one engine"


# ---- PAR-004 TTFT dominated by the KV transfer (disaggregated prefill/decode) ----------------
# Judged on window means (pd.ttft_split_seconds: sum / count of each histogram's bucket
# deltas), not on p99s.  The transfer histogram (NIXL's buckets) and the TTFT histogram
# (vLLM's) have different bucket layouts, so their p99s are interpolated on different
# grids and either may be only a bucket bound (qbound.py): a 0.05 s transfer in NIXL's
# 1 ms .. 1 s bucket "p99s" at ~0.99 s.  Comparing two such numbers says little, and a
# share of time is a ratio of means anyway (means add up, percentiles do not).  The p99s
# stay in the evidence as context, each marked when it is only a bound.
def transfer_dominates_ttft(ctx: Context) -> Iterator[Candidate]:
    """On a decode instance: the mean KV transfer is at least ``kv_transfer_ttft_share`` of
    the mean TTFT (the client's: the prefill instance's TTFT + this instance's, when the
    prefill instance is read; else this instance's own, which includes the transfer)."""
    t = ctx.t
    for r in ctx.derived_of(SPLIT):
        if r.label("part") != "transfer":
            continue
        pair = tuple((k, v) for k, v in r.labels if k != "part")
        ttft_labels = tuple((k, v) for k, v in pair if k != "prefill")
        n = ctx.derived("latency.observations",
                        make_labels(ttft_labels, of="latency.ttft_seconds"))
        if n is None or n < t.slo_min_requests:
            continue
        dec = ctx.derived(SPLIT, make_labels(pair, part="decode"))
        if dec is None:
            continue   # not split (no first token, or transfers outside this TTFT)
        pre = ctx.derived(SPLIT, make_labels(pair, part="prefill"))
        xfer = r.value
        whole = xfer + dec + (pre or 0.0)
        if whole <= 0 or xfer < t.kv_transfer_ttft_share * whole:
            continue
        of = ("of the mean TTFT (prefill instance + transfer + decode instance)"
              if pre is not None else
              "of this decode instance's mean TTFT (the prefill side is not measured: "
              "its share of the client's TTFT is lower)")
        evidence = [
            Evidence(SPLIT, r.labels, xfer, round(t.kv_transfer_ttft_share * whole, 6),
                     ">=", "s", f"{xfer / whole:.0%} {of}; window means over "
                                f"{ctx.window:.0f} s, {n:.0f} first tokens"),
            Evidence(SPLIT, make_labels(pair, part="decode"), dec, None, "", "s",
                     "the decode instance's TTFT less the transfer"),
        ]
        if pre is not None:
            evidence.append(Evidence(SPLIT, make_labels(pair, part="prefill"), pre, None,
                                     "", "s", "the prefill instance's TTFT"))
        for key in ("latency.kv_transfer_seconds", "latency.ttft_seconds"):
            q = make_labels(ttft_labels, quantile=0.99)
            v = ctx.derived(key, q)
            if v is not None:
                b = ctx.derived_bound(key, q)
                evidence.append(Evidence(key, q, v, None, "", "s",
                                         "context: p99s of histograms with different "
                                         "buckets are not compared" +
                                         ("; a bucket bound, not a measurement" if b else ""),
                                         b))
        yield Candidate(server_subject(ttft_labels), WARN, tuple(evidence),
                        title=f"KV transfer is {xfer / whole:.0%} of mean TTFT")


# ---- PAR-005..PAR-007 after llm-d's P/D disaggregation alerts ---------------------------
# llm-d/llm-d docs/monitoring/prometheus-alerting-rules.yaml (group llm-d-pd-disaggregation)
# selects prefill and decode pods by name; infertop knows each engine's role instead
# (SGLang's engine_type label, vLLM's --kv-transfer-config kv_role: server.disagg_role).
def _by_role(ctx: Context, key: str) -> dict[str, list]:
    """Readings of ``key`` grouped by their engine's P/D role (prefill, decode; "both"
    counts as neither: a kv_both engine is not one side of a pair).

    Not pdsplit.roles, on purpose: that gives one role per *instance* (its first
    server.disagg_role with a text), which is what the TTFT split needs (it pairs
    instances); here each reading takes the role of its own engine (``ctx.peer``: the
    same engine/model labels), so engines of one SGLang instance with different
    engine_type labels fall on their own sides.  The one-instance fallback also counts
    the instances of ``key``'s own readings, those this rule judges, where roles counts
    the instances of requests_running and TTFT."""
    readings = ctx.ok(key)
    # the host-wide command-line setting names a role only while one instance is in view
    # (as pdsplit.roles): with several, a remote peer would take the local server's role
    one = len({r.label("instance") for r in readings}) <= 1
    fallback = ctx.setting("disagg_role") if one else None
    out: dict[str, list] = {}
    for r in readings:
        role = ctx.peer("server.disagg_role", r.labels)
        name = role.text if role is not None and role.text else fallback
        if name in ("prefill", "decode"):
            out.setdefault(name, []).append(r)
    return out


def pd_imbalance(ctx: Context) -> Iterator[Candidate]:
    """Mean running requests of the prefill engines over that of the decode engines
    (llm-d's avg(prefill) / avg(decode) > 3)."""
    t = ctx.t
    sides = _by_role(ctx, "server.requests_running")
    if not sides.get("prefill") or not sides.get("decode"):
        return
    pre = sum(r.value for r in sides["prefill"]) / len(sides["prefill"])
    dec = sum(r.value for r in sides["decode"]) / len(sides["decode"])
    if pre <= 0:
        return
    ratio = pre / dec if dec > 0 else math.inf   # PromQL's x/0 is +Inf, as llm-d's
    if not ctx.past(ratio, ">", t.pd_running_ratio, ()):
        return
    busiest = max(sides["prefill"], key=lambda r: r.value)
    yield Candidate((), WARN, (
        Evidence("server.requests_running", busiest.labels, ratio, t.pd_running_ratio, ">",
                 "factor", f"prefill engines run {pre:.1f} requests on average, decode "
                           f"engines {dec:.1f} ({len(sides['prefill'])} prefill, "
                           f"{len(sides['decode'])} decode)"),
    ), title=f"prefill side {ratio:.1f}x busier than decode" if math.isfinite(ratio)
        else "prefill side busy, decode side idle")


def prefill_queue(ctx: Context) -> Iterator[Candidate]:
    """A prefill engine with more than ``pd_prefill_queue`` requests waiting."""
    t = ctx.t
    for r in _by_role(ctx, "server.requests_waiting").get("prefill", ()):
        subject = server_subject(r.labels)
        if not ctx.past(r.value, ">", t.pd_prefill_queue, subject):
            continue
        yield Candidate(subject, WARN, (
            ev(r, r.key, r.labels, r.value, t.pd_prefill_queue, ">",
               "requests waiting on a prefill engine: each waits before its KV even "
               "starts to move"),), title=f"{r.value:.0f} requests queued for prefill")


def decode_kv_full(ctx: Context) -> Iterator[Candidate]:
    """A decode engine whose KV cache is past ``pd_decode_kv_full``."""
    t = ctx.t
    for r in _by_role(ctx, "kv.usage_ratio").get("decode", ()):
        subject = server_subject(r.labels)
        if not ctx.past(r.value, ">", t.pd_decode_kv_full, subject):
            continue
        yield Candidate(subject, Severity.CRIT, (
            ev(r, r.key, r.labels, r.value, t.pd_decode_kv_full, ">",
               "KV usage of a decode engine: incoming transfers find no free blocks"),),
            title=f"decode engine's KV cache {r.value:.0%} full")


RULES = (
    Rule(RuleSpec(
        "PAR-001", PAR, "TP straggler",
        "Inside one tensor-parallel group (GPUs of one server, split by tensor_parallel_size) "
        "SM activity (or util without GPM) differs by more than the spread while the group "
        "is busy: every step waits for the slowest rank.",
        (any_of(K.gpu.sm_active_ratio, K.gpu.util_ratio),
         any_of(K.process.gpu_mem_bytes, K.server.setting.where(name="tensor_parallel_size"))),
        {"thresholds.tp_imbalance": None, "thresholds.tp_busy_min": None},
        "check the odd GPU: its clocks and throttling (HW-003), PCIe link width, other "
        "processes on it",
        optional=(K.process.info, K.gpu.throttle_reasons), raise_after=JUDGED_RAISE_AFTER,
        supersedes=("HW-001",),
        judged="median over diagnosis.judge_window of each GPU's activity, then their "
               "spread"), tp_straggler),
    Rule(RuleSpec(
        "PAR-002", PAR, "TP over PCIe without NVLink",
        "A tensor-parallel group whose GPUs reach each other over PCIe (PIX/PXB/PHB/NODE/SYS, "
        "no NVLink) moves heavy traffic over it: all-reduces compete for the bus.",
        (K.gpu.topology, any_of(K.gpu.pcie_tx_bytes_per_second, K.gpu.pcie_rx_bytes_per_second),
         any_of(K.process.gpu_mem_bytes, K.server.setting.where(name="tensor_parallel_size"))),
        {"thresholds.tp_pcie_heavy_ratio": None, "thresholds.tp_pcie_heavy_bytes": None},
        "place the TP group on NVLink-connected GPUs, or use fewer TP ranks / pipeline "
        "parallelism across PCIe",
        optional=(K.gpu.pcie_link_gen, K.gpu.pcie_link_width),
        supersedes=("HW-004", "HW-001"), judged="each tick's PCIe rates (raise_after holds them)"),
        tp_over_pcie),
    Rule(RuleSpec(
        "PAR-003", PAR, "DP engines unevenly loaded",
        "Data-parallel engines (or replicas) of one model, and of one P/D role, carry very "
        "different loads (running+waiting) or KV usage: the load balancer favours some.",
        (K.server.requests_running,),
        {"thresholds.dp_load_ratio": None, "thresholds.dp_load_min_gap": None,
         "thresholds.dp_kv_gap": None},
        "check the router's policy (least-loaded instead of round-robin/sticky sessions); "
        "with vLLM DP, check the engines' KV sizes match",
        optional=(K.server.requests_waiting, K.kv.usage_ratio),
        judged="each tick's running+waiting and KV usage per engine"), dp_unbalanced),
    Rule(RuleSpec(
        "PAR-004", PAR, "TTFT dominated by the KV transfer",
        "Disaggregated prefill/decode: the mean time to move a request's KV from the "
        "prefill to the decode instance is a large share of the mean TTFT (vLLM NIXL, "
        "SGLang PD transfer histograms; the TTFT split of pd.ttft_split_seconds): each "
        "side looks fine, the wire between them does not.  Means, not p99s: the two "
        "histograms' buckets differ and percentiles do not add up.",
        (K.latency.kv_transfer_seconds, K.latency.ttft_seconds),
        {"thresholds.kv_transfer_ttft_share": None, "thresholds.slo_min_requests": None},
        "put the pair on a fast path (NIXL/UCX over RDMA or NVLink, not TCP; same rack), "
        "check the transfer backend's logs for retries, shrink the KV (FP8 KV cache)",
        optional=(K.server.disagg_role,),
        judged="window means over diagnosis.window (pd.ttft_split_seconds, as on screen)"),
        transfer_dominates_ttft),
    Rule(RuleSpec(
        "PAR-005", PAR, "Prefill side much busier than decode",
        "Disaggregated prefill/decode: the prefill engines' mean running requests is more "
        "than pd_running_ratio times the decode engines' for 10 minutes (llm-d's "
        "LLMDPrefillDecodeImbalance): the pair is sized for a shorter prompt than it gets.",
        (K.server.requests_running,
         any_of(K.server.disagg_role, K.server.setting.where(name="disagg_role"))),
        {"thresholds.pd_running_ratio": None},
        "add prefill instances (or move GPUs from decode to prefill); let the autoscaler "
        "watch the prefill queue; check the prompt/output length mix",
        raise_after=600.0,
        judged="each tick's running requests per role, held 10 min (llm-d's for: 10m)"),
        pd_imbalance),
    Rule(RuleSpec(
        "PAR-006", PAR, "Prefill queue saturated",
        "A prefill engine of a disaggregated pair has more than pd_prefill_queue requests "
        "waiting for 5 minutes (llm-d's LLMDPrefillQueueSaturation): TTFT grows with the "
        "queue before any KV moves.",
        (K.server.requests_waiting,
         any_of(K.server.disagg_role, K.server.setting.where(name="disagg_role"))),
        {"thresholds.pd_prefill_queue": None},
        "scale the prefill instances now; enable prefix caching (less to prefill); admission "
        "control in front of the router",
        raise_after=300.0,
        judged="each tick's waiting requests, held 5 min (llm-d's for: 5m)"), prefill_queue),
    Rule(RuleSpec(
        "PAR-007", PAR, "Decode KV cache critical",
        "A decode engine of a disaggregated pair holds more than pd_decode_kv_full of its KV "
        "cache for 5 minutes (llm-d's LLMDDecodeKVCacheCritical, critical): transferred KV "
        "has nowhere to land, requests stall on the decode side or are preempted.",
        (K.kv.usage_ratio,
         any_of(K.server.disagg_role, K.server.setting.where(name="disagg_role"))),
        {"thresholds.pd_decode_kv_full": None},
        "add decode instances or KV room (--gpu-memory-utilization, FP8 KV cache), cap "
        "--max-num-seqs on decode, route fewer requests to this decode engine",
        raise_after=300.0,
        judged="each tick's KV usage, held 5 min (llm-d's for: 5m)"), decode_kv_full),
)
