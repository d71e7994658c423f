import math

import pytest

from infertop.history import History, bucket_quantile
from infertop.model import Status
from helpers.snapkit import hist, reading, sample, snap


def feed(h, t, *readings):
    h.add(snap(t, sample("s", t, list(readings))))


def test_counter_rate_over_window():
    h = History()
    for t in range(0, 11):
        feed(h, t, reading("server.prompt_tokens_total", 100 * t, instance="a"))
    s = h.get("server.prompt_tokens_total", (("instance", "a"),))
    assert s.rate(5) == pytest.approx(100.0)
    assert s.rate(None) == pytest.approx(100.0)


def test_counter_reset_counts_restart_not_negative():
    h = History()
    vals = [0, 50, 100, 10, 60]  # restart after t=2: counter from 0 to 10
    for t, v in enumerate(vals):
        feed(h, t, reading("server.generation_tokens_total", v))
    s = h.find("server.generation_tokens_total")[0]
    inc, secs = s.increase(None)
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
    assert s.quantile(0.5, 30) > 0.01          # window sees only the slow ones
    assert bucket_quantile(0.5, last.buckets) <= 0.01   # lifetime buckets would hide them
    assert s.mean(30) == pytest.approx(0.5)


def test_histogram_reset_in_window():
    h = History()
    feed(h, 0, hist("latency.e2e_seconds", {1.0: 50, 2.0: 60}, 70.0))
    feed(h, 1, hist("latency.e2e_seconds", {1.0: 55, 2.0: 70}, 80.0))
    feed(h, 2, hist("latency.e2e_seconds", {1.0: 0, 2.0: 4}, 6.0))  # restart
    d = h.find("latency.e2e_seconds")[0].hist_delta(None)
    assert d.total == 10 + 4
    assert dict(d.buckets)[1.0] == 5
