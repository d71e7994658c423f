"""Scheduling rules: the host side that feeds the GPUs (GIL, queues, threads, CPU)."""

from __future__ import annotations

from collections.abc import Iterator

from ..derive import THROUGHPUT_LOOKBACK
from ..findings import Evidence, RuleSpec, Severity
from ..key_symbols import K
from ..keysym import any_of
from ..model import Labels, Layer, Reading, make_labels
from ..servers import registry
from ..units import fmt_count, fmt_value
from ..windowstat import recent_values
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

SCH = Layer.SCHEDULING
WARN = Severity.WARN



# ---- SCH-001 GIL contention -------------------------------------------------------------
def _python_pid(ctx: Context, r) -> bool:
    p = ctx.procs.get(r.label("pid"))
    if p is not None:
        return p.is_python
    name = r.label("name").lower()  # no process.info: judge by the process name
    return "python" in name or name.startswith(registry.python_title_prefixes())


def gil_contention(ctx: Context) -> Iterator[Candidate]:
    t = ctx.t
    pinned = [r for r in ctx.ok("process.cpu_ratio")
              if t.gil_cpu_min <= r.value <= t.gil_cpu_max and _python_pid(ctx, r)]
    if not pinned:
        return
    threads: dict[str, list] = {}
    for th in ctx.ok("thread.cpu_ratio"):
        if th.value >= t.gil_thread_busy:
            threads.setdefault(th.label("pid"), []).append(th)
    trend = None
    for r in pinned:
        busy = sorted(threads.get(r.label("pid"), ()), key=lambda th: -th.value)
        if len(busy) < t.gil_busy_threads:
            continue
        if trend is None:
            trend = throughput_trend(ctx) or (None, None)
        cur, peak = trend
        if cur is None or not peak or cur > (1.0 - t.gil_throughput_drop) * peak:
            continue
        pid = r.label("pid")
        names = ", ".join(f"{th.label('name') or th.label('tid')} {th.value:.0%}"
                          for th in busy[:4])
        yield Candidate(sub(pid=pid), WARN, (
            ev(r, r.key, r.labels, r.value, t.gil_cpu_min, ">=",
               f"pinned near one core (up to {t.gil_cpu_max:.2f}): one thread runs Python at a "
               "time"),
            Evidence("thread.cpu_ratio", sub(pid=pid), len(busy), t.gil_busy_threads, ">=",
                     "count", f"busy Python threads: {names}"),
            Evidence("throughput.generation_recent_tokens_per_second", (), cur,
                     (1.0 - t.gil_throughput_drop) * peak, "<=", "tokens/s",
                     f"peak {peak:.0f} tokens/s in the last {THROUGHPUT_LOOKBACK:.0f} s"),
        ), title=f"GIL contention in pid {pid} ({r.label('name')})")


def throughput_trend(ctx: Context) -> tuple[float, float] | None:
    """(newest 10 s generation rate, best 10 s rate of the last 2 min), all engines summed:
    derived once per tick (``infertop.derive``), as shown in ``snapshot --json``."""
    cur = ctx.derived("throughput.generation_recent_tokens_per_second", ())
    peak = ctx.derived("throughput.generation_peak_tokens_per_second", ())
    return None if cur is None or peak is None else (cur, peak)


# ---- SCH-002 queue grows while GPUs idle and KV free ------------------------------------
CAP_SETTINGS = ("max_num_seqs", "max_running_requests", "parallel", "max_concurrent_requests")


def _cap(ctx: Context) -> tuple[str, int | None] | None:
    """(setting name, its value when a number) of the server's concurrency cap."""
    for name in CAP_SETTINGS:
        cap = ctx.setting(name)
        if cap is not None:
            return name, int(cap) if cap.strip().isdigit() else None
    return None


