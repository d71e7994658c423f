"""Kernel rules: is the GPU fed fast enough, and does prefill scale as it should."""

from __future__ import annotations

import math
from collections.abc import Iterator

from ..findings import Evidence, RuleSpec, Severity
from ..history import Series
from ..key_symbols import K
from ..keysym import any_of
from ..model import Layer
from .base import (
    ENGINE_ROLES,
    JUDGED_RAISE_AFTER,
    Candidate,
    Context,
    Rule,
    ev,
    server_subject,
    split_slope,
    sub,
)
from .window import point_at

KRN = Layer.KERNELS
WARN = Severity.WARN


# ---- KRN-001 launch-bound decode ------------------------------------------------------
def launch_bound(ctx: Context) -> Iterator[Candidate]:
    t = ctx.t
    threads, procs = ctx.ok("thread.cpu_ratio"), ctx.ok("process.cpu_ratio")
    if not any(r.value >= 0.5 * t.launch_thread_cpu_min for r in (threads or procs)):
        return  # nothing near a full core: the usual answer, found cheaply
    engine_pids = {pid for pid, p in ctx.procs.items() if p.role in ENGINE_ROLES}

    def of_engine(rs):
        return [r for r in rs if not engine_pids or r.label("pid") in engine_pids]

    hot = max(of_engine(threads), key=lambda r: r.value, default=None)
    if hot is None:  # no per-thread CPU: a process at one core is the next best sign
        hot = max(of_engine(procs), key=lambda r: r.value, default=None)
    if hot is None:
        return
    sm = ctx.per_gpu("gpu.sm_active_ratio")
    mine = ctx.gpus_by_root().get(ctx.root_of(hot.label("pid")))
    gpus = [g for g in (mine or sm) if g in sm]
    if not gpus:
        return
    subject = sub(gpus=",".join(gpus))
    hot_cpu = ctx.median(hot)
    if not ctx.past(hot_cpu, ">=", t.launch_thread_cpu_min, subject):
        return
    mean_sm = ctx.median_of([sm[g] for g in gpus])
    if not ctx.past(mean_sm, "<=", t.launch_sm_active_max, subject):
        return
    running = ctx.ok("server.requests_running")
    if running:
        batch = sum(r.value for r in running)
        if batch < 1 or batch > t.launch_batch_max:
            return
        batch_ev = ev(running[0], "server.requests_running", running[0].labels if
                      len(running) == 1 else (), batch, t.launch_batch_max, "<=",
                      "small decode batch")
    else:
        steps = ctx.derived_of("server.iteration_tokens_mean")
        if not steps:
            return
        batch = max(r.value for r in steps)
        if batch > t.launch_batch_max:
            return
        batch_ev = ev(steps[0], "server.iteration_tokens_mean", steps[0].labels, batch,
                      t.launch_batch_max, "<=", "tokens per engine step")
    graphs = ctx.setting("cuda_graphs")
    eager = graphs is not None and graphs.strip().lower().startswith("off")
    where = "thread" if hot.key == "thread.cpu_ratio" else "process"
    name = hot.label("name") or hot.label("tid") or hot.label("pid")
    evidence = [
        ev(hot, hot.key, hot.labels, hot_cpu, t.launch_thread_cpu_min, ">=",
           f"engine {where} {name} (pid {hot.label('pid')}) near one full core, "
           f"{ctx.median_note}"),
        Evidence("gpu.sm_active_ratio", () if len(gpus) > 1 else sm[gpus[0]].labels, mean_sm,
                 t.launch_sm_active_max, "<=", "ratio",
                 (f"mean over GPU {','.join(gpus)} of each " if len(gpus) > 1 else "")
                 + ctx.median_note),
        batch_ev,
    ]
    if graphs is not None:
        evidence.append(ev(None, "server.setting", sub(name="cuda_graphs"), graphs, None, "",
                           "every kernel launched one by one from Python" if eager else ""))
    if eager:
        remedy = ("enable CUDA graphs (drop --enforce-eager / --disable-cuda-graph): one "
                  "replay instead of hundreds of launches per step")
        title = "launch-bound decode in eager mode"
    else:
        remedy = ("the CPU cannot issue kernels fast enough: larger batches, async scheduling; "
                  "py-spy the engine thread to see where the step time goes")
        title = "launch-bound decode"
    yield Candidate(subject, WARN, tuple(evidence), title=title, remedy=remedy)


