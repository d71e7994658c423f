"""infertop/history.py pinned where a mutation run (tools/mutate.py, issue 31 item 8) found
its tests silent: a histogram's delta over a window without a reset is the newest point
minus the oldest (not a sum of steps, which rounds differently), and a quantile in the
first bucket interpolates from 0, whatever that bucket's bound."""

from __future__ import annotations

from helpers.snapkit import hist
from infertop.history import History, sorted_bucket_quantile


def test_a_window_without_a_reset_is_newest_minus_oldest() -> None:
    h = History()
    sums = (0.1, 0.2, 1.1)
    for i, s in enumerate(sums):
        h.add_readings(1000.0 + i, [hist("latency.ttft_seconds", {0.5: float(i + 1)}, s,
                                         instance="a")])
    (series,) = h.find("latency.ttft_seconds")
    d = series.hist_delta(60.0)
    assert d is not None
    # exactly 1.1 - 0.1 (1.0); the steps summed give 1.0000000000000002
    assert d.sum == sums[-1] - sums[0]
    assert d.sum != (0.2 - 0.1) + (1.1 - 0.2)
    assert d.total == 2.0 and d.buckets == ((0.5, 2.0), (float("inf"), 2.0))


def test_a_quantile_in_the_first_bucket_interpolates_from_zero() -> None:
    assert sorted_bucket_quantile(0.5, [(2.0, 10.0), (float("inf"), 10.0)]) == 1.0
    assert sorted_bucket_quantile(0.5, [(4.0, 10.0)]) == 2.0
    assert sorted_bucket_quantile(0.25, [(0.5, 10.0), (float("inf"), 10.0)]) == 0.125
