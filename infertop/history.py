"""Bounded history per series: rates with counter resets, windowed histogram quantiles.

Memory does not grow with run time: each series is a ring buffer of ``max_points``.
Time is the Snapshot's own clock (wall time live, virtual time in demo and replay), so
rates and quantiles come out the same however fast a recording is played.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from .model import Kind, Labels, Reading, Snapshot, Status

SeriesKey = tuple[str, Labels]


@dataclass(slots=True)
class HistPoint:
    time: float
    buckets: tuple[tuple[float, float], ...]
    total: float  # count
    sum: float


@dataclass(slots=True)
class Series:
    key: str
    labels: Labels
    kind: Kind
    unit: str
    points: deque = field(default_factory=deque)  # (time, value) or HistPoint
    status: Status = Status.OK
    reason: str = ""
    text: str | None = None
    last_seen: float = 0.0

    def label(self, name: str, default: str = "") -> str:
        for k, v in self.labels:
            if k == name:
                return v
        return default

    # -- gauges and counters ------------------------------------------------------------
    def last(self) -> float | None:
        if not self.points or self.kind is Kind.HISTOGRAM:
            return None
        return self.points[-1][1]

    def window_points(self, window: float | None, now: float | None = None) -> list:
        if window is None or not self.points:
            return list(self.points)
        end = self.points[-1].time if self.kind is Kind.HISTOGRAM else self.points[-1][0]
        if now is not None:
            end = max(end, now)
        start = end - window
        pts = []
        for p in reversed(self.points):
            t = p.time if self.kind is Kind.HISTOGRAM else p[0]
            if t <= start:
                # keep one point at/before the window start as the rate's baseline
                pts.append(p)
                break
            pts.append(p)
        pts.reverse()
        return pts

    def values(self, window: float | None = None) -> list[float]:
        return [v for _, v in self.window_points(window)] if self.kind is not Kind.HISTOGRAM else []

    def increase(self, window: float | None = None) -> tuple[float, float] | None:
        """(increase, seconds) of a counter over the window, resets counted as restarts."""
        pts = self.window_points(window)
        if len(pts) < 2:
            return None
        inc = 0.0
        for (_, a), (_, b) in zip(pts, pts[1:]):
            inc += b - a if b >= a else b  # a drop means the counter restarted from 0
        return inc, pts[-1][0] - pts[0][0]

    def rate(self, window: float | None = None) -> float | None:
        r = self.increase(window)
        if r is None or r[1] <= 0:
            return None
        return r[0] / r[1]

    def resets(self, window: float | None = None) -> list[float]:
        """Times at which this counter went backwards (a server restart)."""
        pts = self.window_points(window)
        return [b[0] for a, b in zip(pts, pts[1:]) if b[1] < a[1]]

    # -- histograms ---------------------------------------------------------------------
    def hist_delta(self, window: float | None = None) -> HistPoint | None:
        """Buckets observed within the window (newest minus oldest, across resets)."""
        pts = self.window_points(window)
        if len(pts) < 2:
            return None
        first, last = pts[0], pts[-1]
        if all(b.total >= a.total for a, b in zip(pts, pts[1:])) and \
                _same_bounds(first.buckets, last.buckets):
            return HistPoint(last.time, _sub(last.buckets, first.buckets),
                             last.total - first.total, last.sum - first.sum)
        acc: HistPoint | None = None
        for a, b in zip(pts, pts[1:]):
            if b.total >= a.total and _same_bounds(a.buckets, b.buckets):
                d = HistPoint(b.time, _sub(b.buckets, a.buckets), b.total - a.total, b.sum - a.sum)
            else:  # reset or re-bucketing: everything in b is new
                d = HistPoint(b.time, b.buckets, b.total, b.sum)
            acc = d if acc is None or not _same_bounds(acc.buckets, d.buckets) else HistPoint(
                d.time, _add(acc.buckets, d.buckets), acc.total + d.total, acc.sum + d.sum)
        return acc

    def quantile(self, q: float, window: float | None = None) -> float | None:
        d = self.hist_delta(window)
        if d is None or d.total <= 0:
            return None
        return bucket_quantile(q, d.buckets)

    def mean(self, window: float | None = None) -> float | None:
        d = self.hist_delta(window)
        if d is None or d.total <= 0:
            return None
        return d.sum / d.total


def _same_bounds(a, b) -> bool:
    return len(a) == len(b) and all(x[0] == y[0] for x, y in zip(a, b))


def _sub(a, b):
    return tuple((le, max(0.0, ca - cb)) for (le, ca), (_, cb) in zip(a, b))


def _add(a, b):
    return tuple((le, ca + cb) for (le, ca), (_, cb) in zip(a, b))


def bucket_quantile(q: float, buckets: Iterable[tuple[float, float]]) -> float | None:
    """Prometheus ``histogram_quantile``: linear interpolation inside the bucket.

    ``buckets`` are cumulative (upper bound, count) sorted by bound, +Inf last.  A rank
    that lands in the +Inf bucket returns the highest finite bound (as Prometheus does).
    """
    bs = sorted(buckets, key=lambda b: b[0])
    if not bs or bs[-1][1] <= 0:
        return None
    if not math.isinf(bs[-1][0]):
        bs.append((math.inf, bs[-1][1]))
    total = bs[-1][1]
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le, c in bs:
        if c >= rank:
            if math.isinf(le):
                return prev_le if len(bs) > 1 else None
            if c == prev_c:
                return le
            lo = prev_le if prev_le < le else 0.0
            return lo + (le - lo) * (rank - prev_c) / (c - prev_c)
        prev_le, prev_c = le, c
    return prev_le


class History:
    """All series seen so far, each bounded; feed it one Snapshot per tick."""

    def __init__(self, max_points: int = 900, expire_after: float = 120.0) -> None:
        self.max_points = max_points
        self.expire_after = expire_after  # drop series unseen this long (exited processes)
        self._series: dict[SeriesKey, Series] = {}
        self._by_key: dict[str, dict[Labels, Series]] = {}   # key -> series: find() is hot
        self._hist_keys: dict[str, None] = {}   # ordered: derived readings keep their order
        self.now: float = 0.0
        self.ticks = 0

    def __len__(self) -> int:
        return len(self._series)

    def __iter__(self) -> Iterator[Series]:
        return iter(self._series.values())

    def add(self, snap: Snapshot) -> None:
        t = snap.time
        self.now = t
        self.ticks += 1
        for sample in snap.samples.values():
            for r in sample.readings:
                self._add_reading(t, r)
        if self.ticks % 30 == 0:
            self._expire(t)

    def add_readings(self, t: float, readings: Iterable[Reading]) -> None:
        """Keep derived readings too, so a p99 or a rate has a trend line."""
        for r in readings:
            self._add_reading(t, r)

    def _add_reading(self, t: float, r: Reading) -> None:
        sk = (r.key, r.labels)
        s = self._series.get(sk)
        if s is None:
            s = Series(r.key, r.labels, r.kind, r.unit, deque(maxlen=self.max_points))
            self._series[sk] = s
            self._by_key.setdefault(r.key, {})[r.labels] = s
            if r.kind is Kind.HISTOGRAM:
                self._hist_keys[r.key] = None
        s.status, s.reason, s.last_seen = r.status, r.reason, t
        if r.text is not None:
            s.text = r.text
        if r.status is not Status.OK or r.value is None:
            return  # STALE repeats an old value; never record it as a new point
        if r.kind is Kind.HISTOGRAM:
            if r.buckets is None:
                return
            pt = HistPoint(t, r.buckets, r.value, r.hist_sum or 0.0)
            if s.points and s.points[-1].time >= t:
                s.points[-1] = pt
            else:
                s.points.append(pt)
        else:
            if s.points and s.points[-1][0] >= t:
                s.points[-1] = (t, r.value)
            else:
                s.points.append((t, r.value))

    def _expire(self, now: float) -> None:
        dead = [k for k, s in self._series.items() if now - s.last_seen > self.expire_after]
        for k in dead:
            del self._series[k]
            self._by_key[k[0]].pop(k[1], None)

    def histograms(self) -> list[Series]:
        """Histogram series seen this tick."""
        return [s for k in self._hist_keys for s in self._by_key.get(k, {}).values()
                if s.kind is Kind.HISTOGRAM and s.last_seen >= self.now]

    def get(self, key: str, labels: Labels = ()) -> Series | None:
        return self._series.get((key, labels))

    def find(self, key: str, **labels: str) -> list[Series]:
        """Series of a key whose labels include all the given ones (current ones only)."""
        return [s for s in self._by_key.get(key, {}).values()
                if s.last_seen >= self.now and all(s.label(n) == v for n, v in labels.items())]

    def latest(self, key: str, **labels: str) -> float | None:
        for s in self.find(key, **labels):
            v = s.last()
            if v is not None and s.status is Status.OK:
                return v
        return None