# ---- KRN-002 TTFT superlinear in prompt length -----------------------------------------
def ttft_superlinear(ctx: Context) -> Iterator[Candidate]:
    """Histograms lose which prompt had which TTFT, but their windowed means do not: over
    successive windows, (mean prompt length, mean TTFT minus mean queue time) pairs trace
    how prefill time scales.  The windows are split by prompt length into a short and a
    long half (by request count); the slope is log(TTFT_long / TTFT_short) over
    log(prompt_long / prompt_short), each side a request-weighted mean.  Near 1 is linear
    (normal, compute-bound prefill); >= 1.5 means cost grows like the square of the prompt
    (attention without a flash/chunked kernel).  Pooling halves instead of a least-squares
    fit over windows keeps a few noisy windows (2-5 requests each at low traffic) from
    flattening the slope.  It needs enough windows with requests and a spread in prompt
    length, and is recomputed once per window (memoised)."""
    t = ctx.t
    w = t.ttft_fit_window
    end = math.floor(ctx.now / w) * w
    memo = ctx.state.setdefault("krn002", {})
    for ps in ctx.series_of("request.prompt_tokens"):
        ts = ctx.series("latency.ttft_seconds", ps.labels)
        if ts is None or not ts.points:
            continue
        got = memo.get(ps.labels)
        if got is None or got[0] != end:
            got = (end, _fit(ctx, ps, ts, ctx.series("latency.queue_seconds", ps.labels), end))
            memo[ps.labels] = got
        fit = got[1]
        if fit is None:
            continue
        slope, n, (pmin, pmax), (tmin, tmax) = fit
        if slope < t.ttft_slope_min:
            continue
        yield Candidate(server_subject(ps.labels), WARN, (
            Evidence("latency.ttft_seconds", ps.labels, round(slope, 2), t.ttft_slope_min, ">=",
                     "", f"log-log slope of mean TTFT over mean prompt length, {n} windows "
                     f"of {w:.0f} s"),
            Evidence("request.prompt_tokens", ps.labels, pmax, None, "", "tokens",
                     f"mean prompt {pmin:.0f} -> {pmax:.0f} tokens while prefill TTFT "
                     f"{tmin * 1e3:.0f} -> {tmax * 1e3:.0f} ms"),
        ), title=f"TTFT grows like prompt^{slope:.1f}")


def _fit(ctx: Context, ps: Series, ts: Series, qs: Series | None, end: float):
    t = ctx.t
    w = t.ttft_fit_window
    bounds = [end - k * w for k in range(t.ttft_fit_windows + 1)][::-1]

    def at(s: Series | None):
        if s is None or not s.points:
            return None
        return [point_at(s, b) for b in bounds]

    P, T, Q = at(ps), at(ts), at(qs)
    pts = []
    for i in range(len(bounds) - 1):
        dp, dt = _delta(P, i), _delta(T, i)
        if dp is None or dt is None or dp[0] < t.ttft_fit_min_requests or \
                dt[0] < t.ttft_fit_min_requests:
            continue
        prompt = dp[1] / dp[0]
        ttft = dt[1] / dt[0]
        dq = _delta(Q, i) if Q is not None else None
        if dq is not None and dq[0] > 0:
            ttft -= dq[1] / dq[0]  # queueing is not prefill: leave it out
        if prompt > 0 and ttft > 0:
            pts.append((prompt, ttft, dt[0]))
    if len(pts) < t.ttft_fit_min_points:
        return None
    got = split_slope(pts)
    if got is None:
        return None
    slope, (p_lo, p_hi), (t_lo, t_hi) = got
    if p_hi / p_lo < t.ttft_fit_prompt_spread:
        return None
    return slope, len(pts), (p_lo, p_hi), (t_lo, t_hi)


def _delta(points, i) -> tuple[float, float] | None:
    """(observations, sum) between two boundary points; None across a reset."""
    if points is None:
        return None
    a, b = points[i], points[i + 1]
    if a is None or b is None or a is b or b.time <= a.time or b.total < a.total:
        return None
    return b.total - a.total, b.sum - a.sum


