"""Bounded history per series: rates with counter resets, windowed histogram quantiles.

Memory does not grow with run time: each series keeps its newest ``max_points`` in flat
``array('d')`` buffers (at most 16 bytes a gauge point, usually less: see Series).
Time is the Snapshot's own clock (wall time live, virtual time in demo and replay), so
rates and quantiles come out the same however fast a recording is played.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import ge, itemgetter, sub

from .model import Kind, Labels, Reading, Snapshot, Status

SeriesKey = tuple[str, Labels]


@dataclass(slots=True)
class HistPoint:
    """One histogram point as the API hands it out (made on demand, not stored)."""
    time: float
    buckets: tuple[tuple[float, float], ...]
    total: float  # count
    sum: float


class Points(Sequence):
    """``Series.points``: a read-only sequence over the series' arrays, oldest first.

    Items are ``(time, value)`` tuples (gauges, counters) or HistPoints (histograms),
    made when read: what is stored is a few flat arrays per series, not an object per
    point.  One Points per Series, made once."""

    __slots__ = ("_s",)

    def __init__(self, series: Series) -> None:
        self._s = series

    def __len__(self) -> int:
        s = self._s
        return s._n - s._o

    def __getitem__(self, i):
        s = self._s
        o, n = s._o, s._n
        if isinstance(i, slice):
            return [s._point(o + k) for k in range(*i.indices(n - o))]
        if i < 0:
            i += n - o
        if not 0 <= i < n - o:
            raise IndexError("point index out of range")
        return s._point(o + i)

    def __iter__(self) -> Iterator:
        s = self._s
        for k in range(s._o, s._n):
            yield s._point(k)

    def __reversed__(self) -> Iterator:
        s = self._s
        for k in range(s._n - 1, s._o - 1, -1):
            yield s._point(k)

    def __repr__(self) -> str:
        return f"Points({list(self)!r})"


class Clock:
    """The times of History's ticks, shared by the series that have a point at every tick
    since they appeared (most of them): such a series stores no time of its own, only
    the tick of its newest point.  ``first`` is the tick number of ``t[0]``."""

    __slots__ = ("t", "first")

    def __init__(self) -> None:
        self.t = array("d")
        self.first = 0

    @property
    def ticks(self) -> int:
        """Tick number of the next tick (the newest is ticks - 1)."""
        return self.first + len(self.t)

    def advance(self, t: float) -> None:
        if not self.t or t > self.t[-1]:
            self.t.append(t)

    def cut_before(self, tick: int) -> None:
        """Forget the times of ticks before ``tick`` (no series refers to them)."""
        n = min(tick - self.first, len(self.t) - 1)
        if n > 0:
            del self.t[:n]
            self.first += n


class _HistStore:
    """A histogram series' storage: times, totals and sums a point, the bucket counts of
    all points in one flat array (float32 while every count is exact in it: whole numbers
    below 2**24, half the bytes; float64 from the first that is not), a point's start in
    it, and each point's bounds (one shared tuple while the server keeps its buckets)."""

    __slots__ = ("t", "v", "sum", "c", "co", "cbase", "b")

    def __init__(self) -> None:
        self.t = array("d")
        self.v = array("d")
        self.sum = array("d")
        self.c: array = array("f")
        self.co = array("q")        # a point's start in c ...
        self.cbase = 0              # ... less this (counts cut so far)
        self.b: list[tuple[float, ...]] = []

    def counts(self, k: int) -> array:
        lo = self.co[k] - self.cbase
        return self.c[lo:lo + len(self.b[k])]

    def buckets(self, k: int) -> tuple[tuple[float, float], ...]:
        return tuple(zip(self.b[k], self.counts(k)))

    def cut(self, extra: int) -> None:
        """Drop the oldest ``extra`` points' counts, sums and bounds (t and v: the caller)."""
        cut = self.co[extra] - self.cbase
        del self.c[:cut]
        self.cbase += cut
        del self.co[:extra]
        del self.sum[:extra]
        del self.b[:extra]


