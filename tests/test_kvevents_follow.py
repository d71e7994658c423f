"""The KV-event subscriber follows its publisher and its server (issue 32 item 4) and
survives hostile messages (issue 36 cases 5, 6, 13): real ZMQ sockets on loopback.  Each
test polls with a generous deadline; no timing is asserted."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import msgspec
import pytest

from infertop.probes.server.kvevents import KvEventsProbe

zmq = pytest.importorskip("zmq")

DEADLINE = 60.0


def batch(ts: float, hashes, medium="GPU") -> bytes:
    return msgspec.msgpack.encode([ts, [{"type": "BlockStored", "block_hashes": list(hashes),
                                         "parent_block_hash": None, "token_ids": [1],
                                         "block_size": 16, "lora_id": None,
                                         "medium": medium}], 0])


def values(s) -> dict[str, float]:
    return {r.key: r.value for r in s.readings}


class Publisher:
    """vLLM's ZmqEventPublisher on the wire: (topic, 8-byte seq, payload), seq from 0."""

    def __init__(self, ctx, port: int | None = None) -> None:
        self.sock = ctx.socket(zmq.PUB)
        self.sock.setsockopt(zmq.LINGER, 0)
        if port is None:
            self.port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        else:
            self.sock.bind(f"tcp://127.0.0.1:{port}")
            self.port = port
        self.seq = 0

    def send(self, body: bytes) -> None:
        self.sock.send_multipart([b"", self.seq.to_bytes(8, "big"), body])
        self.seq += 1

    def close(self) -> None:
        self.sock.close(linger=0)


async def until(probe, pub: Publisher | None, ok, what: str, body=None):
    """Collect (publishing meanwhile: ZMQ's slow joiner) until ok(sample)."""
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        if pub is not None:
            pub.send(body() if body else batch(float(pub.seq), [1000 + pub.seq]))
        await asyncio.sleep(0.02)
        s = await probe.collect()
        if ok(s):
            return s
    raise AssertionError(f"never {what}: last {s.status} {s.reason!r} {values(s)}")


def test_a_restarted_publisher_is_followed_and_stale_while_gone():
    """Issue 32 item 4: the publisher goes away (the server died): the source is stale,
    never ok, and its resident blocks are dropped; a new publisher on the same address
    (the server restarted) is joined again and the source is ok."""
    async def run():
        ctx = zmq.Context()
        pub = Publisher(ctx)
        probe = KvEventsProbe([f"tcp://127.0.0.1:{pub.port}"], "127.0.0.1:8000")
        assert (await probe.open()).available
        try:
            s = await until(probe, pub, lambda s: s.status.value == "ok" and
                            values(s).get("kv.event_resident_blocks", 0) >= 3, "ok")
            stored_before = values(s)["kv.event_blocks_stored_total"]
            pub.close()
            gone = await until(probe, None, lambda s: s.status.value == "stale", "stale")
            assert "no publisher" in gone.reason and "gone" in gone.reason
            assert values(gone)["kv.event_resident_blocks"] == 0
            assert all(r.status.value == "stale" for r in gone.readings)
            pub = Publisher(ctx, pub.port)        # the restarted server: seq from 0 again
            back = await until(probe, pub, lambda s: s.status.value == "ok" and
                               values(s)["kv.event_blocks_stored_total"] > stored_before,
                               "ok again")
            assert values(back)["kv.event_batches_dropped_total"] == 0
        finally:
            await probe.close()
            pub.close()
            ctx.term()
    asyncio.run(run())


def test_no_publisher_yet_is_never_ok():
    """Case 13: a subscriber whose publisher never answered is not ✓."""
    async def run():
        ctx = zmq.Context()
        pub = Publisher(ctx)
        port = pub.port
        pub.close()                                # a free port: nobody publishes there
        ctx.term()
        probe = KvEventsProbe([f"tcp://127.0.0.1:{port}"], "x")
        assert (await probe.open()).available
        try:
            for _ in range(5):
                s = await probe.collect()
                assert s.status.value == "stale" and "none yet" in s.reason
                await asyncio.sleep(0.05)
        finally:
            await probe.close()
    asyncio.run(run())


def test_a_bad_block_hash_does_not_kill_the_subscriber():
    """Case 6: one message with a nested list as a block hash used to end the thread
    ('every subscriber stopped', no cause); now it is counted, its cause shown, and the
    next good batch is read."""
    async def run():
        ctx = zmq.Context()
        pub = Publisher(ctx)
        probe = KvEventsProbe([f"tcp://127.0.0.1:{pub.port}"], "x")
        assert (await probe.open()).available
        try:
            await until(probe, pub, lambda s: s.status.value == "ok", "ok")
            bad = await until(probe, pub, lambda s: s.status.value == "error", "error",
                              body=lambda: batch(1.0, [[1, [2]]]))
            assert "int | bytes" in bad.reason and "undecodable" in bad.reason
            assert values(bad)["kv.event_batches_undecodable_total"] >= 1
            await until(probe, pub, lambda s: s.status.value == "ok", "ok again")
            assert all(s.thread is not None and s.thread.is_alive() for s in probe._subs)
        finally:
            await probe.close()
            pub.close()
            ctx.term()
    asyncio.run(run())