# ---- KRN-003 decode far below its roofline while the GPU is busy ---------------------------
def below_roofline(ctx: Context) -> Iterator[Candidate]:
    """Decode tokens/s against the bandwidth roofline at this batch size (sol_derive): a
    busy GPU (NVML util high) that decodes a small batch at a small share of what reading
    the weights and KV once per step allows spends its time on something else: kernel
    launches and syncs, host round trips.  Large batches far below the roofline have
    other causes with their own rules (PCIe copies, stragglers, fp32).  GPM cross-check: DRAM busy
    at or above ``roofline_dram_max`` means the memory *is* the limit and the estimate is
    off (wrong model shape, another tenant): no finding."""
    t = ctx.t
    util = ctx.per_gpu("gpu.util_ratio")
    for r in ctx.derived_of("sol.decode_roofline_ratio"):
        subject = server_subject(r.labels)
        # the ratio is already a rate over the window (sol_derive); held by hold_margin
        if not ctx.past(r.value, "<=", t.roofline_ratio_max, subject):
            continue
        running = ctx.peer("server.requests_running", r.labels)
        if running is None or running.value > t.roofline_batch_max:
            continue  # large batches below the roofline: copies, stragglers (HW/PAR rules)
        mine = next(iter(ctx.gpus_by_root().values()), None) if len(ctx.gpus_by_root()) == 1 \
            else None
        gpus = [g for g in (mine or util) if g in util]
        if not gpus:
            continue
        mean_util = ctx.median_of([util[g] for g in gpus])  # judged on the window
        if not ctx.past(mean_util, ">=", t.roofline_busy_util_min, subject):
            continue  # an idle GPU below its roofline is simply not loaded
        dram = ctx.per_gpu("gpu.dram_bw_util_ratio")
        dram_gpus = [g for g in gpus if g in dram]
        mean_dram = ctx.median_of([dram[g] for g in dram_gpus]) if dram_gpus else None
        if mean_dram is not None and mean_dram >= t.roofline_dram_max:
            continue
        ceiling = ctx.derived("sol.decode_roofline_tokens_per_second", r.labels)
        gen = ctx.derived("throughput.generation_tokens_per_second", r.labels)
        gpu_labels = () if len(gpus) > 1 else util[gpus[0]].labels
        evidence = [
            Evidence("sol.decode_roofline_ratio", r.labels, r.value, t.roofline_ratio_max,
                     "<=", "ratio", f"{gen or 0:.0f} of at most {ceiling or 0:.0f} tok/s "
                     f"({r.reason})"),
            Evidence("gpu.util_ratio", gpu_labels, mean_util, t.roofline_busy_util_min, ">=",
                     "ratio", ctx.median_note + (f", mean over GPU {','.join(gpus)}"
                                                 if len(gpus) > 1 else "")),
        ]
        if mean_dram is not None:
            evidence.append(Evidence("gpu.dram_bw_util_ratio", gpu_labels, mean_dram,
                                     t.roofline_dram_max, "<", "ratio",
                                     "GPM confirms: memory is not the limit"))
        else:
            evidence.append(Evidence("gpu.dram_bw_util_ratio", gpu_labels, None, None, "",
                                     "ratio", "no GPM here: not cross-checked"))
        tensor = ctx.per_gpu("gpu.tensor_active_ratio")
        tens = [tensor[g].value for g in gpus if g in tensor]
        if tens:
            evidence.append(Evidence("gpu.tensor_active_ratio", gpu_labels,
                                     sum(tens) / len(tens), None, "", "ratio", ""))
        evidence.append(ev(running, "server.requests_running", running.labels, running.value,
                           t.roofline_batch_max, "<=", "small decode batch"))
        graphs = ctx.setting("cuda_graphs")
        eager = graphs is not None and graphs.strip().lower().startswith("off")
        if graphs is not None:
            evidence.append(ev(None, "server.setting", sub(name="cuda_graphs"), graphs, None,
                               "", ""))
        if eager:
            remedy = ("enable CUDA graphs (drop --enforce-eager / --disable-cuda-graph): the "
                      "step time goes to launching kernels, not to moving bytes")
        else:
            remedy = ("small batches are launch- and sync-bound: more concurrency per replica "
                      "(fewer replicas), async scheduling; press n for an Nsight capture, p "
                      "for the engine's stacks")
        yield Candidate(subject, WARN, tuple(evidence),
                        title=f"decode at {r.value * 100:.0f} % of its roofline while the "
                              "GPU is busy",
                        remedy=remedy)


