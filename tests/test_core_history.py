import math

import pytest

from helpers.snapkit import hist, reading, sample, snap
from infertop.history import History, bucket_quantile
from infertop.model import Status


def feed(h, t, *readings):
    h.add(snap(t, sample("s", t, list(readings))))


def test_counter_rate_over_window():
    h = History()
    for t in range(0, 11):
        feed(h, t, reading("server.prompt_tokens_total", 100 * t, instance="a"))
    s = h.get("server.prompt_tokens_total", (("instance", "a"),))
    assert s is not None
    assert s.rate(5) == pytest.approx(100.0)
    assert s.rate(None) == pytest.approx(100.0)


def test_counter_reset_counts_restart_not_negative():
    h = History()
    vals = [0, 50, 100, 10, 60]  # restart after t=2: counter from 0 to 10
    for t, v in enumerate(vals):
        feed(h, t, reading("server.generation_tokens_total", v))
    s = h.find("server.generation_tokens_total")[0]
    increase = s.increase(None)
    assert increase is not None
    inc, secs = increase
    assert inc == 50 + 50 + 10 + 50
    assert secs == 4
    assert s.resets() == [3]


def test_stale_and_error_readings_are_not_points():
    h = History()
    feed(h, 0, reading("gpu.util_ratio", 0.5, gpu=0))
    feed(h, 1, reading("gpu.util_ratio", 0.9, gpu=0, status=Status.STALE))
    feed(h, 2, reading("gpu.util_ratio", None, gpu=0, status=Status.ERROR))
    s = h.find("gpu.util_ratio")[0]
    assert s.values() == [0.5]
    assert s.status is Status.ERROR
    assert h.latest("gpu.util_ratio") is None  # current status is not OK


def test_ring_buffer_is_bounded():
    h = History(max_points=50)
    for t in range(1000):
        feed(h, t, reading("gpu.util_ratio", t % 7 / 7, gpu=0))
    assert len(h.find("gpu.util_ratio")[0].points) == 50


def test_series_of_vanished_process_expires():
    h = History(expire_after=10)
    feed(h, 0, reading("process.cpu_ratio", 1.0, pid=1))
    for t in range(1, 61):
        feed(h, t, reading("process.cpu_ratio", 1.0, pid=2))
    assert h.get("process.cpu_ratio", (("pid", "1"),)) is None
    assert h.find("process.cpu_ratio")[0].label("pid") == "2"


def test_bucket_quantile_matches_prometheus_interpolation():
    # 10 obs <= 0.1, 20 <= 0.5, 20 total: median rank 10 -> exactly at 0.1
    b = [(0.1, 10), (0.5, 20), (math.inf, 20)]
    assert bucket_quantile(0.5, b) == pytest.approx(0.1)
    # rank 15 -> halfway between 0.1 and 0.5
    assert bucket_quantile(0.75, b) == pytest.approx(0.3)
    # first bucket interpolates from 0
    assert bucket_quantile(0.25, b) == pytest.approx(0.05)
    # in the +Inf bucket -> the highest finite bound
    assert bucket_quantile(0.99, [(1.0, 5), (math.inf, 10)]) == 1.0
    assert bucket_quantile(0.5, [(1.0, 0), (math.inf, 0)]) is None


def test_windowed_quantile_uses_bucket_deltas_not_lifetime():
    h = History()
    # lifetime: 1000 fast requests long ago (<= 0.01 s)
    for t in range(0, 101, 10):
        feed(h, t, hist("latency.ttft_seconds", {0.01: 10 * t, 1.0: 10 * t}, 0.001 * t))
    # in the last 30 s: 10 slow ones (0.01 < x <= 1.0), nothing fast
    last = hist("latency.ttft_seconds", {0.01: 1000, 1.0: 1010}, 5.1)
    feed(h, 130, last)
    s = h.find("latency.ttft_seconds")[0]
    windowed, lifetime = s.quantile(0.5, 30), bucket_quantile(0.5, last.buckets or ())
    assert windowed is not None and windowed > 0.01          # window sees only the slow ones
    assert lifetime is not None and lifetime <= 0.01   # lifetime buckets would hide them
    assert s.mean(30) == pytest.approx(0.5)