def queue_while_idle(ctx: Context) -> Iterator[Candidate]:
    """With GPU readings: a queue while the GPUs idle and KV is free.  Without them (no
    NVML, a CPU backend): a queue while the running batch sits at the concurrency cap
    (on at least half of the window's ticks) and KV is free: the cap, not capacity,
    holds requests back, and no GPU reading could say otherwise."""
    t = ctx.t
    sm = ctx.per_gpu("gpu.sm_active_ratio")
    if sm:
        busy_key, busy, limit = "gpu.sm_active_ratio", sm, t.idle_sm_active_max
    else:
        busy_key, busy, limit = "gpu.util_ratio", ctx.per_gpu("gpu.util_ratio"), t.idle_util_max
    mean = ctx.median_of(busy.values()) if busy else None
    cap = _cap(ctx)
    for w in ctx.ok("server.requests_waiting"):
        subject = server_subject(w.labels)
        queue = ctx.share(w, t.queue_waiting_min)
        if not ctx.past(queue, ">=", QUEUED_SHARE, subject):
            continue
        kv = ctx.peer("kv.usage_ratio", w.labels)
        usage = ctx.median(kv) if kv is not None else None
        if kv is not None and (usage is None or not ctx.past(usage, "<=", t.kv_free_max,
                                                              subject)):
            continue
        running = ctx.peer("server.requests_running", w.labels)
        at_cap = None
        pinned = None      # the cap read from the page (no setting seen: a remote server)
        if cap is not None and cap[1] and running is not None:
            at_cap = ctx.share(running, float(cap[1]))
        elif cap is None and running is not None:
            pinned = _cap_from_page(ctx, running, w, subject)
            if pinned is not None:
                at_cap = ctx.share(running, pinned[0])
        if kv is None and not ctx.past(at_cap, ">=", QUEUED_SHARE, subject):
            continue  # no KV reading (llama.cpp sizes KV per slot): only a full cap counts
        if busy:
            if not ctx.past(mean, "<=", limit, subject):
                continue
        elif not ctx.past(at_cap, ">=", QUEUED_SHARE, subject):
            continue  # no GPU readings: only a reached cap says why they wait
        evidence = [ctx.queue_evidence(w, queue, t.queue_waiting_min)]
        if busy:
            evidence.append(Evidence(
                busy_key, () if len(busy) > 1 else next(iter(busy.values())).labels, mean,
                limit, "<=", "ratio",
                (f"mean over {len(busy)} GPU(s) of each " if len(busy) > 1 else "")
                + ctx.median_note))
        if kv is not None:
            evidence.append(ev(kv, kv.key, kv.labels, usage, t.kv_free_max, "<=",
                               ctx.median_note))
        cap_note = ""
        if cap is not None:
            reached = at_cap is not None and at_cap >= QUEUED_SHARE
            cap_note = f"{cap[0]}={cap[1] if cap[1] is not None else '?'}" + \
                (" reached" if reached else "")
            if (not busy or kv is None) and at_cap is not None and running is not None:
                evidence.append(Evidence(running.key, running.labels, at_cap, QUEUED_SHARE,
                                         ">=", "ratio",
                                         f"share of the ticks of the last "
                                         f"{ctx.judge_window:g} s with the running batch at "
                                         f"{cap[0]}={cap[1]}" +
                                         ("" if busy else "; no GPU readings") +
                                         ("" if kv is not None else "; no KV reading")))
            else:
                evidence.append(ev(None, "server.setting", sub(name=cap[0]), ctx.setting(cap[0]),
                                   None, "", "the concurrency cap" +
                                   (" is reached" if reached else "")))
        elif pinned is not None and running is not None and at_cap is not None:
            top, capacity = pinned
            cap_note = f"running pinned at {top:.0f}: a batch cap"
            evidence.append(Evidence(
                running.key, running.labels, at_cap, QUEUED_SHARE, ">=", "ratio",
                f"share of the ticks of the last {ctx.judge_window:g} s with the running batch "
                f"at its maximum {top:.0f}: the cap, read from the page (no cap setting seen)"))
            if capacity is not None:
                evidence.append(ev(capacity, capacity.key, capacity.labels, capacity.value, None,
                                   "", "waiting for capacity (not deferred)"))
        if running is not None:
            evidence.insert(1, ev(running, running.key, running.labels, running.value, None, "",
                                  "running"))
        what = "GPUs idle" if busy else "the batch is at its cap"
        yield Candidate(subject, WARN, tuple(evidence),
                        title=f"queue grows while {what}"
                        + (" and KV is free" if kv is not None else "")
                        + (f" ({cap_note})" if cap_note else ""))


