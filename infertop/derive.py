"""Derived readings: rates, windowed ratios and latency quantiles from History.

Probes and recordings carry raw values (cumulative counters, cumulative histogram buckets);
everything windowed is computed here, so a recording is re-derived by today's code and
a restart (counter reset) never produces a negative rate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from . import qbound
from .history import History, Series, sort_buckets, sorted_bucket_quantile
from .keys import ON_FINISH, SPECS
from .model import Labels, Reading, Status, with_label
from .pdsplit import derive_split
from .rules.window import covered, value_at
from .sol_derive import derive_sol

QUANTILES = (0.5, 0.9, 0.99)

# counter key -> derived per-second key (same labels): each counter's spec names its rate
# (infertop/keys.py ``rate=``), so a new counter is one declaration
RATES = {s.key: s.rate for s in SPECS.values() if s.rate}

# Rates a rule compares with a threshold, in both engines (MEM-001's critical preemption
# rate): judged as Prometheus's rate() over the window, so a young window is divided by
# the whole window, never by the few seconds seen (docs/rules.md#windows).  The other
# rates are throughput on screen: the rate over what History covers.
JUDGED_RATES = frozenset({"server.preemptions_total"})

# finish reasons that count as errors unless the config says otherwise (DEC-004 reads the
# same derived ratio, so the screen and the finding can never disagree); client aborts
# get their own ratio
ERROR_REASONS = ("error",)
ABORT_REASON = "abort"
# rate sub-windows for "throughput is falling" (SCH-001): the newest against the best of
# the recent ones
THROUGHPUT_STEP = 10.0
THROUGHPUT_LOOKBACK = 120.0
# a counter that moves only when requests finish (server.counter_moves "on finish") is a
# rate only over steps that each saw this many finish steps: else one finish step is the
# "peak" and the gap to the next one a "fall" to 0
FINISHES_PER_STEP = 3
# counters whose new events (not their lifetime totals) are findings, over their own window
EVENT_COUNTERS = {
    "gpu.xid_total": "gpu.xid_new",
    "gpu.ecc_uncorrected_total": "gpu.ecc_uncorrected_new",
}


def _reading(key: str, labels: Labels, value: float | None, status: Status = Status.OK,
             reason: str = "") -> Reading:
    unit = SPECS[key].unit if key in SPECS else ""
    if value is None and status is Status.OK:
        status = Status.NODATA
    return Reading(key, value, unit, labels, status, reason)


Increase = tuple[float, float] | None   # Series.increase: (increase, seconds)


def _without(labels: Labels, *names: str) -> Labels:
    return tuple((k, v) for k, v in labels if k not in names)


def derive(history: History, window: float = 60.0,
           error_reasons: Iterable[str] = ERROR_REASONS,
           event_window: float = 300.0) -> list[Reading]:
    """All derived readings for the newest tick of ``history``.

    Rates use ``window`` seconds (shorter at start-up: as much as exists); quantiles are
    over the window's bucket deltas, not lifetime, and need at least two scrapes.  This is
    the one place where windowed quantities are computed: the rules read these readings
    (``Context.derived``) instead of recomputing them, so a finding's evidence is the
    number on screen.  ``error_reasons`` are the finish reasons counted in
    ``server.error_ratio``; ``event_window`` is how far back new GPU error events count.
    """
    error_reasons = frozenset(error_reasons)
    out: list[Reading] = []
    # ---- plain rates ------------------------------------------------------------------
    for counter, rate_key in RATES.items():
        for s in history.find(counter):
            out.append(_rate_reading(rate_key, s, window, history.now
                                     if counter in JUDGED_RATES else None))
    # ---- finished requests: total rate and error share, per server/engine -------------
    # each series' increase once: the rejection share below reads them too
    finished = [(s, s.increase(window))
                for s in history.find("server.requests_finished_total")]
    groups: dict[Labels, list[tuple[Series, Increase]]] = {}
    for s, inc in finished:
        groups.setdefault(_without(s.labels, "reason"), []).append((s, inc))
    for labels, series in groups.items():
        incs = [(s.label("reason"), i) for s, i in series if i is not None]
        if not incs:
            continue
        total = sum(i[0] for _, i in incs)
        secs = max(i[1] for _, i in incs)
        errs = sum(i[0] for r, i in incs if r in error_reasons)
        aborts = sum(i[0] for r, i in incs if r == ABORT_REASON and r not in error_reasons)
        idle = "" if total else "no request finished in the window"
        out.append(_reading("server.requests_per_second", labels, total / secs if secs else None))
        out.append(_reading("server.requests_finished", labels, total))
        out.append(_reading("server.error_ratio", labels, errs / total if total else None,
                            reason=idle))
        out.append(_reading("server.abort_ratio", labels, aborts / total if total else None,
                            reason=idle))
    # ---- admission rejections: refused requests are errors the client sees ------------
    out += _rejections(history, window, finished)
    # ---- where prompt KV came from: computed, local cache, transferred ----------------
    out += _shares(history, "kv.prompt_source_ratio", "kv.prompt_tokens_by_source_total",
                   "source", window)
    # ---- which cache tier the prefix hits came from: HBM, host DRAM, disk, a peer -----
    out += _shares(history, "kv.cached_source_ratio", "kv.cached_tokens_by_source_total",
                   "source", window)
    # ---- where the scheduler loop's time goes, by stage (SGLang) -----------------------
    out += _shares(history, "server.scheduler_stage_ratio",
                   "server.scheduler_stage_seconds_total", "stage", window)
    # ---- windowed ratios of two counters ----------------------------------------------
    out += _ratio(history, "kv.prefix_cache_hit_ratio", "kv.prefix_cache_hits_total",
                  "kv.prefix_cache_queries_total", window)
    out += _ratio(history, "spec.acceptance_ratio", "spec.accepted_tokens_total",
                  "spec.draft_tokens_total", window)
    out += _ratio(history, "kv.prefix_thrash_ratio", "kv.event_blocks_restored_total",
                  "kv.event_blocks_evicted_total", window)
    # (only where the server counts cached prompt tokens: not a "–" on every other)
    if history.find("kv.prompt_tokens_cached_total"):
        out += _ratio(history, "kv.prompt_cached_ratio", "kv.prompt_tokens_cached_total",
                      "server.prompt_tokens_total", window, only_with_num=True)
    out += _ratio(history, "kv.external_prefix_cache_hit_ratio",
                  "kv.external_prefix_cache_hits_total",
                  "kv.external_prefix_cache_queries_total", window)
    for s in history.find("spec.draft_tokens_total"):
        inc = s.increase(window)
        out.append(_reading("spec.draft_tokens_window", s.labels,
                            inc[0] if inc is not None else None))
    # ---- new error events over their own (longer) window ------------------------------
    for counter, new_key in EVENT_COUNTERS.items():
        for s in history.find(counter):
            pts = s.points
            if len(pts) < 2 or pts[0][1] == pts[-1][1]:
                # oldest and newest agree: it never moved (the usual case; these
                # counters only reset with the driver), so skip the 300 s walk
                out.append(_reading(new_key, s.labels, 0.0))
                continue
            inc = s.increase(event_window)
            out.append(_reading(new_key, s.labels, inc[0] if inc is not None else 0.0))
    # ---- histograms: quantiles and means ----------------------------------------------
    for s in history.histograms():
        if s.key == "server.iteration_tokens":
            out.append(_reading("server.iteration_tokens_mean", s.labels, s.mean(window)))
            continue
        if s.key == "request.prefill_computed_tokens":
            out.append(_reading("request.prefill_computed_tokens_mean", s.labels,
                                s.mean(window)))
            continue
        if s.key == "request.preemptions":
            out.append(_reading("request.preemptions_mean", s.labels, s.mean(window)))
            continue
        if not s.key.startswith("latency."):
            continue
        d = s.hist_delta(window)
        out.append(_reading("latency.observations", with_label(s.labels, "of", s.key),
                            d.total if d is not None else None))
        # sorted once for the three quantiles (s.quantile and side_of sorted each time)
        bs = sort_buckets(d.buckets) if d is not None and d.total > 0 else []
        edges = qbound.edges(bs)
        for q in QUANTILES:
            labels = with_label(s.labels, "quantile", q)
            if d is None:
                out.append(_reading(s.key, labels, None, Status.NODATA, "needs two scrapes"))
            elif d.total <= 0:
                out.append(_reading(s.key, labels, None, Status.NODATA,
                                    "no request in the window"))
            else:
                v = sorted_bucket_quantile(q, bs)     # s.quantile(q, window)
                # the rank fell in the lowest bucket (or past the last): the buckets only
                # say "below" ("above") that bound: carry the bound, not a made-up value
                bound = qbound.side_at_edges(v, edges)      # qbound.side_of(v, d.buckets)
                if bound is not None:
                    v = bound[1]
                out.append(_reading(s.key, labels, v,
                                    reason=qbound.note(*bound) if bound else ""))
    # ---- disaggregated prefill/decode: where the first token waits (window means) -------
    out += derive_split(history, window)
    # ---- newest 10 s generation rate against the best of the last 2 minutes ------------
    trend = _throughput_steps(history)
    if trend is not None:
        out.append(_reading("throughput.generation_recent_tokens_per_second", (), trend[0]))
        out.append(_reading("throughput.generation_peak_tokens_per_second", (), trend[1]))
    # ---- uptime from the server's start time ------------------------------------------
    for s in history.find("server.process_start_seconds"):
        v = s.last()
        if v:
            out.append(_reading("server.uptime_seconds", s.labels, max(0.0, history.now - v)))
    # ---- speed of light: peaks, MFU/MBU, decode roofline (needs the rates above) -------
    out += derive_sol(history, out, window)
    return out


def _throughput_steps(history: History) -> tuple[float, float] | None:
    """(newest 10 s generation rate, best 10 s rate of the last 2 min), all engines summed;
    a step with a counter reset inside has no rate.  None until three steps exist."""
    now = history.now
    n = int(THROUGHPUT_LOOKBACK // THROUGHPUT_STEP)
    series = [s for s in history.find("server.generation_tokens_total")
              if covered(s, 3 * THROUGHPUT_STEP, now)
              and (not on_finish(history, s) or _finishes_each_step(s, now, n))]
    if not series:
        return None
    rates = [0.0] * n
    valid = [False] * n
    for s in series:
        first_t = s.first_time()
        if first_t is None:
            continue   # (covered() above: not reached)
        vals = [value_at(s, now - k * THROUGHPUT_STEP) for k in range(n + 1)]
        for k in range(n):
            if now - (k + 1) * THROUGHPUT_STEP < first_t - 1.0:
                break
            a, b = vals[k + 1], vals[k]
            if a is None or b is None or b < a:
                continue  # a reset inside the step: no rate for it
            rates[k] += (b - a) / THROUGHPUT_STEP
            valid[k] = True
    got = [r for r, ok in zip(rates, valid) if ok]
    if len(got) < 3 or not valid[0]:
        return None
    return rates[0], max(got)


def on_finish(history: History, s: Series) -> bool:
    """Whether the server says ``s``'s counter moves only when requests finish."""
    return any(m.text == ON_FINISH for m in history.find(
        "server.counter_moves", instance=s.label("instance"), counter=s.key))


