"""Decoding rules: what users feel (TTFT, token pace, errors) and server restarts."""

from __future__ import annotations

import time
from collections.abc import Iterator

from .. import qbound
from ..findings import Evidence, RuleSpec, Severity
from ..key_symbols import K
from ..keysym import any_of
from ..model import Kind, Labels, Layer, Status, with_label
from ..units import UNIX_TIME, fmt_seconds
from .base import QUEUED_SHARE, Candidate, Context, Rule, server_subject, sub

DEC = Layer.DECODING
WARN, CRIT = Severity.WARN, Severity.CRIT


def _quantile(ctx: Context, s, q: float) -> float | None:
    """The derived (on-screen) quantile over the window: rules never recompute it."""
    return ctx.derived(s.key, with_label(s.labels, "quantile", q))


def _observed(ctx: Context, s) -> float | None:
    """Observations of histogram ``s`` in the window (derived, as shown in JSON)."""
    return ctx.derived("latency.observations", with_label(s.labels, "of", s.key))


# ---- DEC-001 TTFT p99 over the SLO ----------------------------------------------------------
def ttft_slo(ctx: Context) -> Iterator[Candidate]:
    t, slo = ctx.t, ctx.cfg.slo.ttft_p99_seconds
    for s in ctx.series_of("latency.ttft_seconds"):
        n = _observed(ctx, s)
        if n is None or n < t.slo_min_requests:
            continue
        p99_labels = with_label(s.labels, "quantile", 0.99)
        p99 = _quantile(ctx, s, 0.99)
        if p99 is None or p99 <= slo or ctx.derived_bound(s.key, p99_labels) == qbound.BELOW:
            continue   # under the SLO, or only known to be under a bound: not a breach
        evidence = [Evidence(s.key, p99_labels, p99, slo, ">", "s",
                             f"{n:.0f} first tokens {ctx.in_window(s.key, s.labels)}",
                             ctx.derived_bound(s.key, p99_labels))]
        remedy = _ttft_remedy(ctx, s, p99, evidence)
        sev = CRIT if p99 >= t.ttft_crit_factor * slo else WARN
        yield Candidate(server_subject(s.labels), sev, tuple(evidence),
                        title=f"TTFT p99 {fmt_seconds(p99)} over the {fmt_seconds(slo)} SLO",
                        remedy=remedy)


QUEUE_REMEDY = ("requests wait in the queue: add capacity (replicas, GPUs) or admit fewer; "
                "see the memory and scheduling findings for why")
PREFILL_REMEDY = ("prefill itself is slow: enable chunked prefill and prefix caching, or "
                  "cap prompt length")


def _ttft_remedy(ctx: Context, s, p99: float, evidence: list[Evidence]) -> str | None:
    """Queue or prefill, from the queue-time p99 beside TTFT's.  A queue-time p99 below
    its histogram's first bound (vLLM's starts at 0.3 s) is no measurement: at light load
    every request lands there and interpolation says ~297 ms while requests waited
    microseconds.  Then the bound decides when it is small enough, else the waiting count."""
    qs = ctx.series("latency.queue_seconds", s.labels)
    q99 = _quantile(ctx, qs, 0.99) if qs is not None else None
    if q99 is None:
        return None
    q_labels = with_label(s.labels, "quantile", 0.99)
    bound = ctx.derived_bound("latency.queue_seconds", q_labels)
    evidence.append(Evidence("latency.queue_seconds", q_labels, q99, None, "", "s",
                             "time waiting before prefill" +
                             (" (the histogram's first bucket: a bound, not a measurement)"
                              if bound == qbound.BELOW else "") +
                             (_above_ttft(ctx, s, qs) if q99 > p99 else ""), bound))
    if bound != qbound.BELOW:
        return QUEUE_REMEDY if q99 >= 0.5 * p99 else PREFILL_REMEDY
    if q99 < 0.5 * p99:
        return PREFILL_REMEDY      # even the bound is under half of TTFT
    waiting = ctx.peer("server.requests_waiting", s.labels)
    queued = ctx.share(waiting, 1.0) if waiting is not None else None
    if queued is not None and queued < QUEUED_SHARE:
        return PREFILL_REMEDY + (f" (requests waited on {queued:.0%} of the last "
                                 f"{ctx.judge_window:g} s; queue time "
                                 f"<{fmt_seconds(q99)})")
    return ("queue time is under its histogram's first bound (<" + fmt_seconds(q99) +
            "), too coarse to tell queueing from prefill: if requests wait (scheduling "
            "pane), add capacity or admit fewer; if not, enable chunked prefill and prefix "
            "caching, or cap prompt length")