def _cap_from_page(ctx: Context, running: Reading, waiting: Reading,
                   subject: Labels) -> tuple[float, Reading | None] | None:
    """(the running batch's maximum over the judge window, the capacity-waiting reading or
    None) when the page alone says a batch cap binds: requests wait for capacity (vLLM
    waiting_by_reason{reason="capacity"} on half the window's ticks; a server without that
    reading: the queue, tested by the caller) while the batch holds its maximum.  The
    caller asks that the batch sits at it on half the ticks too and that KV is free."""
    s = ctx.series(running.key, running.labels)
    vals = recent_values(s, ctx.judge_window, ctx.now) if s is not None else None
    if not vals:
        return None
    top = max(vals)
    if top < 1:
        return None
    capacity = ctx.peer("server.requests_waiting_capacity", waiting.labels)
    if capacity is not None and not ctx.past(ctx.share(capacity, 1.0), ">=", QUEUED_SHARE,
                                             subject):
        return None
    return top, capacity


# ---- SCH-003 too many threads for the cores ----------------------------------------------
def too_many_threads(ctx: Context) -> Iterator[Candidate]:
    t = ctx.t
    cores = ctx.ok("host.cpu_count")
    if not cores or not cores[0].value:
        return
    ncpu = cores[0].value
    runnable = [r for r in ctx.ok("thread.cpu_ratio") if r.value >= t.thread_busy_cores]
    if len(runnable) <= t.threads_per_core_max * ncpu:
        return
    used = sum(r.value for r in runnable)
    host = ctx.ok("host.cpu_ratio")
    busy_share = host[0].value if host else used / ncpu
    if busy_share < t.threads_host_busy_ratio:
        return
    per_pid: dict[str, int] = {}
    for r in runnable:
        per_pid[r.label("pid")] = per_pid.get(r.label("pid"), 0) + 1
    top = ", ".join(f"pid {p}: {n}" for p, n in sorted(per_pid.items(), key=lambda x: -x[1])[:3])
    evidence = [Evidence("thread.cpu_ratio", (), len(runnable), t.threads_per_core_max * ncpu,
                         ">", "count", f"threads using >= {t.thread_busy_cores:.0%} of a core "
                         f"on {ncpu:.0f} CPUs ({top})"),
                Evidence("host.cpu_ratio", host[0].labels if host else (), busy_share,
                         t.threads_host_busy_ratio, ">=", "ratio")]
    for r in ctx.derived_of("process.ctx_switches_per_second"):
        if r.label("type") == "involuntary" and r.value:
            evidence.append(ev(r, r.key, r.labels, r.value, None, "", "preempted by the kernel"))
            break
    yield Candidate((), WARN, tuple(evidence))


