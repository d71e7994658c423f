"""Memory rules: KV-cache pressure and leaks, GPU memory headroom, duplicated weights."""

from __future__ import annotations

import os
from collections.abc import Iterator

from ..findings import Evidence, RuleSpec, Severity
from ..key_symbols import K
from ..keysym import any_of
from ..model import Layer
from ..servers import registry
from ..units import fmt_bytes
from .base import (
    JUDGED_RAISE_AFTER,
    QUEUED_SHARE,
    Candidate,
    Context,
    Rule,
    ev,
    server_subject,
    sub,
)
from .window import covered, value_at

MEM = Layer.MEMORY
NOTICE, WARN, CRIT = Severity.NOTICE, Severity.WARN, Severity.CRIT


# with preemptions or a queue, a KV cache full on this share of the judge window's ticks
# is pressure (a single full tick is not: it is 10 %)
PREEMPT_FULL_SHARE = 0.3


# ---- MEM-001 KV pressure --------------------------------------------------------------
def kv_pressure(ctx: Context) -> Iterator[Candidate]:
    """KV usage is judged by its median over ``judge_window`` (a small cache moves in whole
    blocks: 16 blocks read 0.875, 0.94, 1.0 from tick to tick), the queue by the share of
    those ticks with a request waiting (a count of 0 or 1 has no useful median); the
    preemption rate is the derived one over the window (vLLM preempts only when a step
    cannot get a block, so any preemption with a near-full cache is pressure)."""
    t = ctx.t
    for kv in ctx.ok("kv.usage_ratio"):
        subject = server_subject(kv.labels)
        rate, pre_labels, over = None, kv.labels, ""
        pr = ctx.peer("server.preemptions_total", kv.labels)
        retracting = None
        if pr is not None:  # the derived (on-screen) rate over the window, not recomputed:
            # Prometheus's rate() (derive.JUDGED_RATES, docs/rules.md#windows)
            pre_labels = pr.labels
            rate = ctx.derived("server.preemptions_per_second", pr.labels)
            over = ctx.rate_words(pr.key, pr.labels)
        else:
            # SGLang 0.5.23 has no preemption counter: its retraction gauge (requests sent
            # back to the queue, KV freed, in the last step) on any tick of the window
            ret = ctx.peer("server.requests_retracted", kv.labels)
            got = ctx.share(ret, 1.0) if ret is not None else None
            if ret is not None and got:
                retracting = (ret, got)
        preempting = (rate is not None and rate > 0) or retracting is not None
        usage = ctx.median(kv)
        if ctx.past(usage, ">=", t.kv_pressure_ratio, subject):
            kv_ev = ev(kv, kv.key, kv.labels, usage, t.kv_pressure_ratio, ">=", ctx.median_note)
        else:
            # a cache under pressure hits full again and again but its median may sit
            # below (15 blocks read 0.67..1.0): full on enough of the window's ticks, with
            # preemptions or a queue (tested below), is pressure
            full = ctx.share(kv, t.kv_pressure_ratio)
            if not ctx.past(full, ">=", PREEMPT_FULL_SHARE, subject):
                continue
            kv_ev = Evidence(kv.key, kv.labels, full, PREEMPT_FULL_SHARE, ">=", "ratio",
                             f"share of the ticks of the last {ctx.judge_window:g} s at >= "
                             f"{t.kv_pressure_ratio:.0%}; {kv.value:.0%} now")
        waiting = ctx.peer("server.requests_waiting", kv.labels)
        queue = ctx.share(waiting, 1.0) if waiting is not None else None
        queued = ctx.past(queue, ">=", QUEUED_SHARE, subject)
        if not (preempting or queued):
            continue
        evidence = [kv_ev]
        if retracting is not None:
            ret, got = retracting
            evidence.append(Evidence(ret.key, ret.labels, got, 0, ">", "ratio",
                                     f"share of the ticks of the last {ctx.judge_window:g} s "
                                     f"with requests retracted (the server's preemption; it "
                                     f"counts none); {ret.value:.0f} now"))
        elif preempting:
            evidence.append(ev(None, "server.preemptions_per_second", pre_labels, rate, 0, ">",
                               over))
        if queued and waiting is not None and queue is not None:
            evidence.append(ctx.queue_evidence(waiting, queue, 1.0))
        sev = CRIT if rate is not None and rate >= t.kv_preempt_crit_per_second else WARN
        # no GPU reading (a CPU backend, a box without GPUs, a remote server): no "add GPUs"
        gpus = ctx.per_gpu("gpu.util_ratio") or ctx.per_gpu("gpu.sm_active_ratio")
        yield Candidate(subject, sev, tuple(evidence),
                        remedy=None if gpus else NO_GPU_KV_REMEDY)