def _above_ttft(ctx: Context, ttft, queue) -> str:
    """Why a queue-time p99 can read above the TTFT p99 that contains it: each p99 is
    interpolated inside its own histogram's buckets (vLLM's queue buckets are coarser);
    the window means, which no bucket rounds, say how the two compare."""
    tm, qm = ttft.mean(ctx.window), queue.mean(ctx.window)
    means = (f"; window means: queue {fmt_seconds(qm)}, TTFT {fmt_seconds(tm)}"
             if tm is not None and qm is not None else "")
    return (" (above the TTFT p99, which includes it: each p99 is interpolated within its "
            f"own histogram's buckets{means})")


# ---- DEC-002 inter-token latency jitter ----------------------------------------------------
def itl_jitter(ctx: Context) -> Iterator[Candidate]:
    t = ctx.t
    for s in ctx.series_of("latency.itl_seconds"):
        n = _observed(ctx, s)
        if n is None or n < t.itl_min_tokens:
            continue
        p50 = _quantile(ctx, s, 0.5)
        p99 = _quantile(ctx, s, 0.99)
        if not p50 or p99 is None or p99 < t.itl_jitter_min_seconds:
            continue
        ratio = p99 / p50
        if ratio < t.itl_jitter_ratio:
            continue
        yield Candidate(server_subject(s.labels), WARN, (
            Evidence(s.key, s.labels, round(ratio, 2), t.itl_jitter_ratio, ">=", "",
                     "p99 / p50 of inter-token latency"),
            Evidence(s.key, with_label(s.labels, "quantile", 0.99), p99, t.itl_jitter_min_seconds,
                     ">=", "s"),
            Evidence(s.key, with_label(s.labels, "quantile", 0.5), p50, None, "", "s"),
        ), title=f"inter-token latency jitter (p99 {ratio:.1f}x p50)")


# ---- DEC-003 speculative acceptance low ---------------------------------------------------
def spec_acceptance(ctx: Context) -> Iterator[Candidate]:
    t = ctx.t
    for r in ctx.derived_of("spec.acceptance_ratio"):
        drafted = ctx.derived("spec.draft_tokens_window", r.labels)
        if drafted is None or drafted < t.spec_min_draft_tokens:
            continue
        if r.value >= t.spec_acceptance_min:
            continue
        yield Candidate(server_subject(r.labels), WARN, (
            Evidence("spec.acceptance_ratio", r.labels, r.value, t.spec_acceptance_min, "<",
                     "ratio", f"{r.value * drafted:.0f} of {drafted:.0f} draft tokens accepted "
                     f"{ctx.in_window('spec.draft_tokens_total', r.labels)}"),
        ))