# ---- SCH-004 host CPU saturated ---------------------------------------------------------
def host_cpu(ctx: Context) -> Iterator[Candidate]:
    """Names who fills the CPUs: the host's top consumers (any program, read by the process
    probe while the host is near saturation), and whether the server's own tree is among
    them; without that scan, the server's own processes, said to be only those."""
    t = ctx.t
    for r in ctx.ok("host.cpu_ratio"):
        busy = ctx.median(r)
        if not ctx.past(busy, ">=", t.host_cpu_saturated, ()):
            continue
        evidence = [ev(r, r.key, r.labels, busy, t.host_cpu_saturated, ">=", ctx.median_note)]
        top = sorted(ctx.ok("host.top_cpu_cores"), key=lambda p: -p.value)[:3]
        remedy = None
        if top:
            for p in top:
                mine = p.label("server") == "yes"
                evidence.append(ev(p, p.key, p.labels, p.value, None, "",
                                   f"top consumer on the host: {p.label('name')} "
                                   f"({'the server' if mine else 'not the server'})"))
            ours = [p for p in top if p.label("server") == "yes"]
            others = [p for p in top if p.label("server") != "yes"]
            if not ours:
                remedy = ("the server's own processes are not among the host's top CPU "
                          "consumers: " + _names(others) + " fill the CPUs; move them off "
                          "this host, or pin the server to cores of its own")
            elif not others:
                remedy = ("the server's own processes are the top CPU consumers: give it "
                          "more cores (or fewer CPU-side workers: tokenizers, API servers)")
            else:
                remedy = ("the server (" + _names(ours) + ") shares the CPUs with " +
                          _names(others) + ": move the others off this host, or give the "
                          "server more cores")
        else:
            for p in sorted(ctx.ok("process.cpu_ratio"), key=lambda p: -p.value)[:3]:
                if p.value > 0:
                    evidence.append(ev(p, p.key, p.labels, p.value, None, "",
                                       "the server's process (the host's other processes "
                                       "were not read)"))
        yield Candidate((), WARN, tuple(evidence), remedy=remedy)
        return


def _names(rs) -> str:
    return ", ".join(f"{r.label('name')} (pid {r.label('pid')}, "
                     f"{fmt_value(r.value, 'cores')} CPU)" for r in rs)


# ---- SCH-005 the queue waits on a deferral, not capacity ---------------------------------
def _deferral(ctx: Context, labels) -> tuple[str, str]:
    """(what the deferred requests wait on, remedy) from the server's own configuration:
    a KV connector on the command line, or prompt KV arriving by transfer, means the
    decode side waits for KV from its prefill side; LoRA flags mean adapter slots."""
    transferred = ctx.series("kv.prompt_tokens_by_source_total",
                             make_labels(labels, source="external_kv_transfer"))
    moved = transferred.increase(ctx.window) if transferred is not None else None
    if ctx.setting("kv_transfer_config") is not None or (moved is not None and moved[0] > 0):
        return ("KV transfer from the prefill side",
                "the decode side waits for KV blocks from its prefill instance: check the "
                "prefill instance (its queue and TTFT), the KV connector's transfer time and "
                "the link it uses (NIXL/RDMA, not TCP); add prefill instances if they are "
                "saturated. Raising --max-num-seqs does not help")
    if ctx.setting("max_loras") is not None or ctx.setting("enable_lora") is not None:
        loras = ctx.setting("max_loras")
        return ("LoRA adapter slots" + (f" (--max-loras {loras})" if loras else ""),
                "more distinct adapters are wanted at once than the batch has LoRA slots: "
                "raise --max-loras (GPU memory permitting) or route each adapter's requests "
                "to fewer replicas. Raising --max-num-seqs does not help")
    return ("a deferral (LoRA slots, KV transfer, or a blocked request)",
            "requests are held for something other than batch room: check the server's "
            "--kv-transfer-config (a slow prefill side) and --max-loras (too few adapter "
            "slots). Raising --max-num-seqs does not help")


def deferred_queue(ctx: Context) -> Iterator[Candidate]:
    """Requests wait, and most of them wait on a deferral (vLLM's
    ``num_requests_waiting_by_reason{reason="deferred"}``), not on capacity: the cause is
    the constraint they wait on, never the concurrency cap SCH-002 would name."""
    t = ctx.t
    for w in ctx.ok("server.requests_waiting"):
        d = ctx.peer("server.requests_deferred", w.labels)
        if d is None:
            continue
        subject = server_subject(w.labels)
        queue = ctx.share(w, t.queue_waiting_min)
        if not ctx.past(queue, ">=", QUEUED_SHARE, subject):
            continue
        waiting, deferred = ctx.median(w), ctx.median(d)
        if not waiting or deferred is None:
            continue
        part = min(1.0, deferred / waiting)
        if not ctx.past(part, ">=", t.deferred_share_min, subject):
            continue
        what, remedy = _deferral(ctx, w.labels)
        yield Candidate(subject, WARN, (
            ctx.queue_evidence(w, queue, t.queue_waiting_min),
            Evidence(d.key, d.labels, round(part, 3), t.deferred_share_min, ">=", "ratio",
                     f"share of the queue deferred, not waiting for capacity ({ctx.median_note}"
                     f"; {fmt_count(d.value)} of {fmt_count(w.value)} now)"),
        ), title=f"queue waits on {what}, not capacity", remedy=remedy)