NO_GPU_KV_REMEDY = ("lower max concurrent sequences (--max-num-seqs) or --max-model-len; give "
                    "the KV cache more memory (--gpu-memory-utilization; vLLM's CPU backend: "
                    "VLLM_CPU_KVCACHE_SPACE; an FP8 KV cache)")


# ---- MEM-002 KV leak ------------------------------------------------------------------
def kv_leak(ctx: Context) -> Iterator[Candidate]:
    t = ctx.t
    for kv in ctx.ok("kv.usage_ratio"):
        subject = server_subject(kv.labels)
        usage = ctx.median(kv)
        if not ctx.past(usage, ">=", t.kv_leak_ratio, subject):
            continue
        running = ctx.peer("server.requests_running", kv.labels)
        if running is None or running.value > 0:
            continue  # idle now: one running request is enough to explain the blocks
        waiting = ctx.peer("server.requests_waiting", kv.labels)
        if waiting is not None and waiting.value > 0:
            continue
        evidence = [ev(kv, kv.key, kv.labels, usage, t.kv_leak_ratio, ">=", ctx.median_note),
                    ev(running, running.key, running.labels, running.value, 0, "==",
                       "no request running")]
        if waiting is not None:
            evidence.append(ev(waiting, waiting.key, waiting.labels, waiting.value, 0, "=="))
        yield Candidate(subject, WARN, tuple(evidence))


# ---- MEM-003 GPU memory headroom low or growing -----------------------------------------
# usage this far above a server's own reservation (gpu_memory_utilization) is not it: the
# reservation is a share of the card, the CUDA context and activations add a little
RESERVE_SLACK = 0.05


def mem_headroom(ctx: Context) -> Iterator[Candidate]:
    """Growth and level are judged apart: growth that stopped at a full card is still a
    full card, so usage beyond what the server reserves (or near the card's total with no
    reservation to explain it) holds the finding for as long as it lasts."""
    t = ctx.t
    totals = ctx.per_gpu("gpu.mem_total_bytes")
    reserved = _reservation(ctx)          # the server's, the same for every GPU
    for gpu, used in ctx.per_gpu("gpu.mem_used_bytes").items():
        tot = totals.get(gpu)
        if tot is None or not tot.value:
            continue
        total = tot.value
        used_share = min(1.0, max(0.0, used.value / total))
        evidence, sev = [], None
        growth = _growth(ctx, used, total)
        if growth is not None:
            rise, span, eta = growth
            sev = CRIT if eta <= t.mem_oom_eta_seconds else WARN
            evidence.append(ev(used, used.key, used.labels, rise, t.mem_growth_ratio * total, ">=",
                               f"+{fmt_bytes(rise)} in {span:.0f} s, steadily; full in "
                               f"~{eta:.0f} s at this pace"))
        level = None
        low = 1.0 - used_share < t.mem_headroom_ratio
        if reserved is not None and used_share > reserved[0] + RESERVE_SLACK and low:
            # beyond the reservation with little left: a neighbour's few GiB on a card
            # with a quarter free is no incident, a leak towards the card's size is
            share, name = reserved
            level = "beyond the reservation"
            evidence.append(Evidence("gpu.mem_used_bytes", used.labels, used_share,
                                     share + RESERVE_SLACK, ">", "ratio",
                                     f"{_free_note(used.value, total)}; the server "
                                     f"reserves {share:.0%} ({name}): something else "
                                     "holds the rest"))
            sev = max(sev or WARN, CRIT if used_share >= t.mem_full_ratio else WARN)
        elif reserved is None and used_share >= t.mem_full_ratio:
            level = "nearly full"
            evidence.append(Evidence("gpu.mem_used_bytes", used.labels, used_share,
                                     t.mem_full_ratio, ">=", "ratio",
                                     f"{_free_note(used.value, total)}; no reservation "
                                     "setting explains it"))
            sev = CRIT
        elif low and not _preallocated(ctx, gpu, used_share, reserved):
            evidence.append(Evidence("gpu.mem_used_bytes", used.labels, used_share,
                                     1.0 - t.mem_headroom_ratio, ">", "ratio",
                                     f"{_free_note(used.value, total)} (servers that "
                                     "pre-allocate a KV cache run here by design)"))
            sev = sev or NOTICE
        if sev is None:
            continue
        if growth:
            title = f"GPU {gpu}: memory growing steadily"
        elif level:
            title = f"GPU {gpu}: memory {used_share:.1%} used, {level}"
        else:
            title = f"GPU {gpu}: memory headroom low"
        remedy = ("memory grows with no plateau: a leak or fragmentation (e.g. a second "
                  "process, growing CUDA graphs); find the process (per-process GPU memory) "
                  "before it hits OOM" if growth else
                  "memory beyond what the server reserved: a leak outside its pool, "
                  "fragmentation or another process; find it (per-process GPU memory) "
                  "before the next allocation fails with out-of-memory" if level else
                  "little free memory: a new process or a larger batch may OOM; lower "
                  "--gpu-memory-utilization if other work must share this GPU")
        yield Candidate(sub(gpu=gpu), sev, tuple(evidence), title=title, remedy=remedy)