def test_histogram_reset_in_window():
    h = History()
    feed(h, 0, hist("latency.e2e_seconds", {1.0: 50, 2.0: 60}, 70.0))
    feed(h, 1, hist("latency.e2e_seconds", {1.0: 55, 2.0: 70}, 80.0))
    feed(h, 2, hist("latency.e2e_seconds", {1.0: 0, 2.0: 4}, 6.0))  # restart
    d = h.find("latency.e2e_seconds")[0].hist_delta(None)
    assert d is not None
    assert d.total == 10 + 4
    assert dict(d.buckets)[1.0] == 5


def test_a_rate_needs_two_samples_in_the_window():
    h = History()
    feed(h, 0, reading("server.prompt_tokens_total", 100, instance="a"))
    s = h.find("server.prompt_tokens_total")[0]
    assert s.increase(None) is None and s.rate(None) is None
    feed(h, 2, reading("server.prompt_tokens_total", 160, instance="a"))
    assert s.increase(None) == (60.0, 2.0)          # two samples are enough
    assert s.rate(None) == pytest.approx(30.0)
    assert s.rate(60) == pytest.approx(30.0)
    # a counter that never moved: an increase of 0 over the span, a rate of 0
    h = History()
    for t in range(3):
        feed(h, t, reading("server.prompt_tokens_total", 7, instance="a"))
    s = h.find("server.prompt_tokens_total")[0]
    assert s.increase(None) == (0.0, 2.0) and s.rate(None) == 0.0


def test_a_rate_over_zero_seconds_is_none():
    from infertop.history import Series
    from infertop.model import Kind
    s = Series("server.prompt_tokens_total", (), Kind.COUNTER, "tokens",
               points=[(5.0, 1.0), (5.0, 2.0)])          # same time: one point replaced
    assert len(s.points) == 1 and s.rate(None) is None


def test_the_window_starts_at_the_newest_point_at_or_before_its_start():
    """The baseline of a windowed increase is the last point at or before now - window:
    a 5 s window over points 1 s apart is 5 increments."""
    h = History()
    for t in range(11):
        feed(h, t, reading("server.prompt_tokens_total", t * t, instance="a"))
    s = h.find("server.prompt_tokens_total")[0]
    assert s.increase(5) == (100.0 - 25.0, 5.0)
    assert s.increase(4.5) == (100.0 - 25.0, 5.0)    # baseline t=5, at or before 5.5
    assert s.window_points(2) == [(8.0, 64.0), (9.0, 81.0), (10.0, 100.0)]
    assert s.values(2) == [64.0, 81.0, 100.0]
    assert s.resets(5) == []


def test_latest_and_last_read_ok_series_only():
    h = History()
    feed(h, 0, reading("gpu.util_ratio", 0.25, gpu=0))
    feed(h, 1, reading("gpu.util_ratio", 0.75, gpu=0))
    assert h.latest("gpu.util_ratio") == 0.75 and h.latest("gpu.util_ratio", gpu="0") == 0.75
    assert h.latest("gpu.util_ratio", gpu="1") is None
    s = h.find("gpu.util_ratio", gpu="0")[0]
    assert s.last() == 0.75 and s.first_time() == 0.0 and s.last_time() == 1.0
    assert h.find("gpu.util_ratio", gpu="1") == []


def test_find_returns_only_series_seen_this_tick_and_filters_by_every_label():
    h = History()
    feed(h, 0, reading("process.cpu_ratio", 0.5, pid=1, name="a"),
         reading("process.cpu_ratio", 0.5, pid=2, name="b"))
    feed(h, 1, reading("process.cpu_ratio", 0.6, pid=2, name="b"))
    assert [s.label("pid") for s in h.find("process.cpu_ratio")] == ["2"]
    assert [s.label("pid") for s in h.find("process.cpu_ratio", pid="2", name="b")] == ["2"]
    assert h.find("process.cpu_ratio", pid="2", name="a") == []
    assert h.find("process.cpu_ratio", pid="1") == []       # not seen this tick
    assert h.get("process.cpu_ratio", (("name", "a"), ("pid", "1"))) is not None