# ---- DEC-004 error rate -----------------------------------------------------------------
def error_rate(ctx: Context) -> Iterator[Candidate]:
    """Reads the derived ``server.error_ratio`` (the pane's 'errors'), which counts the
    finish reasons in ``thresholds.error_reasons``; client aborts have their own ratio."""
    t, limit = ctx.t, ctx.cfg.slo.error_ratio
    for r in ctx.derived_of("server.error_ratio"):
        total = ctx.derived("server.requests_finished", r.labels)
        # not r.value > 0: a NaN ratio (counts past the float range) judges nothing
        if total is None or total < t.error_min_requests or not r.value > 0:
            continue
        ratio = r.value
        if ratio <= limit:
            continue
        note = f"{ratio * total:.0f} of {total:.0f} requests " \
               f"{ctx.in_window('server.requests_finished_total', r.labels)} " \
               f"ended {'/'.join(t.error_reasons)}"
        aborts = ctx.derived("server.abort_ratio", r.labels)
        if aborts:
            note += f"; {aborts * total:.0f} client aborts not counted"
        yield Candidate(server_subject(r.labels), CRIT if ratio >= t.error_crit_ratio else WARN, (
            Evidence("server.error_ratio", r.labels, ratio, limit, ">", "ratio", note),
        ), title=f"error rate {ratio:.1%}")


# ---- DEC-007 requests refused at admission --------------------------------------------------
def admission_rejections(ctx: Context) -> Iterator[Candidate]:
    """Refused requests are errors the client sees (vLLM answers them at once, before any
    engine): judged as DEC-004 judges errors, on the derived ``server.rejection_ratio``
    (refused / (refused + finished) over the window)."""
    t, limit = ctx.t, ctx.cfg.slo.error_ratio
    for r in ctx.derived_of("server.rejection_ratio"):
        refused = ctx.derived("server.requests_rejected", r.labels)
        if not refused or not r.value or not r.value > limit:   # NaN too (issue 36, case 9)
            continue
        total = refused / r.value
        if total < t.error_min_requests:
            continue
        yield Candidate(server_subject(r.labels), CRIT if r.value >= t.error_crit_ratio else WARN, (
            Evidence("server.rejection_ratio", r.labels, r.value, limit, ">", "ratio",
                     f"{refused:.0f} of {total:.0f} requests "
                     f"{ctx.in_window('server.admission_rejections_total', r.labels)} "
                     "refused at admission"),
        ), title=f"{r.value:.1%} of requests refused at admission")


# ---- DEC-005 server restarted -------------------------------------------------------------
RESTART_COUNTERS = ("server.generation_tokens_total", "server.prompt_tokens_total",
                    "server.requests_finished_total")


START_KEY = "server.process_start_seconds"


def server_restarted(ctx: Context) -> Iterator[Candidate]:
    t = ctx.t
    restarts = ctx.state.setdefault("restarts", {})  # instance -> (time, Evidence)
    seen = ctx.state.setdefault("restart_seen", set())
    for key in RESTART_COUNTERS:
        for s in ctx.series_of(key):
            if (key, s.labels) not in seen:  # first sight: a recent past restart counts too
                seen.add((key, s.labels))
                for when in s.resets(t.restart_window):
                    _note_restart(restarts, s.label("instance"), when, s, None)
    _identity_changes(ctx, restarts)
    for inst, (when, evidence) in list(restarts.items()):
        if ctx.now - when > t.restart_window:
            del restarts[inst]
            continue
        down = _downtime(ctx, inst, when)
        evs = [evidence]
        if down is not None:
            secs, n, reason, source = down
            evs.append(Evidence("server.downtime_seconds", sub(instance=inst) if inst else (),
                                secs, None, "", "s",
                                f"{source} unreachable for {n} scrapes" +
                                (f": {reason}" if reason else "")))
            title = f"server restarted (down {fmt_seconds(secs)})"
        else:
            title = "server restarted (between two scrapes)"
        yield Candidate(sub(instance=inst) if inst else (), WARN, tuple(evs), title=title)