RULES = (
    Rule(RuleSpec(
        "KRN-001", KRN, "launch-bound decode",
        "An engine thread is pinned near one full core while the SMs idle on a small batch: "
        "the GPU waits for the CPU to launch kernels (worst in eager mode, no CUDA graphs).",
        (any_of(K.thread.cpu_ratio, K.process.cpu_ratio), K.gpu.sm_active_ratio,
         any_of(K.server.requests_running, K.server.iteration_tokens)),
        {"thresholds.launch_thread_cpu_min": None, "thresholds.launch_sm_active_max": None,
         "thresholds.launch_batch_max": None},
        "enable CUDA graphs (drop --enforce-eager); otherwise larger batches or async "
        "scheduling, and py-spy the engine thread",
        optional=(K.server.setting.where(name="cuda_graphs"), K.process.info,
                  K.process.gpu_mem_bytes),
        supersedes=("HW-001", "KRN-003"), raise_after=JUDGED_RAISE_AFTER,
        judged="median over diagnosis.judge_window of the hottest engine thread's CPU and "
               "of SM active; each tick's batch"), launch_bound),
    Rule(RuleSpec(
        "KRN-002", KRN, "TTFT superlinear in prompt length",
        "Over successive windows, mean TTFT (minus mean queue time) grows faster than mean "
        "prompt length: the log-log slope between the windows with the longest and the "
        "shortest prompts at or above the threshold, with enough windows and a spread in "
        "prompt lengths.",
        (K.request.prompt_tokens, K.latency.ttft_seconds),
        {"thresholds.ttft_slope_min": None, "thresholds.ttft_fit_window": None,
         "thresholds.ttft_fit_windows": None, "thresholds.ttft_fit_min_points": None,
         "thresholds.ttft_fit_min_requests": None, "thresholds.ttft_fit_prompt_spread": None},
        "enable chunked prefill and a flash-attention backend; cap the prompt length; prefix "
        "caching for shared prefixes",
        optional=(K.latency.queue_seconds,),
        judged="windowed means per thresholds.ttft_fit_window, fitted over the last "
               "thresholds.ttft_fit_windows windows",
        notes="A request's prompt length and TTFT are only in separate histograms, so the fit "
              "works on windowed means: it sees the trend when the mix of prompt lengths "
              "changes over time, and stays silent while the mix is steady."),
        ttft_superlinear),
    Rule(RuleSpec(
        "KRN-003", KRN, "decode far below its roofline",
        "Generation tokens/s is at or below a share of the decode roofline (reading the "
        "weights once per step plus each running sequence's KV cache at the GPU's peak "
        "bandwidth, for the window's mean batch and context) while NVML says the GPU is "
        "busy and the batch is small; GPM DRAM bandwidth, when present, must agree that "
        "memory is not the limit.",
        (K.server.generation_tokens_total, K.gpu.util_ratio, K.model.weight_bytes,
         K.server.requests_running),
        {"thresholds.roofline_ratio_max": None, "thresholds.roofline_busy_util_min": None,
         "thresholds.roofline_batch_max": None, "thresholds.roofline_dram_max": None},
        "CUDA graphs on, larger batches per replica, async scheduling; an Nsight capture "
        "(n) shows where the step time goes",
        optional=(K.gpu.dram_bw_util_ratio, K.gpu.tensor_active_ratio,
                  K.server.setting.where(name="cuda_graphs"), K.gpu.mem_bus_width_bits),
        notes="The roofline needs the model's shape (config.json, read by the process probe) "
              "and the GPU's peak bandwidth (NVML or the datasheet table); see "
              "docs/metrics.md#speed-of-light. KRN-001 (launch-bound decode) explains it "
              "and keeps it quiet; it explains HW-001 (busy, not working) in turn.",
        supersedes=("HW-001",), raise_after=JUDGED_RAISE_AFTER,
        judged="the roofline ratio over the rate window; median over diagnosis.judge_window "
               "of NVML util and GPM DRAM bandwidth; each tick's batch"),
        below_roofline),
)