class Series:
    """One series' bounded history in flat ``array('d')`` buffers, not an object a point.

    Gauges and counters: values, and times.  Two shortcuts cover most series: a series
    with a point at every tick of its History since it appeared keeps no times (they are
    the History's Clock's, ``_t`` is None; ``_k1`` is the tick of its newest point), and
    a series whose value never changed keeps no values (``_v`` is None, ``_cv`` is the
    value).  The first gap or change makes the arrays, once.  Histograms: times, counts,
    sums, the bucket counts of all points in one flat array (float32 while they are exact
    in it) and each point's bounds (one shared tuple while they do not change).  A point costs 0-16 bytes instead of ~120.

    The arrays hold up to ``max_points`` plus some slack: the oldest points are cut in
    one move when the slack is used up (a memmove of a few KB every few dozen ticks),
    and ``_o`` hides the surplus, so the API shows exactly the newest ``max_points``."""

    __slots__ = ("key", "labels", "kind", "unit", "status", "reason", "text", "last_seen",
                 "max_points", "_clock", "_n", "_k1", "_t", "_v", "_cv", "_h", "_o", "_gen",
                 "_memo", "_view")

    def __init__(self, key: str, labels: Labels, kind: Kind, unit: str,
                 points: Iterable | None = None, status: Status = Status.OK,
                 reason: str = "", text: str | None = None, last_seen: float = 0.0,
                 max_points: int | None = None, clock: Clock | None = None) -> None:
        self.key, self.labels, self.kind, self.unit = key, labels, kind, unit
        self.status, self.reason, self.text, self.last_seen = status, reason, text, last_seen
        if max_points is None:   # Series(..., deque(maxlen=N)) as before: its maxlen
            max_points = getattr(points, "maxlen", None) or 900
        self.max_points = max_points
        hist = kind is Kind.HISTOGRAM
        self._clock = clock if clock is not None and not hist else Clock()
        self._n = 0                   # points stored (the oldest _o of them hidden)
        self._k1 = -1                 # tick of the newest point while times are shared
        # histograms' own storage; their times and totals are _t and _v (the same arrays)
        self._h = _HistStore() if hist else None
        self._t: array | None = self._h.t if self._h else None   # own times, ascending
        self._v: array | None = self._h.v if self._h else None   # values; hist: counts
        self._cv = 0.0                # the one value while _v is None
        self._o = 0                   # stored points before the newest max_points
        self._gen = 0                 # bumped on every write: keys the memo
        self._memo: tuple | None = None
        self._view = Points(self)
        for p in points or ():
            if hist:
                self.append_hist(p.time, p.buckets, p.total, p.sum)
            else:
                self.append(p[0], p[1])

    def __repr__(self) -> str:
        return (f"Series({self.key!r}, {self.labels!r}, {self.kind}, {self.unit!r}, "
                f"{len(self._view)} points, {self.status})")

    @property
    def points(self) -> Points:
        """The newest ``max_points`` points, oldest first (a read-only sequence)."""
        return self._view

    def label(self, name: str, default: str = "") -> str:
        for k, v in self.labels:
            if k == name:
                return v
        return default

    # -- storage --------------------------------------------------------------------------
    def _time(self, k: int) -> float:
        if self._t is not None:
            return self._t[k]
        c = self._clock
        return c.t[self._k1 - self._n + 1 + k - c.first]

    def _val(self, k: int) -> float:
        return self._v[k] if self._v is not None else self._cv

    def _own_times(self) -> array:
        """Times of our own from now on (a gap, or a time that is not the tick's)."""
        if self._t is None:
            c = self._clock
            lo = self._k1 - self._n + 1 - c.first
            self._t = c.t[lo:lo + self._n]
        return self._t

    def _own_values(self) -> array:
        if self._v is None:
            self._v = array("d", [self._cv]) * self._n
        return self._v

    def append(self, t: float, value: float) -> None:
        """A gauge or counter point; one at the same time or earlier replaces the newest."""
        self._gen += 1
        n, c, tt = self._n, self._clock, self._t
        if n > self._o:
            last = tt[-1] if tt is not None else c.t[self._k1 - c.first]
            if last >= t:                               # replaces the newest point
                if last != t:
                    self._own_times()[-1] = t
                if self._v is not None or value != self._cv:
                    self._own_values()[-1] = value
                return
        if tt is None:
            if c.t and t == c.t[-1] and (n == 0 or self._k1 == c.ticks - 2):
                self._k1 = c.ticks - 1    # the tick's time, right after our last tick
            else:
                self._own_times().append(t)
        else:
            tt.append(t)
        if self._v is None:
            if n == 0:
                self._cv = value
            elif value != self._cv:
                self._own_values().append(value)
        else:
            self._v.append(value)
        self._n = n + 1
        self._bound()

    def append_hist(self, t: float, buckets, total: float, hsum: float) -> None:
        """A histogram point (cumulative ``(bound, count)`` buckets); same rule as append."""
        h = self._h
        if h is None:
            raise TypeError(f"append_hist on {self.kind.value} series {self.key}")
        bounds = tuple(le for le, _ in buckets)
        b = h.b
        if b and b[-1] == bounds:
            bounds = b[-1]           # shared while the server keeps its buckets
        self._gen += 1
        tt = h.t
        if self._n > self._o and tt[-1] >= t:
            del h.c[h.co[-1] - h.cbase:]
            tt[-1], h.v[-1], h.sum[-1], b[-1] = t, total, hsum, bounds
        else:
            tt.append(t)
            h.v.append(total)
            h.sum.append(hsum)
            h.co.append(len(h.c) + h.cbase)
            b.append(bounds)
            self._n += 1
        counts = [c for _, c in buckets]
        if h.c.typecode == "f":
            narrow = array("f", counts)
            if narrow.tolist() != counts:      # not exact in float32: float64 from now on
                h.c = array("d", h.c)
                h.c.extend(counts)
            else:
                h.c.extend(narrow)
        else:
            h.c.extend(counts)
        self._bound()

    def _bound(self) -> None:
        extra = self._n - self.max_points
        if extra <= 0:
            return
        if extra <= max(8, self.max_points // 16):
            self._o = extra           # hidden, cut later in one move
            return
        if self._t is not None:
            del self._t[:extra]
        if self._v is not None:
            del self._v[:extra]
        if self._h is not None:      # (its times and totals were _t and _v, cut above)
            self._h.cut(extra)
        self._n -= extra
        self._o = 0

    def oldest_tick(self) -> int | None:
        """The clock tick of the oldest stored point while times are shared, else None."""
        return self._k1 - self._n + 1 if self._t is None and self._n else None

    def _point(self, k: int):
        h = self._h
        if h is None:
            return (self._time(k), self._val(k))
        return HistPoint(h.t[k], h.buckets(k), h.v[k], h.sum[k])

    def _bisect(self, t: float, lo: int) -> int:
        """Storage index of the first point after ``t``, from ``lo`` on."""
        if self._t is not None:
            return bisect_right(self._t, t, lo, self._n)
        c = self._clock
        base = self._k1 - self._n + 1 - c.first
        return bisect_right(c.t, t, base + lo, base + self._n) - base

    def _start(self, window: float | None, now: float | None) -> int:
        """Index of the window's first point: the newest at or before its start (the
        rate's baseline) or the oldest kept."""
        o, n = self._o, self._n
        if window is None or n <= o:
            return o
        last = self._time(n - 1)
        end = last if now is None else max(last, now)
        return max(o, self._bisect(end - window, o) - 1)

    def _values(self, i0: int) -> list[float]:
        if self._v is not None:
            return self._v[i0:self._n].tolist()
        return [self._cv] * max(0, self._n - i0)

    # -- times ------------------------------------------------------------------------------
    def first_time(self) -> float | None:
        return self._time(self._o) if self._n > self._o else None

    def last_time(self) -> float | None:
        return self._time(self._n - 1) if self._n > self._o else None

    def index_at(self, t: float) -> int | None:
        """Index into ``points`` of the newest point at or before ``t`` (0 when all are
        later), by binary search; None when there is none."""
        o = self._o
        if self._n <= o:
            return None
        return max(0, self._bisect(t, o) - 1 - o)

    # -- gauges and counters ----------------------------------------------------------------
    def last(self) -> float | None:
        if self._n <= self._o or self._h is not None:
            return None
        return self._val(self._n - 1)

    def window_points(self, window: float | None, now: float | None = None) -> list:
        return [self._point(k) for k in range(self._start(window, now), self._n)]

    def window_values(self, window: float, now: float | None,
                      after: float) -> tuple[float | None, list[float]]:
        """The values of ``window_points(window, now)`` whose time is after ``after``, and
        the time of the first of them (None when there is none): what the rules' medians
        read every tick, without a (time, value) tuple per point.  [] for a histogram."""
        if self._h is not None:
            return None, []
        i = self._start(window, now)
        if i >= self._n:
            return None, []
        j = max(i, self._bisect(after, i))
        if j >= self._n:
            return None, []
        return self._time(j), self._values(j)

    def any_nonzero(self) -> bool:
        """True when a kept value is not 0 (a counter that ever counted): one pass over
        the array, no point objects."""
        if self._h is not None or self._n <= self._o:
            return False
        return any(self._v[self._o:]) if self._v is not None else self._cv != 0

    def tail(self, n: int) -> list[float]:
        """The newest ``n`` values, oldest first (a sparkline's; [] for a histogram)."""
        if self._h is None and n > 0:
            return self._values(max(self._o, self._n - n))
        return []

    def values(self, window: float | None = None) -> list[float]:
        if self._h is not None:
            return []
        return self._values(self._start(window, None))

    def increase(self, window: float | None = None) -> tuple[float, float] | None:
        """(increase, seconds) of a counter over the window, resets counted as restarts."""
        i0, n = self._start(window, None), self._n
        if n - i0 < 2:
            return None
        secs = self._time(n - 1) - self._time(i0)
        vals = self._v
        if vals is None:
            return 0.0, secs              # never moved
        inc = 0.0
        a = vals[i0]
        for k in range(i0 + 1, n):
            b = vals[k]
            inc += b - a if b >= a else b   # a drop means the counter restarted from 0
            a = b
        return inc, secs

    def rate(self, window: float | None = None) -> float | None:
        r = self.increase(window)
        if r is None or r[1] <= 0:
            return None
        return r[0] / r[1]

    def window_rate(self, window: float, now: float) -> tuple[float, float] | None:
        """(per-second rate over the window, seconds the samples cover): the judgement's
        rate (docs/rules.md#windows), the same as Prometheus's ``rate(x[window])``.

        A window History covers (its baseline point at or before the window's start) is
        the increase over the seconds between the points, as ``rate``.  A young window
        (start-up, a source just back) is NOT the increase over the few seconds seen: as
        Prometheus does, the increase is extrapolated by at most half an average scrape
        interval beyond the points (never to before the counter's zero) and divided by the
        whole window, so 17 events in the first 10 s read 0.29/s over a 60 s window, not
        1.7/s.  None without two points."""
        i0, n = self._start(window, None), self._n
        r = self.increase(window)
        if r is None:
            return None
        inc, secs = r
        if secs <= 0:
            return None
        first_t, last_t = self._time(i0), self._time(n - 1)
        start = now - window
        if first_t <= start + 1e-9:
            return inc / secs, secs
        avg = secs / (n - i0 - 1)
        to_start = first_t - start
        if to_start >= 1.1 * avg:
            to_start = avg / 2
        first_v = self._val(i0)
        if inc > 0 and first_v >= 0:     # a counter is never extrapolated below zero
            to_start = min(to_start, secs * first_v / inc)
        to_end = max(0.0, now - last_t)
        if to_end >= 1.1 * avg:
            to_end = avg / 2
        return inc * (secs + to_start + to_end) / secs / window, secs

    def resets(self, window: float | None = None) -> list[float]:
        """Times at which this counter went backwards (a server restart)."""
        i0, vals = self._start(window, None), self._v
        if vals is None:
            return []
        return [self._time(k) for k in range(i0 + 1, self._n) if vals[k] < vals[k - 1]]

    # -- histograms ---------------------------------------------------------------------
    def hist_delta(self, window: float | None = None) -> HistPoint | None:
        """Buckets observed within the window (newest minus oldest, across resets).
        Memoised until the next write: derive asks for it once per quantile."""
        memo = self._memo
        if memo is not None and memo[0] == self._gen and memo[1] == window:
            return memo[2]
        d = self._hist_delta(window)
        self._memo = (self._gen, window, d)
        return d

    def _hist_delta(self, window: float | None) -> HistPoint | None:
        h = self._h
        if h is None:
            return None
        i0, n = self._start(window, None), self._n
        if n - i0 < 2:
            return None
        tot, b, t, sums = h.v, h.b, h.t, h.sum
        last = n - 1
        # no drop in the window (each total >= the one before), compared in C
        if all(map(ge, tot[i0 + 1:n], tot[i0:n - 1])) and _same(b[i0], b[last]):
            return HistPoint(t[last], _diff(b[last], h.counts(last), h.counts(i0)),
                             tot[last] - tot[i0], sums[last] - sums[i0])
        acc: HistPoint | None = None
        for k in range(i0 + 1, n):
            j = k - 1
            if tot[k] >= tot[j] and _same(b[j], b[k]):
                d = HistPoint(t[k], _diff(b[k], h.counts(k), h.counts(j)),
                              tot[k] - tot[j], sums[k] - sums[j])
            else:  # reset or re-bucketing: everything in k is new
                d = HistPoint(t[k], h.buckets(k), tot[k], sums[k])
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


def _same(a: tuple, b: tuple) -> bool:
    return a is b or a == b


def _diff(bounds: tuple, new: array, old: array) -> tuple[tuple[float, float], ...]:
    """((bound, max(0, new - old)), ...), the loops in C (every histogram, every tick)."""
    return tuple(zip(bounds, map(max, repeat(0.0), map(sub, new, old))))


def _same_bounds(a, b) -> bool:
    return len(a) == len(b) and all(x[0] == y[0] for x, y in zip(a, b))


def _add(a, b):
    return tuple((le, ca + cb) for (le, ca), (_, cb) in zip(a, b))


def bucket_quantile(q: float, buckets: Iterable[tuple[float, float]]) -> float | None:
    """Prometheus ``histogram_quantile``: linear interpolation inside the bucket.

    ``buckets`` are cumulative (upper bound, count) sorted by bound, +Inf last.  A rank
    that lands in the +Inf bucket returns the highest finite bound (as Prometheus does).
    """
    return sorted_bucket_quantile(q, sort_buckets(buckets))


def sort_buckets(buckets: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Buckets in the order ``bucket_quantile`` reads them (by bound, stable): sorted once
    for the several quantiles of one histogram (``sorted_bucket_quantile``)."""
    return sorted(buckets, key=_BOUND)


_BOUND = itemgetter(0)


def sorted_bucket_quantile(q: float, bs: list[tuple[float, float]]) -> float | None:
    """``bucket_quantile`` of buckets already in ``sort_buckets``'s order (not modified)."""
    if not bs or bs[-1][1] <= 0:
        return None
    if not math.isinf(bs[-1][0]):
        bs = bs + [(math.inf, bs[-1][1])]
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
        self.clock = Clock()   # tick times, shared by the series seen at every tick
        # find()'s index: (key, label name) -> label value -> series, rebuilt when the key
        # gains or loses a series (a per-GPU lookup scanned every GPU's series: n^2 a tick)
        self._members: dict[str, int] = {}     # key -> membership version
        self._label_index: dict[tuple[str, str], tuple[int, dict[str, list[Series]]]] = {}

    def __len__(self) -> int:
        return len(self._series)

    def __iter__(self) -> Iterator[Series]:
        return iter(self._series.values())

    def add(self, snap: Snapshot) -> None:
        t = snap.time
        self.now = t
        self.ticks += 1
        self.clock.advance(t)
        for sample in snap.samples.values():
            self._add_all(t, sample.readings)
        if self.ticks % 30 == 0:
            self._expire(t)

    def add_readings(self, t: float, readings: Iterable[Reading]) -> None:
        """Keep derived readings too, so a p99 or a rate has a trend line."""
        self.clock.advance(t)
        self._add_all(t, readings)

    def _add_all(self, t: float, readings: Iterable[Reading]) -> None:
        """``_add_reading`` for each reading, with Series.append's usual case inlined: a
        gauge or counter that shares the clock and had a point on the previous tick gets
        this tick's (no time of its own; its value only when it changed).  ~470 readings
        a tick on 8 GPUs: this loop was a quarter of the pipeline thread."""
        series = self._series
        clock = self.clock
        # the tick a series that had a point on the previous one is at, when ``t`` is
        # the clock's newest time (it is, unless ``t`` went back: then no shortcut)
        prev = clock.first + len(clock.t) - 2 if clock.t and clock.t[-1] == t else None
        tick = prev + 1 if prev is not None else 0     # (unused when prev is None)
        ok, hist = Status.OK, Kind.HISTOGRAM
        for r in readings:
            s = series.get((r.key, r.labels))
            if s is None:
                self._add_reading(t, r)     # a new series
                continue
            # _add_reading's steps for a series that exists, inline
            s.status, s.reason, s.last_seen = r.status, r.reason, t
            if r.text is not None:
                s.text = r.text
            value = r.value
            if r.status is not ok or value is None:
                continue   # STALE repeats an old value; never record it as a new point
            if r.kind is hist:
                if r.buckets is not None:
                    s.append_hist(t, r.buckets, value, r.hist_sum or 0.0)
                continue
            if s._k1 != prev or s._t is not None or s._h is not None:
                s.append(t, value)
                continue
            # Series.append, when its newest point is the previous tick's (so earlier
            # than t) and its times are the clock's: the point is this tick's
            s._gen += 1
            s._k1 = tick
            n = s._n
            if s._v is None:
                if n == 0:
                    s._cv = value
                elif value != s._cv:
                    s._own_values().append(value)
            else:
                s._v.append(value)
            s._n = n + 1
            if n >= s.max_points:
                s._bound()

    def _add_reading(self, t: float, r: Reading) -> None:
        sk = (r.key, r.labels)
        s = self._series.get(sk)
        if s is None:
            s = Series(r.key, r.labels, r.kind, r.unit, max_points=self.max_points,
                       clock=self.clock)
            self._series[sk] = s
            self._by_key.setdefault(r.key, {})[r.labels] = s
            self._members[r.key] = self._members.get(r.key, 0) + 1
            if r.kind is Kind.HISTOGRAM:
                self._hist_keys[r.key] = None
        s.status, s.reason, s.last_seen = r.status, r.reason, t
        if r.text is not None:
            s.text = r.text
        if r.status is not Status.OK or r.value is None:
            return  # STALE repeats an old value; never record it as a new point
        if r.kind is Kind.HISTOGRAM:
            if r.buckets is not None:
                s.append_hist(t, r.buckets, r.value, r.hist_sum or 0.0)
        else:
            s.append(t, r.value)

    def _expire(self, now: float) -> None:
        dead = [k for k, s in self._series.items() if now - s.last_seen > self.expire_after]
        for k in dead:
            del self._series[k]
            self._by_key[k[0]].pop(k[1], None)
            self._members[k[0]] = self._members.get(k[0], 0) + 1
        # the clock keeps the ticks the series that share it still have points at; a series
        # that stopped adding points but is still seen (STALE, NODATA: an idle quantile, a
        # server that is down) would pin the clock's start forever: it takes its own times
        # (past max_points plus the slack a series keeps before it cuts: _bound)
        horizon = self.clock.ticks - self.max_points - max(8, self.max_points // 16) - 1
        oldest = []
        for s in self._series.values():
            tick = s.oldest_tick()
            if tick is None:
                continue
            if tick < horizon:
                s._own_times()
            else:
                oldest.append(tick)
        self.clock.cut_before(min(oldest, default=self.clock.ticks - 1))

    def histograms(self) -> list[Series]:
        """Histogram series seen this tick."""
        return [s for k in self._hist_keys for s in self._by_key.get(k, {}).values()
                if s.kind is Kind.HISTOGRAM and s.last_seen >= self.now]

    def get(self, key: str, labels: Labels = ()) -> Series | None:
        return self._series.get((key, labels))

    def find(self, key: str, **labels: str) -> list[Series]:
        """Series of a key whose labels include all the given ones (current ones only)."""
        now = self.now
        if not labels:
            return [s for s in self._by_key.get(key, {}).values() if s.last_seen >= now]
        items = iter(labels.items())
        name, value = next(items)
        rest = tuple(items)
        return [s for s in self._with_label(key, name).get(value, ())
                if s.last_seen >= now and all(s.label(n) == v for n, v in rest)]

    def _with_label(self, key: str, name: str) -> dict[str, list[Series]]:
        """The series of ``key`` by their value of label ``name`` (built once while the
        key's series stay the same)."""
        version = self._members.get(key, 0)
        got = self._label_index.get((key, name))
        if got is not None and got[0] == version:
            return got[1]
        index: dict[str, list[Series]] = {}
        for s in self._by_key.get(key, {}).values():
            index.setdefault(s.label(name), []).append(s)
        self._label_index[(key, name)] = (version, index)
        return index

    def latest_by(self, key: str, name: str) -> dict[str, float]:
        """``latest(key, **{name: v})`` for every value ``v`` of label ``name`` at once:
        one pass over the key's current series (the first OK one with a value wins)."""
        out: dict[str, float] = {}
        for s in self.find(key):
            v = s.label(name)
            if v in out:
                continue
            x = s.last()
            if x is not None and s.status is Status.OK:
                out[v] = x
        return out

    def latest(self, key: str, **labels: str) -> float | None:
        for s in self.find(key, **labels):
            v = s.last()
            if v is not None and s.status is Status.OK:
                return v
        return None
