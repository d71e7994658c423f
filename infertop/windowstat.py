"""Robust statistics of a gauge over a short window, for the rules' judgements.

Real readings jitter from tick to tick (GPM SM activity reads 30, 31, 29 %; a KV cache of
16 blocks moves in 6 % steps), so a rule that asked "is it past the threshold on every
tick?" would miss a condition that hovers at the threshold, and one that asked "on this
tick?" would flap.  Rules ask instead about the median over the last few seconds: a single
spike cannot move it, a value that sits past the threshold moves it within half the window.

Only History's public ``Series.window_values`` is used (its storage may change).
"""

from __future__ import annotations

import statistics

from .history import Series
from .model import Kind


def recent_values(series: Series, seconds: float, now: float) -> list[float] | None:
    """Gauge values of the ticks in (now - seconds, now], or None while the series does
    not reach back half that far (just started, or back after an outage): a statistic
    of two or three ticks is no more robust than one tick."""
    if series.kind is Kind.HISTOGRAM:
        return None
    first, values = series.window_values(seconds, now, now - seconds)
    if first is None or first > now - seconds / 2:
        return None   # the window's ticks span less than half of it
    return values


def median(values: list[float] | None) -> float | None:
    """The median; None when there are no values.

    The tree has one median, the standard library's ``statistics.median``: for an even
    count, the mean of the two middle values.  It is symmetric (the upper middle, used in
    places before, leans to the higher value: a pair of peers 1 s and 10 s had a median of
    10 s), and it is the textbook statistic that compare's bootstrap intervals assume.
    The rules' window judgements, compare, the fleet's peer latency, a TP group's
    reference, a pane's outlier evidence and a recording's tick step all use it."""
    return statistics.median(values) if values else None


def share(values: list[float] | None, holds) -> float | None:
    """Share of the values for which ``holds(v)`` is true (None when there are none)."""
    return sum(1 for v in values if holds(v)) / len(values) if values else None
