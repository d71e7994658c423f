"""Windowed questions about one Series, answered by binary search instead of scans.

``Series.increase``/``hist_delta`` walk every point of the window; a rule evaluated each
tick over 8 GPUs cannot afford that for long windows (an Xid stays a finding for five
minutes).  A deque's index access is cheap near its ends and O(n/64) in the middle, so a
bisect over the ring buffer costs a few microseconds whatever the window.
"""

from __future__ import annotations

from ..history import HistPoint, Series
from ..model import Kind


def _time(p) -> float:
    return p.time if isinstance(p, HistPoint) else p[0]


def point_at(series: Series, t: float):
    """The newest point at or before ``t``; the oldest point if all are later; None if empty."""
    pts = series.points
    n = len(pts)
    if n == 0:
        return None
    lo, hi = 0, n
    if series.kind is Kind.HISTOGRAM:
        while lo < hi:
            mid = (lo + hi) // 2
            if pts[mid].time <= t:
                lo = mid + 1
            else:
                hi = mid
    else:
        while lo < hi:
            mid = (lo + hi) // 2
            if pts[mid][0] <= t:
                lo = mid + 1
            else:
                hi = mid
    return pts[lo - 1] if lo > 0 else pts[0]


def covered(series: Series, seconds: float, now: float) -> bool:
    """True when the series has points reaching back ``seconds`` (minus one second's slack)."""
    if not series.points:
        return False
    return _time(series.points[0]) <= now - seconds + 1.0


def increase_since(series: Series, t0: float) -> tuple[float, float] | None:
    """(increase, seconds) of a counter from the point at ``t0`` to the newest.

    A drop counts as a restart from zero (the new value is the increase); a restart
    followed by a climb past the old value inside the window is undercounted, which only
    makes a rule quieter.
    """
    if series.kind is Kind.HISTOGRAM or len(series.points) < 2:
        return None
    a = point_at(series, t0)
    b = series.points[-1]
    if a is None or a is b:
        return None
    inc = b[1] - a[1] if b[1] >= a[1] else b[1]
    return inc, b[0] - a[0]


def hist_since(series: Series, t0: float) -> HistPoint | None:
    """Observations of a histogram from the point at ``t0`` to the newest (count, sum,
    buckets); after a reset, everything in the newest point."""
    if series.kind is not Kind.HISTOGRAM or len(series.points) < 2:
        return None
    a = point_at(series, t0)
    b = series.points[-1]
    if a is None or a is b:
        return None
    return hist_between(a, b)


def count_since(series: Series, t0: float) -> tuple[float, float, float] | None:
    """(observations, their sum, seconds) of a histogram since ``t0``: no bucket work,
    for rules that first ask 'enough requests to judge?'."""
    if series.kind is not Kind.HISTOGRAM or len(series.points) < 2:
        return None
    a = point_at(series, t0)
    b = series.points[-1]
    if a is None or a is b:
        return None
    if b.total < a.total:
        return b.total, b.sum, b.time - a.time
    return b.total - a.total, b.sum - a.sum, b.time - a.time


def hist_between(a: HistPoint, b: HistPoint) -> HistPoint:
    if b.total < a.total or len(a.buckets) != len(b.buckets):
        return HistPoint(b.time, b.buckets, b.total, b.sum)
    return HistPoint(b.time, tuple((le, max(0.0, cb - ca)) for (le, cb), (_, ca)
                                   in zip(b.buckets, a.buckets)),
                     b.total - a.total, b.sum - a.sum)


def value_at(series: Series, t: float) -> float | None:
    p = point_at(series, t)
    if p is None or isinstance(p, HistPoint):
        return None
    return p[1]
