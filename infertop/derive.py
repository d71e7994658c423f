"""Derived readings: rates, windowed ratios and latency quantiles from History.

Probes and recordings carry raw values (cumulative counters, cumulative histogram buckets);
everything windowed is computed here, so a recording is re-derived by today's code and
a restart (counter reset) never produces a negative rate.
"""

from __future__ import annotations

from typing import Iterable

from .history import History, Series
from .keys import SPECS
from .model import Labels, Reading, Status, make_labels
from .sol_derive import derive_sol

QUANTILES = (0.5, 0.9, 0.99)

# counter key -> derived per-second key (same labels)
RATES = {
    "server.prompt_tokens_total": "throughput.prompt_tokens_per_second",
    "server.generation_tokens_total": "throughput.generation_tokens_per_second",
    "server.preemptions_total": "server.preemptions_per_second",
    "server.engine_steps_total": "server.engine_steps_per_second",
    "process.ctx_switches_total": "process.ctx_switches_per_second",
}

ERROR_REASONS = {"error", "abort"}


def _reading(key: str, labels: Labels, value: float | None, status: Status = Status.OK,
             reason: str = "") -> Reading:
    unit = SPECS[key].unit if key in SPECS else ""
    if value is None and status is Status.OK:
        status = Status.NODATA
    return Reading(key, value, unit, labels, status, reason)


def _without(labels: Labels, *names: str) -> Labels:
    return tuple((k, v) for k, v in labels if k not in names)


def derive(history: History, window: float = 60.0) -> list[Reading]:
    """All derived readings for the newest tick of ``history``.

    Rates use ``window`` seconds (shorter at start-up: as much as exists); quantiles are
    over the window's bucket deltas, not lifetime, and need at least two scrapes.
    """
    out: list[Reading] = []
    # ---- plain rates ------------------------------------------------------------------
    for counter, rate_key in RATES.items():
        for s in history.find(counter):
            out.append(_rate_reading(rate_key, s, window))
    # ---- finished requests: total rate and error share, per server/engine -------------
    groups: dict[Labels, list[Series]] = {}
    for s in history.find("server.requests_finished_total"):
        groups.setdefault(_without(s.labels, "reason"), []).append(s)
    for labels, series in groups.items():
        incs = [(s.label("reason"), s.increase(window)) for s in series]
        incs = [(r, i) for r, i in incs if i is not None]
        if not incs:
            continue
        total = sum(i[0] for _, i in incs)
        secs = max(i[1] for _, i in incs)
        errs = sum(i[0] for r, i in incs if r in ERROR_REASONS)
        out.append(_reading("server.requests_per_second", labels, total / secs if secs else None))
        out.append(_reading("server.error_ratio", labels, errs / total if total else None,
                            reason="" if total else "no request finished in the window"))
    # ---- windowed ratios of two counters ----------------------------------------------
    out += _ratio(history, "kv.prefix_cache_hit_ratio", "kv.prefix_cache_hits_total",
                  "kv.prefix_cache_queries_total", window)
    out += _ratio(history, "spec.acceptance_ratio", "spec.accepted_tokens_total",
                  "spec.draft_tokens_total", window)
    # ---- histograms: quantiles and means ----------------------------------------------
    for s in history.histograms():
        if s.key == "server.iteration_tokens":
            out.append(_reading("server.iteration_tokens_mean", s.labels, s.mean(window)))
            continue
        if not s.key.startswith("latency."):
            continue
        d = s.hist_delta(window)
        for q in QUANTILES:
            labels = make_labels(s.labels, quantile=q)
            if d is None:
                out.append(_reading(s.key, labels, None, Status.NODATA, "needs two scrapes"))
            elif d.total <= 0:
                out.append(_reading(s.key, labels, None, Status.NODATA,
                                    "no request in the window"))
            else:
                v = s.quantile(q, window)
                first = next((le for le, _ in d.buckets if le > 0), None)
                # the rank fell in the lowest bucket: interpolation only says "below it"
                note = f"below the first bucket bound {first:g}" \
                    if first is not None and v is not None and v <= first else ""
                out.append(_reading(s.key, labels, v, reason=note))
    # ---- uptime from the server's start time ------------------------------------------
    for s in history.find("server.process_start_seconds"):
        v = s.last()
        if v:
            out.append(_reading("server.uptime_seconds", s.labels, max(0.0, history.now - v)))
    # ---- speed of light: peaks, MFU/MBU, decode roofline (needs the rates above) -------
    out += derive_sol(history, out, window)
    return out


def _rate_reading(key: str, s: Series, window: float) -> Reading:
    r = s.rate(window)
    if r is None:
        return _reading(key, s.labels, None, Status.NODATA, "needs two samples")
    return _reading(key, s.labels, r)


def _ratio(history: History, key: str, num_key: str, den_key: str,
           window: float) -> Iterable[Reading]:
    for den in history.find(den_key):
        num = history.get(num_key, den.labels)
        di = den.increase(window)
        ni = num.increase(window) if num is not None else None
        if di is None or ni is None:
            yield _reading(key, den.labels, None, Status.NODATA, "needs two samples")
        elif di[0] <= 0:
            yield _reading(key, den.labels, None, Status.NODATA, "no traffic in the window")
        else:
            yield _reading(key, den.labels, min(1.0, ni[0] / di[0]))
