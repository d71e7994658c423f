"""infertop/kvevents.py pinned where a mutation run (tools/mutate.py, issue 31 item 8) found
its tests silent: array32 batches, an event with no tag after one of a new type, the
stream cap's exact size, a repeated sequence number, the first batch's time, the
resident cap, and evictions forgotten by time leaving the eviction cap's count."""

from __future__ import annotations

import msgspec
import pytest

from infertop import kvevents
from infertop.kvevents import Batch, Event, KvEventsError, KvEventTracker, decode_batch


def test_array16_and_array32_are_arrays_and_map16_is_not() -> None:
    assert kvevents._is_array(0x90) and kvevents._is_array(0x9F)
    assert kvevents._is_array(0xDC) and kvevents._is_array(0xDD)
    assert not kvevents._is_array(0xDE) and not kvevents._is_array(0x80)
    # a batch encoded as an array32 (older vLLM's array_like, written long): [ts, [], 2]
    raw = (b"\xdd\x00\x00\x00\x03" + msgspec.msgpack.encode(5.0) + b"\xdd\x00\x00\x00\x00"
           + msgspec.msgpack.encode(2))
    b = decode_batch(raw)
    assert (b.ts, b.rank, b.events) == (5.0, 2, ())


def test_an_error_is_one_line_of_at_most_120_characters() -> None:
    assert len(kvevents._one_line(ValueError("x" * 500))) == 120
    assert kvevents._one_line(ValueError("short")) == "short"


@pytest.mark.parametrize("events", [
    [42],                                                    # no tag at all
    [{"type": "NewEventOfALaterVllm", "x": 1}, 42],          # a new type, then no tag
])
def test_an_event_without_a_type_refuses_the_batch(events: list) -> None:
    with pytest.raises(KvEventsError, match="^events: "):
        decode_batch(msgspec.msgpack.encode({"ts": 1.0, "events": events}))


def test_an_event_of_a_new_type_alone_is_skipped() -> None:
    b = decode_batch(msgspec.msgpack.encode({"ts": 1.0, "events": [{"type": "Later"}]}))
    assert b.events == ()


def _stored(ts: float, *hashes: int, rank: int | None = None) -> Batch:
    return Batch(ts, rank, (Event("stored", hashes, "GPU", len(hashes)),))


def _removed(ts: float, *hashes: int) -> Batch:
    return Batch(ts, None, (Event("removed", hashes, "GPU", len(hashes)),))


def test_streams_beyond_the_cap_share_one_other_stream() -> None:
    t = KvEventTracker()
    for i in range(KvEventTracker.MAX_STREAMS + 10):
        t.add(f"tcp://h:{i}", 0, _stored(1.0))
    assert len(t.streams) == KvEventTracker.MAX_STREAMS
    assert "other" in t.streams and t.streams["other"].batches == 11
    assert "tcp://h:62" in t.streams and "tcp://h:63" not in t.streams


def test_a_repeated_sequence_number_is_a_restart_and_forgets_the_resident_blocks() -> None:
    t = KvEventTracker()
    t.add("s", 5, _stored(1.0, 1, 2))
    t.add("s", 6, _stored(2.0, 3))
    assert t.totals()["resident"] == 3.0
    t.add("s", 6, _stored(3.0))
    assert t.streams["s"].restarts == 1 and t.streams["s"].dropped == 0
    assert t.totals()["resident"] == 0.0
    t.add("s", 7, _stored(4.0))   # the next one in order: neither a gap nor a restart
    assert t.streams["s"].restarts == 1 and t.streams["s"].dropped == 0


def test_since_is_the_first_batchs_time() -> None:
    t = KvEventTracker()
    assert t.since is None
    t.add("s", 0, _stored(12.5, 1))
    t.add("s", 1, _stored(20.0, 2))
    assert t.since == 12.5


def test_the_resident_cap_holds_exactly_max_resident_blocks() -> None:
    t = KvEventTracker(max_resident=2)
    t.add("s", 0, _stored(1.0, 1, 2, 3))
    assert t.totals()["resident"] == 2.0
    assert t.engines[("0", "GPU")].resident_capped is True
    assert t.totals()["stored"] == 3


def test_evictions_forgotten_by_time_leave_the_eviction_cap() -> None:
    # two evictions age out of the window; a third must then be remembered under a cap
    # of two, and its block stored again soon after is a restore (thrash)
    t = KvEventTracker(restore_window=10.0, max_evicted=2)
    t.add("s", 0, _stored(0.0, 1, 2, 3))
    t.add("s", 1, _removed(0.0, 1, 2))
    t.add("s", 2, _removed(100.0, 3))
    t.add("s", 3, _stored(101.0, 3))
    assert t.totals()["restored"] == 1
    assert t._evicted_n == 0


def test_the_eviction_cap_keeps_the_newest_evictions() -> None:
    t = KvEventTracker(max_evicted=2)
    t.add("s", 0, _stored(0.0, 1, 2, 3))
    t.add("s", 1, _removed(1.0, 1, 2, 3))
    assert t._evicted_n == 2
    t.add("s", 2, _stored(2.0, 1, 2, 3))
    assert t.totals()["restored"] == 2    # 1 was forgotten: the oldest