# ---- SCH-006 engine asleep ---------------------------------------------------------------
SLEEP_NAMES = {1: "weights offloaded", 2: "weights and KV discarded"}


def engine_asleep(ctx: Context) -> Iterator[Candidate]:
    """An engine in sleep mode (vLLM ``/sleep``): its latency is a wake-up, not slowness;
    a warning when requests wait on it, else a notice."""
    for r in ctx.ok("server.sleep_level"):
        if r.value < 1:
            continue
        subject = server_subject(r.labels)
        level = int(r.value) if r.value < 10 else None   # 1e308 is no level (309 digits)
        evidence = [ev(r, r.key, r.labels, r.value, 1.0, ">=",
                       f"sleep level {fmt_count(r.value)}: "
                       f"{SLEEP_NAMES.get(level, 'asleep') if level else 'asleep'}")]
        w = ctx.peer("server.requests_waiting", r.labels)
        waiting = w is not None and w.value >= ctx.t.queue_waiting_min
        if w is not None:
            evidence.append(ev(w, w.key, w.labels, w.value, None, "", "waiting on it"))
        yield Candidate(subject, WARN if waiting else Severity.NOTICE, tuple(evidence),
                        title="engine asleep" + (f" ({SLEEP_NAMES[level]})"
                                                 if level in SLEEP_NAMES else "")
                        + (f" with {fmt_count(w.value)} waiting" if waiting and w else ""))


