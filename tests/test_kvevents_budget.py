"""Budget before decode (issue 36 item 3): a KV-event batch's block hashes are counted from
their msgpack array headers and only those within the batch's budget are decoded; the
hashes past it are counted, never turned into objects (a 15 MB batch of 3M hashes used to
become 3M Python ints before the budget cut it to 100k)."""

from __future__ import annotations

import tracemalloc

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infertop import kvevents
from infertop.kvevents import KvEventsError, decode_batch

# every width a msgpack int or bin takes: fixints, 8/16/32/64-bit, negatives, digests
HASH = st.one_of(st.integers(0, 127), st.integers(-32, -1), st.integers(0, 2 ** 8 - 1),
                 st.integers(0, 2 ** 16 - 1), st.integers(0, 2 ** 32 - 1),
                 st.integers(0, 2 ** 64 - 1), st.integers(-(2 ** 63), 2 ** 63 - 1),
                 st.binary(min_size=0, max_size=40), st.binary(min_size=32, max_size=32),
                 st.binary(min_size=256, max_size=300))
UNIFORM = st.one_of(st.lists(st.integers(2 ** 63, 2 ** 64 - 1), max_size=60),
                    st.lists(st.binary(min_size=32, max_size=32), max_size=60))


def _batch(lists: list[list[int | bytes]], array_like: bool) -> bytes:
    events = [{"type": "BlockStored" if i % 2 == 0 else "BlockRemoved", "block_hashes": h,
               "medium": "GPU"} for i, h in enumerate(lists)]
    if array_like:
        return msgspec.msgpack.encode([1.0, [[e["type"], e["block_hashes"]] for e in events],
                                       0])
    return msgspec.msgpack.encode({"ts": 1.0, "events": events})


@settings(max_examples=150, deadline=None)
@given(lists=st.lists(st.one_of(st.lists(HASH, max_size=40), UNIFORM), max_size=5),
       budget=st.integers(0, 120), array_like=st.booleans())
def test_exactly_the_first_hashes_within_the_budget_are_kept_and_all_counted(
        lists: list[list[int | bytes]], budget: int, array_like: bool) -> None:
    old = kvevents.MAX_HASHES_PER_BATCH
    kvevents.MAX_HASHES_PER_BATCH = budget
    try:
        b = decode_batch(_batch(lists, array_like))
    finally:
        kvevents.MAX_HASHES_PER_BATCH = old
    flat = [h for hs in lists for h in hs]
    assert [e.blocks for e in b.events] == [len(hs) for hs in lists]
    assert [h for e in b.events for h in e.hashes] == flat[:budget]


def test_hashes_past_the_budget_are_never_decoded() -> None:
    """1.5M 64-bit hashes (13.5 MB of msgpack): decoding them all made 1.5M ints (~60 MB
    with their list) before the budget kept 100k; now ~100k ints are made."""
    hashes = list(range(2 ** 63, 2 ** 63 + 1_500_000))
    body = msgspec.msgpack.encode({"ts": 1.0, "events": [
        {"type": "BlockStored", "block_hashes": hashes[i::3], "medium": "GPU"}
        for i in range(3)]})
    del hashes
    tracemalloc.start()
    try:
        b = decode_batch(body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sum(e.blocks for e in b.events) == 1_500_000
    assert sum(len(e.hashes) for e in b.events) == kvevents.MAX_HASHES_PER_BATCH
    assert peak < 20_000_000, peak


@pytest.mark.parametrize("bad", [b"\x81\xa1a\x01", b"\x05", b"\xc0"])
def test_a_hash_list_that_is_not_an_array_is_one_line(bad: bytes) -> None:
    """block_hashes is read as raw msgpack first: a map, an int or nil is refused there."""
    body = (b"\x82\xa2ts\xcb" + msgspec.msgpack.encode(1.0)[1:] + b"\xa6events\x91\x82"
            b"\xa4type\xacBlockRemoved\xacblock_hashes" + bad)
    with pytest.raises(KvEventsError, match=r"^not a KV-event batch: events\[0\]") as e:
        decode_batch(body)
    assert "\n" not in str(e.value)


def test_a_wrong_hash_inside_the_budget_is_still_refused() -> None:
    """The prefix within the budget is decoded typed: a float there refuses the batch."""
    body = msgspec.msgpack.encode({"ts": 1.0, "events": [
        {"type": "BlockStored", "block_hashes": [1, 2, 1.5, *range(200_000)]}]})
    with pytest.raises(KvEventsError, match=r"^not a KV-event batch: .*block_hashes"):
        decode_batch(body)