PREALLOC_SETTINGS = ("gpu_memory_utilization", "mem_fraction_static")


def _reservation(ctx: Context) -> tuple[float, str] | None:
    """(share of the card, setting name) the server was told to reserve, when known."""
    for name in PREALLOC_SETTINGS:
        text = ctx.setting(name)
        if text is None:
            text = next((r.text for r in ctx.all("kv.config")
                         if r.label("name") == name and r.text), None)
        try:
            share = float(text) if text is not None else None
        except ValueError:
            share = None
        if share is not None and 0.0 < share <= 1.0:
            return share, name
    return None


def _free_note(used: float, total: float) -> str:
    return f"{fmt_bytes(max(0.0, total - used))} free of {fmt_bytes(total)}"


def _preallocated(ctx: Context, gpu: str, used_share: float,
                  reserved: tuple[float, str] | None) -> bool:
    """True when low headroom is a server's own reservation: a vLLM/SGLang/TGI/TRT-LLM
    process holds memory on this GPU, or usage matches the reservation it was given
    (``reserved``: ``_reservation(ctx)``)."""
    if reserved is not None:
        return used_share <= reserved[0] + RESERVE_SLACK
    for r in ctx.ok("process.gpu_mem_bytes"):
        if r.label("gpu") == gpu:
            p = ctx.procs.get(r.label("pid"))
            # the kind says whether it reserves most of a GPU for its KV cache by design
            if p is not None and registry.is_preallocating(p.kind):
                return True
    return False