RULES = (
    Rule(RuleSpec(
        "SCH-001", SCH, "GIL contention",
        "A Python server process is pinned near one core while several of its threads are "
        "busy and generation throughput falls below its recent peak: threads take turns on "
        "the GIL instead of feeding the GPU.",
        (K.process.cpu_ratio, K.thread.cpu_ratio, K.server.generation_tokens_total),
        {"thresholds.gil_cpu_min": None, "thresholds.gil_cpu_max": None,
         "thresholds.gil_thread_busy": None, "thresholds.gil_busy_threads": None,
         "thresholds.gil_throughput_drop": None},
        "spread the work over processes (more API servers: --api-server-count; detokenize "
        "out of process); py-spy the process to see the threads waiting on the GIL",
        optional=(K.process.info,),
        judged="each tick's process and thread CPU; throughput as derived 10 s steps",
        notes="Throughput: generation tokens per 10 s, newest against the best of the last "
              "2 minutes; a counter the server moves only when requests finish "
              "(server.counter_moves) only while each step holds several finishes."),
        gil_contention),
    Rule(RuleSpec(
        "SCH-002", SCH, "queue grows while GPUs idle and KV is free",
        "Requests wait while the GPUs are mostly idle (or, without GPU readings, while the "
        "running batch sits at the concurrency cap) and the KV cache has room (without a KV "
        "reading, as llama.cpp's per-slot cache: the cap reached): a concurrency cap, not "
        "capacity, holds them back.  Without a cap setting (a remote server) the page says "
        "it: the running batch flat at its window maximum while requests wait for capacity.",
        (K.server.requests_waiting,),
        {"thresholds.queue_waiting_min": None, "thresholds.idle_sm_active_max": None,
         "thresholds.idle_util_max": None, "thresholds.kv_free_max": None},
        "raise the concurrency cap (vLLM --max-num-seqs, SGLang --max-running-requests, "
        "llama.cpp --parallel, TGI --max-concurrent-requests)",
        optional=(K.kv.usage_ratio, any_of(K.gpu.sm_active_ratio, K.gpu.util_ratio),
                  K.server.requests_running, K.server.requests_waiting_capacity,
                  K.server.setting.where(name="max_num_seqs")),
        raise_after=JUDGED_RAISE_AFTER,
        judged="median over diagnosis.judge_window of each GPU's activity (then their "
               "mean) and of KV usage; a queue on at least half of its ticks; without GPU "
               "readings or without a KV reading, the running batch at the cap on at least half of "
               "its ticks"),
        queue_while_idle),
    Rule(RuleSpec(
        "SCH-003", SCH, "too many threads for the cores",
        "More runnable threads than the host has cores for (per-thread CPU above a floor) "
        "while the host is busy: threads preempt each other (OpenMP/BLAS/tokenizer pools "
        "sized for a bigger machine).",
        (K.thread.cpu_ratio, K.host.cpu_count),
        {"thresholds.thread_busy_cores": None, "thresholds.threads_per_core_max": None,
         "thresholds.threads_host_busy_ratio": None},
        "size thread pools to the cores: OMP_NUM_THREADS / torch.set_num_threads, "
        "TOKENIZERS_PARALLELISM=false, fewer workers per host",
        optional=(K.host.cpu_ratio, K.process.ctx_switches_total),
        judged="each tick's per-thread CPU (threads come and go: no per-thread median)",
        supersedes=("SCH-004",)), too_many_threads),
    Rule(RuleSpec(
        "SCH-004", SCH, "host CPU saturated",
        "The whole host's CPUs are nearly all busy: scheduling, tokenization and kernel "
        "launches wait for a core.",
        (K.host.cpu_ratio,),
        {"thresholds.host_cpu_saturated": None, "thresholds.host_top_scan_at": None},
        "find the top consumers (listed: any program on the host, and whether the server's "
        "own tree is among them); move other work off this host, or give the server more "
        "cores",
        optional=(K.host.top_cpu_cores, K.process.cpu_ratio), raise_after=JUDGED_RAISE_AFTER,
        judged="median over diagnosis.judge_window of the host's CPU busy share"), host_cpu),
    Rule(RuleSpec(
        "SCH-005", SCH, "queue waits on a deferral, not capacity",
        "Requests wait, and most of the queue is deferred (vLLM reason=deferred: LoRA "
        "adapter slots, KV transfer from a remote prefill, a blocked request) rather than "
        "waiting for batch room: the remedy is that constraint, not the concurrency cap.",
        (K.server.requests_waiting, K.server.requests_deferred),
        {"thresholds.queue_waiting_min": None, "thresholds.deferred_share_min": None},
        "follow the constraint named: a slow prefill side or KV link (disaggregated "
        "serving), or too few LoRA slots (--max-loras); raising --max-num-seqs does not help",
        optional=(K.kv.prompt_tokens_by_source_total,
                  K.server.setting.where(name="kv_transfer_config"),
                  K.server.setting.where(name="max_loras")),
        raise_after=JUDGED_RAISE_AFTER,
        judged="median over diagnosis.judge_window of waiting and deferred requests; a queue "
               "on at least half of its ticks",
        supersedes=("SCH-002",)), deferred_queue),
    Rule(RuleSpec(
        "SCH-006", SCH, "engine asleep",
        "The engine is in sleep mode (vLLM --enable-sleep-mode and /sleep: weights offloaded "
        "or discarded): requests wait for a wake-up, so its latency says nothing about its "
        "speed.  A warning when requests wait on it, a notice otherwise.",
        (K.server.sleep_level,), {},
        "wake it (POST /wake_up) or route traffic away until it is awake; if it should be "
        "serving, find who put it to sleep (an autoscaler or RL trainer calling /sleep)",
        optional=(K.server.requests_waiting,),
        judged="each tick's sleep state"), engine_asleep),
)