def _identity_changes(ctx: Context, restarts: dict) -> None:
    """Compare each server's identity (its process start time, its counters) with the one
    last seen, however long ago: History forgets a series a server that is down no longer
    reports (``expire_after``), and real restarts take minutes (weights, CUDA graphs), so
    comparing two points of one series misses them.  The identity lives in the
    Diagnoser's state (one float per series), so a server back after 2 minutes or 2 hours
    is judged alike, live and in replay."""
    ids: dict[tuple[str, Labels], float] = ctx.state.setdefault("identity", {})
    for key in (START_KEY,) + RESTART_COUNTERS:
        for s in ctx.series_of(key):
            last_t = s.last_time()
            new = s.last()
            if last_t is None or last_t < ctx.now or new is None:
                continue   # no point this tick (a STALE repeat is no new identity)
            old = ids.get((key, s.labels))
            ids[(key, s.labels)] = new
            if old is None:
                continue
            moved = new > old + 1.0 if key == START_KEY else new < old
            if moved:
                _note_restart(restarts, s.label("instance"), ctx.now, s, old)


def _note_restart(restarts: dict, inst: str, when: float, s, old: float | None) -> None:
    prev = restarts.get(inst)
    if prev is not None and abs(prev[0] - when) < 1e-6:
        return
    if prev is not None and prev[0] > when:
        return
    new = s.points[-1][1] if s.kind is not Kind.HISTOGRAM else None
    clock = time.strftime("%H:%M:%S", time.localtime(when))
    if s.key == START_KEY:
        # the value says when the new process started; the note when it was first seen
        e = Evidence(s.key, s.labels, new, old, ">", UNIX_TIME,
                     f"a new process, seen first at {clock}")
    else:
        e = Evidence(s.key, s.labels, new, old, "<", s.unit,
                     f"counter went backwards at {clock}: the server restarted")
    restarts[inst] = (when, e)


def _downtime(ctx: Context, inst: str, when: float):
    """(seconds, failed scrapes, last error, source) of the outage that ended at the
    restart, from the server source's ERROR ticks (tracked by the engine)."""
    outages = ctx.state.get("outages", {})
    names = [f"server:{inst}"] if inst else []
    names += [n for n in outages if n.startswith("server") and n not in names]
    for name in names:
        o = outages.get(name)
        if not o or not o.get("last"):
            continue
        start, end, n, reason = o["last"]
        if when - 30.0 <= end <= when + 1e-6:
            return end - start, n, reason, name
    return None


# ---- DEC-006 server not answering -------------------------------------------------------------
def server_silent(ctx: Context) -> Iterator[Candidate]:
    """A server source that errors or misses every deadline: from the source's status, not
    from readings (a dead server has none, and its old values must not look live)."""
    silent = ctx.state.setdefault("silent", {})   # source -> (since, failed scrapes)
    for name, s in ctx.snapshot.samples.items():
        if not name.startswith("server"):
            continue
        if s.status not in (Status.ERROR, Status.STALE):
            silent.pop(name, None)
            continue
        since, n = silent.get(name, (s.time, 0))
        silent[name] = (since, n + 1)
        inst = name.split(":", 1)[1] if ":" in name else ""
        clock = time.strftime("%H:%M:%S", time.localtime(since))
        labels = sub(instance=inst) if inst else ()
        yield Candidate(labels, CRIT, (Evidence(
            "server.downtime_seconds", labels, max(0.0, ctx.now - since), None, "", "s",
            f"{n + 1} scrapes failed: {s.reason or s.status.value}"),),
            title=f"server {inst} not answering since {clock}".replace("  ", " "))