def _growth(ctx: Context, used, total: float) -> tuple[float, float, float] | None:
    """(rise, seconds, seconds to full) when used memory rose steadily over the window."""
    t = ctx.t
    s = ctx.series(used.key, used.labels)
    w = t.mem_growth_window
    if s is None or not covered(s, w / 2, ctx.now):
        return None
    first_t = s.first_time()
    if first_t is None:
        return None
    start_t = max(ctx.now - w, first_t)
    # the window's first value moves slowly: look it up once per 5 s, not every tick
    memo = ctx.state.setdefault("mem003", {})
    slot = int(start_t // 5)
    got = memo.get(used.labels)
    if got is None or got[0] != slot:
        got = memo[used.labels] = (slot, value_at(s, start_t))
    first = got[1]
    rise = used.value - first if first is not None else 0.0
    if rise < t.mem_growth_ratio * total:  # cheap test first: the usual answer
        return None
    n = 6
    span = ctx.now - start_t
    at = [value_at(s, start_t + span * k / n) for k in range(n + 1)]
    vals = [v for v in at if v is not None]
    if len(vals) < len(at):
        return None
    # the rise shown is over exactly ``span``: the memo's first value can be up to 5 s
    # older than the window's start (it overstated a steady rise by up to 4 %)
    rise = used.value - vals[0]
    tol = 0.002 * total
    steps = [b - a for a, b in zip(vals, vals[1:])]
    if any(d < -tol for d in steps):
        return None  # went down on the way: a load that came and went, not growth
    if sum(d > tol / 4 for d in steps) < (2 * n) // 3:
        return None  # rose in one jump (a model or a batch loaded): a step, not growth
    slope = rise / span if span > 0 else 0.0
    eta = (total - used.value) / slope if slope > 0 else float("inf")
    return rise, span, eta


# ---- MEM-004 same model's weights twice on one GPU ---------------------------------------
_MODEL_FLAGS = ("--model", "--model-path", "--model-id", "-m")


def parse_model(cmdline: str) -> str | None:
    """The model named on a server's command line (``--model X``, ``serve X``, llama.cpp's
    ``-m X``; Python's own ``python -m module`` is not a model)."""
    toks = cmdline.split()
    for i, tok in enumerate(toks):
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if tok in _MODEL_FLAGS and nxt:
            if tok == "-m" and i == 1 and os.path.basename(toks[0]).startswith("python"):
                continue
            return nxt.rstrip("/")
        for flag in _MODEL_FLAGS[:3]:
            if tok.startswith(flag + "="):
                return tok.split("=", 1)[1].rstrip("/")
        if tok == "serve" and nxt and not nxt.startswith("-"):
            return nxt.rstrip("/")
    return None


def model_of(ctx: Context, pid: str) -> str | None:
    """The model a process serves, from its command line or its nearest ancestor's."""
    seen = set()
    cur = pid
    while cur in ctx.procs and cur not in seen:
        seen.add(cur)
        model = parse_model(ctx.procs[cur].cmdline)
        if model:
            return model
        cur = ctx.procs[cur].ppid
    return None


def weights_twice(ctx: Context) -> Iterator[Candidate]:
    t = ctx.t
    by_gpu: dict[str, list] = {}
    for r in ctx.ok("process.gpu_mem_bytes"):
        if r.label("pid") and r.label("gpu") and r.value >= t.weights_min_bytes:
            by_gpu.setdefault(r.label("gpu"), []).append(r)
    for gpu, rs in sorted(by_gpu.items()):
        if len(rs) < 2:
            continue
        groups: dict[str, list] = {}
        for r in rs:
            pid = r.label("pid")
            if pid not in ctx.procs:
                continue
            model = model_of(ctx, pid)
            # one server serves one model: two of its processes on a GPU hold it twice
            ident = f"model {model}" if model else f"server pid {ctx.root_of(pid)}"
            groups.setdefault(ident, []).append(r)
        for ident, same in groups.items():
            if len(same) < 2:
                continue
            evidence = tuple(
                ev(r, r.key, r.labels, r.value, t.weights_min_bytes, ">=",
                   f"pid {r.label('pid')} ({ctx.procs[r.label('pid')].name}), {ident}")
                for r in same)
            pids = ", ".join(r.label("pid") for r in same)
            yield Candidate(sub(gpu=gpu), WARN, evidence,
                            title=f"GPU {gpu}: {ident} loaded twice (pids {pids})")
            break


# ---- MEM-005 prefix-cache thrash (KV-cache events) --------------------------------------
def prefix_thrash(ctx: Context) -> Iterator[Candidate]:
    """From the KV-cache events: of the blocks evicted over the window, the share stored
    again within the tracker's restore window (derived ``kv.prefix_thrash_ratio``).  The
    cache evicts prefixes that the traffic asks for again: each is recomputed."""
    t = ctx.t
    for r in ctx.derived_of("kv.prefix_thrash_ratio"):
        s = ctx.series("kv.event_blocks_evicted_total", r.labels)
        inc = s.increase(ctx.window) if s is not None else None
        evicted = inc[0] if inc is not None else 0.0
        if evicted < t.thrash_min_evictions:
            continue
        if not ctx.past(r.value, ">=", t.thrash_ratio, server_subject(r.labels)):
            continue
        yield Candidate(server_subject(r.labels), WARN, (
            Evidence(r.key, r.labels, r.value, t.thrash_ratio, ">=", "ratio",
                     f"{r.value * evicted:.0f} of {evicted:.0f} blocks evicted "
                     f"{ctx.window_words(s)} were stored again soon after"),
        ), title=f"prefix-cache thrash: {r.value:.0%} of evicted blocks recomputed")


RULES = (
    Rule(RuleSpec(
        "MEM-001", MEM, "KV-cache pressure",
        "KV-cache usage near full while requests are preempted (rate over the window, not the "
        "lifetime total) or wait in the queue: concurrency exceeds what the cache holds.",
        (K.kv.usage_ratio,
         any_of(K.server.preemptions_total, K.server.requests_retracted,
                K.server.requests_waiting)),
        {"thresholds.kv_pressure_ratio": None, "thresholds.kv_preempt_crit_per_second": None,
         "diagnosis.window": None},
        "lower max concurrent sequences (--max-num-seqs) or --max-model-len; give the KV cache "
        "more memory (--gpu-memory-utilization, FP8 KV cache) or add GPUs",
        raise_after=JUDGED_RAISE_AFTER,
        judged="median over diagnosis.judge_window of KV usage, or KV at the threshold on "
               "30 % of its ticks; a queue on at least half of its ticks; "
               "preemptions per second derived over diagnosis.window"), kv_pressure),
    Rule(RuleSpec(
        "MEM-002", MEM, "KV-cache leak",
        "KV-cache usage stays up while no request runs or waits: blocks that are never freed "
        "(aborted requests, a scheduler bug).",
        (K.kv.usage_ratio, K.server.requests_running),
        {"thresholds.kv_leak_ratio": None},
        "note the server version and recent aborts, then restart the engine; report it "
        "upstream",
        optional=(K.server.requests_waiting,), raise_after=30.0,
        judged="median over diagnosis.judge_window of KV usage; running/waiting each tick "
               "(idle means idle on every tick of the 30 s)",
        notes="vLLM counts cached-but-free prefix blocks as free, so an idle server reads ~0 "
              "(the rule needs 30 s of idleness by default)."), kv_leak),
    Rule(RuleSpec(
        "MEM-003", MEM, "GPU memory headroom low or growing",
        "Free GPU memory under the headroom share (notice; not when a vLLM/SGLang/TGI/TRT-LLM "
        "process holds it or usage matches its gpu_memory_utilization/mem_fraction_static: "
        "that reservation is by design); usage beyond that reservation with free memory "
        "under the headroom share (warning; critical near the card's total), or near the "
        "total with no reservation known (critical), for as long as it lasts; used memory "
        "rising steadily over the window (warning; critical when full soon at that pace).",
        (K.gpu.mem_used_bytes, K.gpu.mem_total_bytes),
        {"thresholds.mem_headroom_ratio": None, "thresholds.mem_growth_window": None,
         "thresholds.mem_growth_ratio": None, "thresholds.mem_oom_eta_seconds": None,
         "thresholds.mem_full_ratio": None},
        "find the process that grows (per-process GPU memory) before it hits OOM; lower "
        "--gpu-memory-utilization if other work shares the GPU",
        optional=(K.process.gpu_mem_bytes, K.process.info, K.kv.config),
        judged="each tick's used memory against the reservation and the card (it does "
               "not jitter); growth over "
               "thresholds.mem_growth_window"), mem_headroom),
    Rule(RuleSpec(
        "MEM-004", MEM, "weights held twice on one GPU",
        "Two processes each hold a model-sized share of one GPU's memory and serve the same "
        "model (same --model, or the same server's process tree).",
        (K.process.gpu_mem_bytes, K.process.info),
        {"thresholds.weights_min_bytes": None},
        "stop the duplicate server, or give each server its own GPUs (CUDA_VISIBLE_DEVICES)",
        judged="each tick's per-process GPU memory (it does not jitter)"),
        weights_twice),
    Rule(RuleSpec(
        "MEM-005", MEM, "prefix-cache thrash",
        "From the server's KV-cache events: a large share of the KV blocks evicted over the "
        "window were stored again soon after (the same prefix recomputed): the prefix cache "
        "is too small for the traffic's working set, or the traffic's prefixes are spread "
        "over replicas that each cache all of them.",
        (K.kv.event_blocks_evicted_total, K.kv.event_blocks_restored_total),
        {"thresholds.thrash_ratio": None, "thresholds.thrash_min_evictions": None,
         "diagnosis.window": None},
        "give the KV cache more room (--gpu-memory-utilization, FP8 KV cache, a shorter "
        "--max-model-len, CPU offload of KV blocks) or route by prefix (cache-aware routing: "
        "llm-d's prefix-cache scorer, SGLang router) so each prefix stays on one replica",
        judged="ratio over diagnosis.window (derived kv.prefix_thrash_ratio); a block counts "
               "as thrash when stored again within 60 s of its eviction"), prefix_thrash),
)