def test_quantile_and_mean_need_observations():
    h = History()
    feed(h, 0, hist("latency.ttft_seconds", {0.1: 4}, 0.2))
    s = h.find("latency.ttft_seconds")[0]
    assert s.quantile(0.5) is None and s.mean() is None and s.hist_delta() is None
    feed(h, 1, hist("latency.ttft_seconds", {0.1: 4}, 0.2))   # no new request
    delta = s.hist_delta()
    assert delta is not None and delta.total == 0
    assert s.quantile(0.5) is None and s.mean() is None
    feed(h, 2, hist("latency.ttft_seconds", {0.1: 8}, 0.4))
    assert s.quantile(0.5) == pytest.approx(0.05) and s.mean() == pytest.approx(0.05)
    assert h.histograms() == [s]
    assert s.last() is None and s.values() == [] and s.tail(3) == []


def test_bucket_quantile_edges():
    # unsorted input, no +Inf bucket: sorted and completed
    assert bucket_quantile(0.5, [(0.5, 20), (0.1, 10)]) == pytest.approx(0.1)
    # interpolation inside the bucket, from the previous bound
    assert bucket_quantile(0.5, [(0.1, 0), (0.2, 10), (0.4, 10)]) == pytest.approx(0.15)
    # a rank met by a bucket that adds nothing (rank 0 here) is that bucket's bound
    assert bucket_quantile(0.0, [(0.1, 0), (0.2, 10)]) == 0.1
    # only +Inf: nothing to say
    assert bucket_quantile(0.5, [(math.inf, 10)]) is None
    assert bucket_quantile(0.5, []) is None
    # a negative first bound interpolates from it, not from 0
    assert bucket_quantile(0.5, [(-1.0, 0), (1.0, 10)]) == pytest.approx(0.0)


def test_a_histogram_point_at_the_same_time_replaces_the_newest():
    from infertop.history import HistPoint, Series
    from infertop.model import Kind
    inf = math.inf
    s = Series("latency.ttft_seconds", (), Kind.HISTOGRAM, "s", points=[
        HistPoint(1.0, ((0.1, 2.0), (inf, 4.0)), 4.0, 1.0),
        HistPoint(2.0, ((0.1, 3.0), (inf, 6.0)), 6.0, 1.5)])
    assert [p.time for p in s.points] == [1.0, 2.0]
    s.append_hist(2.0, ((0.1, 5.0), (inf, 9.0)), 9.0, 2.5)      # the same scrape, again
    assert len(s.points) == 2
    p = s.points[-1]
    assert (p.time, p.buckets, p.total, p.sum) == (2.0, ((0.1, 5.0), (inf, 9.0)), 9.0, 2.5)
    d = s.hist_delta(None)
    assert d is not None
    assert (d.total, d.sum, d.buckets) == (5.0, 1.5, ((0.1, 3.0), (inf, 5.0)))


def test_oldest_tick_is_known_only_while_times_are_shared():
    h = History()
    for t in range(5):
        feed(h, t, reading("gpu.util_ratio", 0.5, gpu=0))
        if t >= 2:
            feed(h, t, reading("gpu.util_ratio", 0.5, gpu=1))
    shared = h.find("gpu.util_ratio", gpu="0")[0]
    assert shared.oldest_tick() == 0
    assert h.find("gpu.util_ratio", gpu="1")[0].oldest_tick() == h.clock.first + 2
    h.add(snap(5.5, sample("s", 5.5, [])))           # a tick without it ...
    feed(h, 6, reading("gpu.util_ratio", 0.5, gpu=0))  # ... a gap: its own times now
    assert shared.oldest_tick() is None and shared.first_time() == 0.0
    from infertop.history import Series
    from infertop.model import Kind
    assert Series("gpu.util_ratio", (), Kind.GAUGE, "ratio").oldest_tick() is None