def _finishes_each_step(s: Series, now: float, n: int) -> bool:
    """A finish-driven counter moved FINISHES_PER_STEP times in each of the newest ``n``
    steps it covers (steps it does not reach yet need not): its step rates are rates."""
    moves = [0] * n
    prev = None
    for t, v in s.window_points(n * THROUGHPUT_STEP + 1.0, now):
        if prev is not None and v != prev:
            k = int((now - t) // THROUGHPUT_STEP)
            if 0 <= k < n:
                moves[k] += 1
        prev = v
    first = s.first_time() or now
    reached = [k for k in range(n) if now - (k + 1) * THROUGHPUT_STEP >= first - 1.0]
    return bool(reached) and all(moves[k] >= FINISHES_PER_STEP for k in reached)


def _shares(history: History, key: str, counter: str, label: str,
            window: float) -> Iterable[Reading]:
    """Each ``label`` value's share of ``counter``'s increase over the window, per group of
    the other labels (an idle window: no share, with a reason, never a 0 that reads as
    'none of it')."""
    groups: dict[Labels, list[Series]] = {}
    for s in history.find(counter):
        groups.setdefault(_without(s.labels, label), []).append(s)
    for series in groups.values():
        incs = [(s, s.increase(window)) for s in series]
        total = sum(i[0] for _, i in incs if i is not None)
        for s, inc in incs:
            if inc is None:
                yield _reading(key, s.labels, None, Status.NODATA, "needs two samples")
            elif total <= 0:
                yield _reading(key, s.labels, None, Status.NODATA, "no traffic in the window")
            else:
                yield _reading(key, s.labels, inc[0] / total)


def _rejections(history: History, window: float,
                finished: list[tuple[Series, Increase]]) -> Iterable[Reading]:
    """Requests refused at admission in the window and their share of all requests that
    ended (refused + finished), per server and model.  vLLM counts refusals without an
    engine label, so the finished requests of every engine of that server and model are
    the denominator (``finished``: each requests_finished series with its increase)."""
    groups: dict[Labels, float] = {}
    for s in history.find("server.admission_rejections_total"):
        inc = s.increase(window)
        if inc is None:
            continue
        lab = _without(s.labels, "reason", "engine")
        groups[lab] = groups.get(lab, 0.0) + inc[0]
    for labels, rejected in groups.items():
        want = dict(labels)
        done = 0.0
        for s, inc in finished:
            if inc is not None and all(s.label(k) == v for k, v in want.items()):
                done += inc[0]
        total = rejected + done
        yield _reading("server.requests_rejected", labels, rejected)
        if not math.isfinite(total):   # inf / inf is NaN: "nan% refused", CRIT (issue 36, 9)
            yield _reading("server.rejection_ratio", labels, None, Status.ERROR,
                           "request counts overflow the float range")
            continue
        yield _reading("server.rejection_ratio", labels, rejected / total if total else None,
                       reason="" if total else "no request ended in the window")


def _rate_reading(key: str, s: Series, window: float, now: float | None = None) -> Reading:
    """``now`` given: the judged rate (``Series.window_rate``, Prometheus's ``rate()``);
    else the rate over the seconds History covers (throughput on screen)."""
    if now is not None:
        got = s.window_rate(window, now)
        r = got[0] if got is not None else None
    else:
        r = s.rate(window)
    if r is None:
        return _reading(key, s.labels, None, Status.NODATA, "needs two samples")
    return _reading(key, s.labels, r)


def _ratio(history: History, key: str, num_key: str, den_key: str,
           window: float, only_with_num: bool = False) -> Iterable[Reading]:
    for den in history.find(den_key):
        num = history.get(num_key, den.labels)
        if num is None and only_with_num:
            continue
        di = den.increase(window)
        ni = num.increase(window) if num is not None else None
        if di is None or ni is None:
            yield _reading(key, den.labels, None, Status.NODATA, "needs two samples")
        elif di[0] <= 0:
            yield _reading(key, den.labels, None, Status.NODATA, "no traffic in the window")
        elif not math.isfinite(ni[0] / di[0]):   # inf / inf: min(1.0, NaN) would read 1.0
            yield _reading(key, den.labels, None, Status.ERROR,
                           "request counts overflow the float range")
        else:
            yield _reading(key, den.labels, min(1.0, ni[0] / di[0]))
