"""Point lookups in one Series by time, by binary search instead of scans: for the trend
rules that compare a few instants (MEM-003 growth, SCH-001 throughput steps, KRN-002 fit).

Rates, increases, ratios and quantiles over the window are NOT computed here: they are
derived once per tick in ``infertop.derive`` and the rules read them from the Context, so
a finding's evidence is the number on screen.  A deque's index access is cheap near its
ends and O(n/64) in the middle, so a bisect costs a few microseconds whatever the window.
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


def value_at(series: Series, t: float) -> float | None:
    p = point_at(series, t)
    if p is None or isinstance(p, HistPoint):
        return None
    return p[1]
