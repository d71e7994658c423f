"""History's compact storage (issue 11, item 5): flat arrays per series, same answers as
the object-per-point deque it replaced.  A naive model (a bounded deque of the points
appended) is the reference: whatever the arrays do with slack and cuts, the API must show
exactly the newest ``max_points`` and compute rates and bucket deltas from them."""

from __future__ import annotations

import math
import random
import sys
from array import array
from collections import deque

import pytest

from helpers.snapkit import hist, reading, sample, snap
from infertop.history import History, HistPoint, Series, bucket_quantile
from infertop.model import Kind


def feed(h, t, *readings):
    h.add(snap(t, sample("s", t, list(readings))))


def naive_increase(pts):
    inc = 0.0
    for (_, a), (_, b) in zip(pts, pts[1:]):
        inc += b - a if b >= a else b
    return inc, pts[-1][0] - pts[0][0]


def naive_window(pts, window):
    if window is None:
        return list(pts)
    start = pts[-1][0] - window
    before = [p for p in pts if p[0] <= start]
    return before[-1:] + [p for p in pts if p[0] > start]


@pytest.mark.parametrize("cap", [1, 5, 50, 900])
def test_gauge_points_are_exactly_the_newest_max_points(cap):
    rnd = random.Random(cap)
    s = Series("server.generation_tokens_total", (), Kind.COUNTER, "", max_points=cap)
    ref: deque = deque(maxlen=cap)
    v = 0.0
    for t in range(3 * cap + 137):
        v = 0.0 if rnd.random() < 0.02 else v + rnd.randint(0, 9)   # resets now and then
        s.append(float(t), v)
        ref.append((float(t), v))
        if t % 7 == 0 or t > 3 * cap + 120:
            assert list(s.points) == list(ref)
            assert len(s.points) == len(ref)
            assert s.points[0] == ref[0] and s.points[-1] == ref[-1]
            assert s.values() == [x for _, x in ref]
            for w in (None, 3.0, 10.5, float(cap)):
                got = s.window_points(w)
                assert got == naive_window(list(ref), w)
                if len(got) >= 2:
                    assert s.increase(w) == pytest.approx(naive_increase(got))
                else:
                    assert s.increase(w) is None
    assert s.resets() == [b[0] for a, b in zip(ref, list(ref)[1:]) if b[1] < a[1]]
    # bounded: the arrays never hold much more than max_points
    assert s._t is not None and len(s._t) <= cap + max(8, cap // 16)


def test_points_is_a_read_only_sequence_with_slices_and_negative_indices():
    s = Series("gpu.util_ratio", (("gpu", "0"),), Kind.GAUGE, "ratio", max_points=4)
    for t in range(10):
        s.append(float(t), t / 10)
    pts = s.points
    assert pts[-1] == (9.0, 0.9) and pts[-2] == (8.0, 0.8) and pts[0] == (6.0, 0.6)
    assert pts[1:3] == [(7.0, 0.7), (8.0, 0.8)]
    assert list(reversed(pts)) == [(9.0, 0.9), (8.0, 0.8), (7.0, 0.7), (6.0, 0.6)]
    with pytest.raises(IndexError):
        pts[4]
    with pytest.raises(IndexError):
        pts[-5]
    assert bool(Series("x", (), Kind.GAUGE, "").points) is False
    assert s.first_time() == 6.0 and s.last_time() == 9.0 and s.last() == 0.9
    assert s.index_at(7.5) == 1 and s.index_at(0.0) == 0 and s.index_at(100) == 3


def test_a_point_at_the_same_time_replaces_the_newest():
    h = History(max_points=3)
    for t, v in ((1, 1.0), (2, 2.0), (2, 5.0), (3, 3.0), (4, 4.0), (4, 7.0)):
        feed(h, t, reading("gpu.util_ratio", v, gpu=0))
    assert list(h.find("gpu.util_ratio")[0].points) == [(2.0, 5.0), (3.0, 3.0), (4.0, 7.0)]


def test_the_old_constructor_with_a_deque_of_points_still_works():
    s = Series("gpu.util_ratio", (), Kind.GAUGE, "ratio", deque([(1.0, 0.5), (2.0, 0.6)], maxlen=7))
    assert s.max_points == 7 and list(s.points) == [(1.0, 0.5), (2.0, 0.6)]


def _cum(counts: dict[float, float]):
    return tuple(sorted(counts.items()))


def test_histograms_match_a_naive_model_across_cuts_resets_and_rebucketing():
    rnd = random.Random(7)
    cap = 40
    s = Series("latency.ttft_seconds", (), Kind.HISTOGRAM, "s", max_points=cap)
    ref: deque = deque(maxlen=cap)
    bounds: tuple[float, ...] = (0.1, 0.5, 1.0, math.inf)
    counts = [0.0] * len(bounds)
    total = hsum = 0.0
    for t in range(400):
        if t in (100, 250):                 # re-bucketed (a restart with other buckets)
            bounds = (0.05, 0.1, 0.5, 1.0, 2.0, math.inf) if t == 100 else (0.2, math.inf)
            counts = [0.0] * len(bounds)
            total = hsum = 0.0
        elif rnd.random() < 0.03:           # a restart: everything from zero
            counts = [0.0] * len(bounds)
            total = hsum = 0.0
        new = [rnd.randint(0, 3) for _ in bounds]
        run = 0.0
        for i, n in enumerate(new):
            run += n
            counts[i] += run
        total, hsum = counts[-1], hsum + run * 0.3
        buckets = tuple(zip(bounds, counts))
        s.append_hist(float(t), buckets, total, hsum)
        ref.append(HistPoint(float(t), buckets, total, hsum))
        if t % 13 == 0 or t > 390:
            assert list(s.points) == list(ref)
            for w in (None, 5.0, 30.0):
                want = _naive_hist_delta(naive_window_h(list(ref), w))
                got = s.hist_delta(w)
                assert (got is None) == (want is None)
                if got is not None:
                    assert got.time == want.time and got.total == want.total
                    assert got.sum == pytest.approx(want.sum)
                    assert got.buckets == want.buckets
                    if got.total > 0:
                        assert s.quantile(0.9, w) == bucket_quantile(0.9, want.buckets)
    assert s._t is not None and len(s._t) <= cap + 8


def naive_window_h(pts, window):
    if window is None:
        return pts
    start = pts[-1].time - window
    before = [p for p in pts if p.time <= start]
    return before[-1:] + [p for p in pts if p.time > start]


def _naive_hist_delta(pts):
    """The deque version's algorithm, kept here as the reference."""
    def same(a, b):
        return len(a) == len(b) and all(x[0] == y[0] for x, y in zip(a, b))

    def sub(a, b):
        return tuple((le, max(0.0, ca - cb)) for (le, ca), (_, cb) in zip(a, b))

    def add(a, b):
        return tuple((le, ca + cb) for (le, ca), (_, cb) in zip(a, b))

    if len(pts) < 2:
        return None
    first, last = pts[0], pts[-1]
    if all(b.total >= a.total for a, b in zip(pts, pts[1:])) and same(first.buckets, last.buckets):
        return HistPoint(last.time, sub(last.buckets, first.buckets),
                         last.total - first.total, last.sum - first.sum)
    acc = None
    for a, b in zip(pts, pts[1:]):
        if b.total >= a.total and same(a.buckets, b.buckets):
            d = HistPoint(b.time, sub(b.buckets, a.buckets), b.total - a.total, b.sum - a.sum)
        else:
            d = HistPoint(b.time, b.buckets, b.total, b.sum)
        acc = d if acc is None or not same(acc.buckets, d.buckets) else HistPoint(
            d.time, add(acc.buckets, d.buckets), acc.total + d.total, acc.sum + d.sum)
    return acc


def test_a_histogram_memo_is_dropped_by_the_next_point():
    h = History()
    feed(h, 0, hist("latency.e2e_seconds", {1.0: 0, 2.0: 0}, 0.0))
    feed(h, 1, hist("latency.e2e_seconds", {1.0: 5, 2.0: 5}, 2.0))
    s = h.find("latency.e2e_seconds")[0]
    first = s.hist_delta(None)
    assert first is not None and first.total == 5
    feed(h, 2, hist("latency.e2e_seconds", {1.0: 5, 2.0: 9}, 8.0))
    second = s.hist_delta(None)
    assert second is not None and second.total == 9 and s.mean(None) == pytest.approx(8 / 9)


def test_storage_is_flat_arrays_of_bounded_size():
    """A gauge seen every tick stores no times (the History's clock has them); one that
    never changed stores no values; one with gaps and moving values has two arrays of
    about 16 bytes a point; a histogram's bounds are one tuple shared by all its points;
    the clock keeps only the ticks the series still have points at."""
    h = History(max_points=900)
    for t in range(2000):
        rs = [reading("gpu.util_ratio", 0.5, gpu=0),
              reading("gpu.temp_celsius", 60 + t % 7, gpu=0),
              hist("latency.ttft_seconds", {0.1: t, 1.0: 2 * t}, 0.1 * t)]
        if t % 3:
            rs.append(reading("gpu.power_watts", 400 + t % 11, gpu=0))
        feed(h, t, *rs)
    steady = h.find("gpu.util_ratio")[0]
    assert steady._t is None and steady._v is None and len(steady.points) == 900
    assert steady.values() == [0.5] * 900 and steady.first_time() == 1100
    moving = h.find("gpu.temp_celsius")[0]
    assert moving._t is None and isinstance(moving._v, array)
    assert moving.values()[-3:] == [60 + t % 7 for t in (1997, 1998, 1999)]
    gappy = h.find("gpu.power_watts")[0]
    assert isinstance(gappy._t, array) and isinstance(gappy._v, array)
    stored = sys.getsizeof(gappy._t) + sys.getsizeof(gappy._v)
    assert stored < 900 * 16 * 1.25
    hs = h.find("latency.ttft_seconds")[0]
    assert hs._h is not None   # a histogram series keeps its store
    assert len({id(b) for b in hs._h.b}) == 1
    assert len(hs._h.c) <= (900 + 56) * 3
    assert len(h.clock.t) <= 900 + 56 + 30


@pytest.mark.parametrize("seed", range(6))
def test_history_matches_a_naive_model_with_gaps_repeats_and_time_going_back(seed):
    """Series that come and go, skip ticks, repeat a tick, hold a value or move, and a
    clock that steps back now and then: every series shows what a bounded deque of its
    points would (same-or-earlier time replaces the newest, as History always did)."""
    rnd = random.Random(seed)
    cap = 30
    h = History(max_points=cap, expire_after=25)
    ref: dict[str, deque] = {}
    last_seen: dict[str, float] = {}
    t = 1000.0
    for tick in range(500):
        r = rnd.random()
        t = t - rnd.choice((1.0, 0.5)) if r < 0.03 else (t if r < 0.06 else t + 1.0)
        rs = []
        for name in ("steady", "moving", "gappy", "rare", "late", "flip"):
            if name == "gappy" and rnd.random() < 0.3 or name == "rare" and rnd.random() < 0.9:
                continue
            if name == "late" and tick < 200:
                continue
            v = {"steady": 1.0, "moving": rnd.random(), "gappy": float(rnd.randint(0, 3)),
                 "rare": 7.0, "late": 2.0, "flip": 1.0 if tick < 300 else 0.0}[name]
            rs.append(reading("gpu.util_ratio", v, gpu=name))
            q = ref.setdefault(name, deque(maxlen=cap))
            if q and q[-1][0] >= t:
                q[-1] = (t, v)
            else:
                q.append((t, v))
            last_seen[name] = t
        feed(h, t, *rs)
        # find()'s label index gives what a scan of every series of the key gives
        for name in ("steady", "gappy", "late", "nope"):
            scan = [x for x in h._by_key.get("gpu.util_ratio", {}).values()
                    if x.last_seen >= h.now and x.label("gpu") == name]
            assert h.find("gpu.util_ratio", gpu=name) == scan, (name, tick)
        assert h.find("gpu.util_ratio") == [x for x in h._by_key["gpu.util_ratio"].values()
                                            if x.last_seen >= h.now]
        for name in ref:
            if ref[name] and h.get("gpu.util_ratio", (("gpu", name),)) is None:
                # expired: History forgets a series it has not seen for expire_after
                assert last_seen[name] < h.now - h.expire_after + 5, (name, tick)
                ref[name] = deque(maxlen=cap)
        if tick % 17 == 0 or tick > 490:
            for name, q in ref.items():
                s = h.get("gpu.util_ratio", (("gpu", name),))
                if not q:
                    continue
                assert s is not None, (name, tick)
                assert list(s.points) == list(q), (name, tick)
                assert s.values() == [v for _, v in q]
                assert s.first_time() == q[0][0] and s.last_time() == q[-1][0]
                if any(a[0] >= b[0] for a, b in zip(q, list(q)[1:])):
                    continue    # a step back left times out of order: no window then
                for w in (None, 4.0, 12.5):
                    assert s.window_points(w) == naive_window(list(q), w)
                for w, now in ((4.0, h.now), (12.5, h.now), (6.0, h.now + 3), (9.0, h.now - 2)):
                    # the rules' window read without tuples, against the tuples it replaced
                    after = now - w
                    pts = [p for p in s.window_points(w, now) if p[0] > after]
                    assert s.window_values(w, now, after) == (
                        (pts[0][0] if pts else None), [v for _, v in pts])
                assert s.index_at(q[len(q) // 2][0]) == max(
                    i for i, p in enumerate(q) if p[0] <= q[len(q) // 2][0])


def test_tail_and_any_nonzero_read_the_kept_points_only():
    s = Series("server.estimated_flops_total", (), Kind.COUNTER, "", max_points=4)
    assert s.tail(3) == [] and not s.any_nonzero()
    s.append(0.0, 5.0)               # a count that will fall out of the newest 4
    for t in range(1, 5):
        s.append(float(t), 0.0)
    assert not s.any_nonzero()       # 5.0 is stored (slack) but not kept
    assert s.tail(2) == [0.0, 0.0] and s.tail(10) == [0.0] * 4
    s.append(5.0, 2.0)
    assert s.any_nonzero() and s.tail(2) == [0.0, 2.0]
    h = Series("latency.ttft_seconds", (), Kind.HISTOGRAM, "s")
    h.append_hist(1.0, ((1.0, 3.0), (math.inf, 3.0)), 3.0, 1.0)
    assert h.tail(5) == [] and not h.any_nonzero()


def test_bucket_counts_stay_exact_when_float32_cannot_hold_them():
    """Counts are kept in float32 while they are whole numbers float32 holds exactly; the
    first that is not (a busy server passes 2**24 in a bucket) moves the series to
    float64, and every count reads back as it came in."""
    s = Series("latency.ttft_seconds", (), Kind.HISTOGRAM, "s", max_points=10)
    big = float(2**24 + 1)          # not a float32
    pts = [(1.0, 100.0), (2.0, 160.0), (3.0, big), (4.0, big + 7)]
    assert s._h is not None   # a histogram series keeps its store
    for t, c in pts:
        s.append_hist(t, ((0.1, c / 2), (math.inf, c)), c, c * 0.01)
        if t == 2.0:
            assert s._h.c.typecode == "f"
    assert s._h.c.typecode == "d"
    assert [p.buckets for p in s.points] == [((0.1, c / 2), (math.inf, c)) for _, c in pts]
    d = s.hist_delta(1.0)            # t 3 -> 4: 7 observations on top of 2**24 + 1
    assert d is not None and d.total == 7 and d.buckets == ((0.1, 3.5), (math.inf, 7.0))


def test_a_series_that_goes_stale_does_not_pin_the_shared_clock():
    """An idle quantile (NODATA) or a dead server (STALE) keeps being seen without adding
    points: the clock of tick times must still be trimmed, or it grows every tick."""
    from infertop.model import Status
    h = History(max_points=100)
    for i in range(5000):
        t = 1000.0 + i
        live = reading("gpu.util_ratio", 0.5, gpu=0)
        stale = reading("kv.usage_ratio", 0.3 if i < 10 else None,
                        status=Status.OK if i < 10 else Status.STALE)
        feed(h, t, live, stale)
    assert len(h.clock.t) <= 100 + 8 + 1 + 30 + 1    # max_points, cut slack, an expiry period
    s = h.get("kv.usage_ratio")
    assert s is not None
    assert [p[0] for p in s.points] == [1000.0 + i for i in range(10)]   # its own times kept
    assert [p[1] for p in s.points] == [0.3] * 10
    live_series = h.get("gpu.util_ratio", (("gpu", "0"),))
    assert live_series is not None and len(live_series.points) == 100


def test_histogram_storage_only_on_histograms():
    # a gauge has no bucket storage: a histogram point sent to it is a caller's bug, said
    # as such, not an AttributeError on None deep inside
    g = Series("gpu.util_ratio", (), Kind.GAUGE, "ratio")
    with pytest.raises(TypeError, match="append_hist on gauge series gpu.util_ratio"):
        g.append_hist(1.0, ((math.inf, 1.0),), 1.0, 0.1)
    assert g.hist_delta() is None and g.quantile(0.5) is None
