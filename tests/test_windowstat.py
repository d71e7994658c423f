"""windowstat: the window statistics the rules judge by (recent values, median, share)."""

from __future__ import annotations

import pytest

from infertop.history import Series
from infertop.model import Kind
from infertop.windowstat import median, recent_values, share


def gauge(start: int, end: int) -> Series:
    """A gauge with one point a second from ``start`` to ``end``, its value the time."""
    return Series("kv.usage_ratio", (), Kind.GAUGE, "ratio",
                  points=[(float(t), float(t)) for t in range(start, end + 1)])


@pytest.mark.parametrize("values,want", [
    ([5.0], 5.0),
    ([3.0, 1.0, 2.0], 2.0),
    ([5.0, 1.0, 4.0, 2.0, 3.0], 3.0),
    ([1.0, 2.0], 1.5),                  # even count: the mean of the two middle values
    ([4.0, 1.0, 3.0, 2.0], 2.5),
    ([10.0, 0.0, 6.0, 2.0, 8.0, 4.0], 5.0),
])
def test_median_of_odd_and_even_counts(values, want):
    assert median(values) == want


def test_median_of_nothing_is_none():
    assert median([]) is None
    assert median(None) is None


def test_median_does_not_reorder_the_callers_list():
    values = [3.0, 1.0, 2.0]
    median(values)
    assert values == [3.0, 1.0, 2.0]


def test_share_counts_the_values_that_hold():
    assert share([1.0, 2.0, 3.0, 4.0], lambda v: v >= 3) == 0.5
    assert share([1.0, 2.0, 3.0, 4.0], lambda v: v >= 4) == 0.25
    assert share([1.0, 2.0, 3.0], lambda v: v > 10) == 0.0
    assert share([7.0], lambda v: True) == 1.0


def test_share_of_nothing_is_none():
    assert share([], lambda v: True) is None
    assert share(None, lambda v: True) is None


def test_recent_values_are_the_ticks_inside_the_window():
    # (now - seconds, now] = (6, 10]: the tick at 6 is the rate baseline, not a value
    assert recent_values(gauge(0, 10), 4.0, 10.0) == [7.0, 8.0, 9.0, 10.0]


def test_recent_values_need_half_the_window_of_ticks():
    # the window is (6, 10]; a series must reach back to its middle (8) to be judged
    assert recent_values(gauge(8, 10), 4.0, 10.0) == [8.0, 9.0, 10.0]
    assert recent_values(gauge(9, 10), 4.0, 10.0) is None
    s = Series("kv.usage_ratio", (), Kind.GAUGE, "ratio",
               points=[(8.5, 1.0), (9.5, 2.0), (10.0, 3.0)])
    assert recent_values(s, 4.0, 10.0) is None       # starts just after the middle


def test_recent_values_of_a_series_with_no_tick_in_the_window():
    assert recent_values(gauge(0, 5), 4.0, 10.0) is None       # all before the window
    empty = Series("kv.usage_ratio", (), Kind.GAUGE, "ratio")
    assert recent_values(empty, 4.0, 10.0) is None


def test_recent_values_of_a_histogram_are_none():
    from infertop.history import HistPoint
    s = Series("latency.ttft_seconds", (), Kind.HISTOGRAM, "s",
               points=[HistPoint(float(t), ((1.0, t), (float("inf"), t)), float(t), 0.5 * t)
                       for t in range(11)])
    assert recent_values(s, 4.0, 10.0) is None
