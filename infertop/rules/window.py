"""Point lookups in one Series by time, by binary search instead of scans: for the trend
rules that compare a few instants (MEM-003 growth, SCH-001 throughput steps, KRN-002 fit).

Rates, increases, ratios and quantiles over the window are NOT computed here: they are
derived once per tick in ``infertop.derive`` and the rules read them from the Context, so
a finding's evidence is the number on screen.  The bisect runs on the series' own time
array (Series.index_at): a few microseconds whatever the window.
"""

from __future__ import annotations

from ..history import HistPoint, Series


def point_at(series: Series, t: float):
    """The newest point at or before ``t``; the oldest point if all are later; None if empty."""
    i = series.index_at(t)
    return None if i is None else series.points[i]


def covered(series: Series, seconds: float, now: float) -> bool:
    """True when the series has points reaching back ``seconds`` (minus one second's slack)."""
    first = series.first_time()
    return first is not None and first <= now - seconds + 1.0


def value_at(series: Series, t: float) -> float | None:
    p = point_at(series, t)
    if p is None or isinstance(p, HistPoint):
        return None
    return p[1]


def window_words(series: Series | None, window: float, now: float) -> str:
    """How evidence names the span a windowed count covers (docs/rules.md#windows): "in
    the last 60 s" only when History covers the window; else the seconds it does cover
    ("in the 5 s covered of the 60 s window"), so a young window never reads as a full one."""
    if series is None or covered(series, window, now):
        return f"in the last {window:.0f} s"
    first = series.first_time()
    span = max(0.0, now - first) if first is not None else 0.0
    return f"in the {span:.0f} s covered of the {window:.0f} s window"