def test_collect_never_waits_on_the_trackers_lock():
    """Case 5: a big batch was processed under the lock collect() took on the event loop
    (11.5 s from key to frame); collect now reads the view the threads publish."""
    async def run():
        probe = KvEventsProbe(["tcp://127.0.0.1:1"], "x")
        with probe._lock:         # a subscriber thread in the middle of a huge batch
            return await asyncio.wait_for(probe.collect(), DEADLINE)
    assert asyncio.run(run()).source == "kvevents:x"


def test_a_restarted_server_with_a_new_config_is_resubscribed():
    """Issue 32 item 4: the screen started before the server was restarted with
    --kv-events-config: the server's new identity (pid, start time, config) subscribes."""
    async def run():
        ctx = zmq.Context()
        pub = Publisher(ctx)
        now: dict[str, Any] = {"who": (100, 1.0, None, "vllm"), "eps": []}
        probe = KvEventsProbe([], "x", resolve=lambda: (now["who"], list(now["eps"])),
                              identity=now["who"])
        probe.RESOLVE_EVERY = 0.0
        assert (await probe.open()).available
        try:
            s = await probe.collect()
            assert s.status.value == "nodata" and "--kv-events-config" in s.reason
            now["who"] = (200, 2.0, '{"enable_kv_cache_events": true}', "vllm")
            now["eps"] = [f"tcp://127.0.0.1:{pub.port}"]
            await until(probe, pub, lambda s: s.status.value == "ok" and
                        values(s).get("kv.event_blocks_stored_total", 0) > 0, "subscribed")
            assert probe.resubscribed == 1
            now["who"], now["eps"] = (300, 3.0, None, "vllm"), []   # restarted without
            s = await until(probe, None, lambda s: s.status.value == "nodata", "dropped")
            assert probe._subs == []
        finally:
            await probe.close()
            pub.close()
            ctx.term()
    asyncio.run(run())


def test_a_decoder_behind_its_publisher_drops_over_its_byte_budget(monkeypatch):
    """Case 5: messages received and not yet decoded are bounded in bytes (QUEUE_BYTES);
    beyond it one is dropped, and the sequence gap counts it as a lost batch."""
    import infertop.probes.server.kvevents as mod
    monkeypatch.setattr(mod, "QUEUE_BYTES", 20_000)

    async def run():
        ctx = zmq.Context()
        pub = Publisher(ctx)
        probe = KvEventsProbe([f"tcp://127.0.0.1:{pub.port}"], "x")
        assert (await probe.open()).available
        try:
            await until(probe, pub, lambda s: values(s).get("kv.event_batches_total", 0) > 0,
                        "first batch")
            sub = probe._subs[0]
            with probe._lock:          # the decoding thread stalls in the tracker
                end = time.monotonic() + DEADLINE
                while sub.queue_drops == 0 and time.monotonic() < end:
                    pub.send(batch(1.0, range(pub.seq * 1000, pub.seq * 1000 + 500)))
                    s = await probe.collect()         # never waits on the stalled lock
                    await asyncio.sleep(0.005)
                assert sub.queue_drops > 0 and sub.queued_bytes <= 20_000 + 10_000
            s = await until(probe, pub, lambda s: values(s).get(
                "kv.event_batches_dropped_total", 0) >= 1, "drops counted")
            assert values(s)["kv.event_batches_undecodable_total"] == 0
        finally:
            await probe.close()
            pub.close()
            ctx.term()
    asyncio.run(run())


def test_the_server_is_followed_by_one_stat_while_it_lives(monkeypatch):
    """Issue 32 item 4: a vLLM found without --kv-events-config is followed; while its
    process lives with the same start time no scan of every process is made, and a
    restart (a new start time) with the flag gives the new endpoints."""
    import argparse
    import os
    from types import SimpleNamespace

    import infertop.probes.server.discovery as discovery
    import infertop.probes.server.kvevents as mod
    from infertop.probes.registry import LiveTarget

    server = SimpleNamespace(pid=os.getpid(), kind="vllm", cmdline=["vllm", "serve", "m"])
    scans = []

    def find_server(pid: int | None = None, url: str | None = None) -> SimpleNamespace:
        scans.append(1)
        return server
    monkeypatch.setattr(discovery, "find_server", find_server)
    start = {"t": 100.0}
    monkeypatch.setattr(mod, "_start_time", lambda pid: start["t"])
    (probe,) = mod.kv_event_probes(argparse.Namespace(kv_events=[]), LiveTarget())
    assert probe.endpoints == [] and probe.identity[3] == "vllm"
    assert probe.resolve is not None   # a probe that follows the server
    for _ in range(10):
        assert probe.resolve() == (probe.identity, [])
    assert len(scans) == 1
    server.cmdline = ["vllm", "serve", "m", "--kv-events-config",
                      '{"enable_kv_cache_events": true, "endpoint": "tcp://*:6001"}']
    start["t"] = 200.0                                   # restarted
    identity, endpoints = probe.resolve()
    assert len(scans) == 2 and endpoints == ["tcp://127.0.0.1:6001"] and identity[1] == 200.0
