"""Quantiles that a histogram only bounds: below its first bucket bound, above its last
finite one.

Interpolating inside the lowest bucket (0 .. 0.3 s for vLLM's queue time) makes up a
value: at light load every request lands there and the "p99" reads 297 ms while the real
queue time is microseconds.  Such a quantile is carried as a bound ("<300 ms", ">60 s")
everywhere it goes: the derived reading (value = the bound, reason = the note below), a
finding's evidence (``Evidence.bound``), a remedy's choice, compare and the report.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

BELOW, ABOVE = "<", ">"
_NOTE = {BELOW: "below the first bucket bound ", ABOVE: "above the last bucket bound "}


def note(side: str, bound: float) -> str:
    """The derived reading's reason for a bounded quantile (``of`` reads it back)."""
    return f"{_NOTE[side]}{bound:g}"


def of(reason: str) -> tuple[str, float] | None:
    """(side, bound) from a reading's reason, or None for a point value."""
    for side, prefix in _NOTE.items():
        if reason.startswith(prefix):
            try:
                # the note may lead a longer reason ("...bound 0.3; last good value 5 s old")
                return side, float(reason[len(prefix):].split()[0].rstrip(";,"))
            except (ValueError, IndexError):
                return None
    return None


def side_of(value: float | None,
            buckets: Iterable[tuple[float, float]]) -> tuple[str, float] | None:
    """(side, bound) when ``value``, a quantile of these cumulative buckets, is only bounded
    by them: at or below the first positive bound, or at or above the last finite bound
    with observations beyond it (in +Inf)."""
    if value is None:
        return None
    return side_at_edges(value, edges(sorted(buckets, key=lambda b: b[0])))


Edges = tuple[float | None, tuple[float, float] | None, float]


def edges(bs: list[tuple[float, float]]) -> Edges:
    """What ``side_of`` reads of buckets sorted by bound: the first positive bound, the last
    finite bucket, the last count; once for the several quantiles of one histogram."""
    first = next((le for le, _ in bs if le > 0), None)
    finite = [(le, c) for le, c in bs if not math.isinf(le)]
    return first, (finite[-1] if finite else None), (bs[-1][1] if bs else 0.0)


def side_at_edges(value: float | None, e: Edges) -> tuple[str, float] | None:
    """``side_of`` from the sorted buckets' ``edges`` (computed once for several quantiles)."""
    if value is None:
        return None
    first, last_finite, top = e
    if first is not None and value <= first:
        return BELOW, first
    if last_finite is not None and value >= last_finite[0] and top > last_finite[1]:
        return ABOVE, last_finite[0]
    return None