def test_points_read_backwards_and_index_at():
    h = History()
    for t in range(4):
        feed(h, t, reading("gpu.util_ratio", t / 10, gpu=0))
    s = h.find("gpu.util_ratio")[0]
    assert list(reversed(s.points)) == list(s.points)[::-1] == \
        [(3.0, 0.3), (2.0, 0.2), (1.0, 0.1), (0.0, 0.0)]
    assert s.index_at(-5.0) == 0          # before the first point: the oldest
    assert s.index_at(0.0) == 0 and s.index_at(2.5) == 2 and s.index_at(99.0) == 3


def test_replacing_the_newest_point_of_a_series_that_never_changed():
    """A series whose values were all equal keeps one value, not an array: a different
    value at the same time must still replace the newest."""
    h = History()
    feed(h, 0, reading("gpu.util_ratio", 0.5, gpu=0))
    feed(h, 1, reading("gpu.util_ratio", 0.5, gpu=0))
    s = h.find("gpu.util_ratio")[0]
    s.append(1.0, 0.9)
    assert list(s.points) == [(0.0, 0.5), (1.0, 0.9)]
    s.append(1.0, 0.9)
    assert list(s.points) == [(0.0, 0.5), (1.0, 0.9)]


def test_bucket_quantile_rank_exactly_at_a_bucket_count():
    # rank 10 of 20 is met by the first bucket: 0.1, not the empty bucket after it
    assert bucket_quantile(0.5, [(0.1, 10), (0.5, 10), (math.inf, 20)]) == pytest.approx(0.1)


def test_a_readings_text_is_kept_until_a_new_text_comes():
    h = History()
    feed(h, 0, reading("server.info", 1.0, text="vllm 0.6.3", instance="a"))
    feed(h, 1, reading("server.info", 1.0, instance="a"))
    assert h.find("server.info")[0].text == "vllm 0.6.3"
    feed(h, 2, reading("server.info", 1.0, text="vllm 0.7.0", instance="a"))
    assert h.find("server.info")[0].text == "vllm 0.7.0"


def test_histograms_lists_only_those_seen_this_tick():
    h = History()
    feed(h, 0, hist("latency.ttft_seconds", {0.1: 4}, 0.2, instance="a"),
         hist("latency.ttft_seconds", {0.1: 4}, 0.2, instance="b"))
    feed(h, 1, hist("latency.ttft_seconds", {0.1: 5}, 0.3, instance="a"))
    assert [s.label("instance") for s in h.histograms()] == ["a"]


def test_histogram_restarting_twice_in_the_window():
    """A crash loop: every scrape after the first is a fresh process, so each one's counts
    are all new (5 + 2 observations), never negative deltas."""
    h = History()
    feed(h, 0, hist("latency.e2e_seconds", {1.0: 8, 2.0: 10}, 12.0))
    feed(h, 1, hist("latency.e2e_seconds", {1.0: 4, 2.0: 5}, 6.0))
    feed(h, 2, hist("latency.e2e_seconds", {1.0: 1, 2.0: 2}, 2.5))
    d = h.find("latency.e2e_seconds")[0].hist_delta(None)
    assert d is not None
    assert d.total == 7 and d.sum == pytest.approx(8.5)
    assert dict(d.buckets) == {1.0: 5, 2.0: 7, math.inf: 7}


def test_a_histogram_delta_is_computed_once_per_tick():
    """derive asks for the window's delta once per quantile: the answer is memoised."""
    h = History()
    for t in range(3):
        feed(h, t, hist("latency.e2e_seconds", {1.0: 4 * t}, 2.0 * t))
    s = h.find("latency.e2e_seconds")[0]
    d = s.hist_delta(60)
    assert d is not None and d is s.hist_delta(60)
    assert d.total == 8
