"""infertop/reading_index.py pinned (tools/mutate.py, issue 31 item 8): what a person reads
(``shown``) leaves out a key's counters and histograms but keeps its gauges, a key with
only cumulative readings is not shown at all, and derived readings follow the raw ones."""

from __future__ import annotations

from helpers.snapkit import reading, sample, snap
from infertop.model import Kind, Reading
from infertop.reading_index import ReadingIndex


def _cumulative(key: str, value: float, instance: str) -> Reading:
    r = reading(key, value, instance=instance)
    assert r.kind in (Kind.COUNTER, Kind.HISTOGRAM)
    return r


def test_shown_leaves_cumulative_readings_out_and_keeps_the_rest() -> None:
    gauge = reading("server.requests_running", 3.0, instance="a")
    counter = _cumulative("server.requests_finished_total", 10.0, instance="a")
    # one key with a gauge and a counter reading (a dialect mapping one key both ways)
    odd_gauge = reading("server.requests_running", 1.0, instance="b")
    odd_counter = Reading("server.requests_running", 5.0, "count",
                          (("instance", "c"),), kind=Kind.COUNTER)
    s = sample("server:x", 1.0, [gauge, counter, odd_gauge, odd_counter])
    derived = [reading("server.requests_per_second", 2.0, instance="a"),
               reading("server.requests_running", 7.0, instance="d")]
    idx = ReadingIndex(snap(1.0, s), derived)
    assert idx.raw["server.requests_finished_total"] == [counter]
    assert idx.raw["server.requests_running"] == [gauge, odd_gauge, odd_counter]
    # a key of counters only: not shown
    assert "server.requests_finished_total" not in idx.shown
    # the key's counter left out, its gauges kept, then its derived reading
    assert idx.shown["server.requests_running"] == [gauge, odd_gauge, derived[1]]
    assert idx.shown["server.requests_per_second"] == [derived[0]]
    assert idx.derived == {"server.requests_per_second": [derived[0]],
                           "server.requests_running": [derived[1]]}


def test_a_key_of_gauges_only_shares_its_list_with_raw() -> None:
    gauge = reading("server.requests_running", 3.0, instance="a")
    idx = ReadingIndex(snap(1.0, sample("server:x", 1.0, [gauge])), [])
    assert idx.shown["server.requests_running"] is idx.raw["server.requests_running"]