RULES = (
    Rule(RuleSpec(
        "DEC-001", DEC, "TTFT p99 over the SLO",
        "Time to first token, p99 over the window, above the SLO with enough requests to "
        "judge; the queue-time p99 beside it says whether requests wait or prefill is slow.",
        (K.latency.ttft_seconds,),
        {"slo.ttft_p99_seconds": None, "thresholds.slo_min_requests": None,
         "thresholds.ttft_crit_factor": None, "diagnosis.window": None},
        "if the queue dominates: add capacity or admit fewer; else enable chunked prefill and "
        "prefix caching, or cap prompt length",
        optional=(K.latency.queue_seconds,),
        notes="With PAR-004 as its cause (the first token waits for the KV transfer of a "
              "disaggregated pair) its remedy is the transfer's, not the queue's or "
              "prefill's (rules/engine.py EXPLAINS).",
        judged="p99 over diagnosis.window (derived, as on screen)"), ttft_slo),
    Rule(RuleSpec(
        "DEC-002", DEC, "inter-token latency jitter",
        "Inter-token latency p99/p50 over the window at or above the ratio (and p99 above a "
        "floor): decodes stall, usually behind long prefills.",
        (K.latency.itl_seconds,),
        {"thresholds.itl_jitter_ratio": None, "thresholds.itl_jitter_min_seconds": None,
         "thresholds.itl_min_tokens": None},
        "enable chunked prefill with a smaller --max-num-batched-tokens, or separate prefill "
        "from decode (disaggregated serving)",
        judged="p99 and p50 over diagnosis.window (derived, as on screen)"), itl_jitter),
    Rule(RuleSpec(
        "DEC-003", DEC, "speculative acceptance low",
        "Accepted / proposed draft tokens over the window below the minimum: drafting costs "
        "more than it saves.",
        (K.spec.draft_tokens_total, K.spec.accepted_tokens_total),
        {"thresholds.spec_acceptance_min": None, "thresholds.spec_min_draft_tokens": None},
        "fewer speculative tokens (--num-speculative-tokens), a draft model closer to the "
        "target, or speculative decoding off for this traffic",
        judged="ratio over diagnosis.window (derived spec.acceptance_ratio)"), spec_acceptance),
    Rule(RuleSpec(
        "DEC-004", DEC, "error rate",
        "Share of finished requests over the window that ended in an error reason above the "
        "SLO (client aborts are reported, not counted, by default).",
        (K.server.requests_finished_total,),
        {"slo.error_ratio": None, "thresholds.error_min_requests": None,
         "thresholds.error_crit_ratio": None, "thresholds.error_reasons": None},
        "read the server log for the failing requests (OOM, bad input, timeouts); check the "
        "other findings for a cause",
        judged="ratio over diagnosis.window (derived server.error_ratio, the pane's 'errors')"),
        error_rate),
    Rule(RuleSpec(
        "DEC-005", DEC, "server restarted",
        "Server counters went backwards (or its process start time moved): it restarted; the "
        "downtime is how long its /metrics could not be read before.",
        (any_of(K.server.generation_tokens_total, K.server.prompt_tokens_total,
                K.server.requests_finished_total, K.server.process_start_seconds),),
        {"thresholds.restart_window": None},
        "find why it exited: its log around the restart, dmesg for the OOM killer or Xid, the "
        "supervisor's restart count", raise_after=0.0,
        judged="each tick: a counter going backwards, or a new process start time"),
        server_restarted),
    Rule(RuleSpec(
        "DEC-006", DEC, "server not answering",
        "A server's /metrics has failed or missed its deadline on every scrape for the raise "
        "delay: the server is down, hung or unreachable; its last values are shown stale.",
        (), {},
        "check the server process (scheduling pane: still there?), its log, and whether it "
        "listens on this port; a hung server answers nothing until restarted",
        judged="each tick: the server source's status (an error or a missed deadline), "
               "counted from the first failed scrape"),
        server_silent),
    Rule(RuleSpec(
        "DEC-007", DEC, "requests refused at admission",
        "Share of the window's requests the server refused at admission (vLLM "
        "admission_rejections: its queue limits --max-num-queued-reqs/-tokens reached) above "
        "the error SLO: clients got an error without being served.",
        (K.server.admission_rejections_total,),
        {"slo.error_ratio": None, "thresholds.error_min_requests": None,
         "thresholds.error_crit_ratio": None},
        "add capacity (replicas) or shed load before the server (the router's queue); raise "
        "the server's queue limits only if the latency of a longer queue is acceptable",
        optional=(K.server.requests_finished_total,),
        judged="ratio over diagnosis.window (derived server.rejection_ratio)"),
        admission_rejections),
)
