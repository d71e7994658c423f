"""Subscribe to a server's KV-cache events (vLLM ``--kv-events-config``, ZMQ PUB).

One ``KvEventsProbe`` per server; per publisher endpoint a receiving thread takes
``(topic, seq, payload)`` messages off the socket (and the socket monitor's connect and
disconnect events) into a byte-bounded queue, and a decoding thread decodes them
(``infertop.kvevents``) and updates one ``KvEventTracker`` under a lock, then publishes the
readings as one tuple; ``collect`` reads that tuple, so a tick never waits on a socket or
on the lock.  A publisher that goes away makes the source stale (never ok) and drops what
it had resident; without ``--kv-events`` the server's identity is followed (resubscribe on
a restart with a new pid, start time or ``--kv-events-config``).  pyzmq is an optional
extra (``pip install 'infertop[kv-events]'``): without it the source is unavailable with
that one-line reason, and nothing else changes.

Endpoints come from ``--kv-events URL`` or from the server's own command line
(``kv_events_endpoints``): vLLM binds ``tcp://*:5557`` by default, one port per
data-parallel rank (base + rank).
"""

from __future__ import annotations

import asyncio
import collections
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from infertop.kvevents import (
    MAX_PAYLOAD_BYTES,
    MISSING_DEPENDENCY,
    KvEventsError,
    KvEventTracker,
    decode_batch,
    parse_frames,
)
from infertop.meta import KvEventsMeta
from infertop.model import Capability, Sample, Status
from infertop.textclean import clean

from ..base import Probe
from ..flags import BUILTIN_FLAGS
from ..registry import LiveTarget, ProbeSpec, ProbeUsageError, register

DEFAULT_ENDPOINT = "tcp://*:5557"   # vLLM KVEventsConfig.endpoint's default
POLL_MS = 200                       # how often a subscriber thread checks for close()
# ZMQ drops the connection on a bigger message; up to it a message is received and, over
# the decoder's 16 MB cap, refused with its size as the reason (a cause that can be shown)
MAX_MESSAGE_BYTES = 64 * 1024 * 1024


def kv_events_endpoints(config_text: str | None, data_parallel_size: str | None = None,
                        host: str = "127.0.0.1") -> list[str]:
    """Subscriber endpoints for a ``--kv-events-config`` JSON value: [] when events are
    off, the publisher is not ZMQ, or the value is not JSON.  A bind address (``*``,
    ``0.0.0.0``, ``::``) is reached on ``host``; data-parallel ranks publish on base port +
    rank (vLLM ``ZmqEventPublisher.offset_endpoint_port``)."""
    if not config_text:
        return []
    try:
        cfg = json.loads(config_text)
    except (ValueError, RecursionError):
        return []
    if not isinstance(cfg, dict) or not cfg.get("enable_kv_cache_events"):
        return []
    publisher = cfg.get("publisher") or "zmq"
    endpoint = cfg.get("endpoint") or DEFAULT_ENDPOINT
    if publisher != "zmq" or not isinstance(endpoint, str):
        return []
    try:
        ranks = max(1, min(64, int(data_parallel_size or 1)))
    except ValueError:
        ranks = 1
    return [e for e in (_subscriber_endpoint(endpoint, r, host) for r in range(ranks)) if e]


def _subscriber_endpoint(endpoint: str, rank: int, host: str) -> str:
    if endpoint.startswith("ipc://"):
        return endpoint if rank == 0 else ""      # vLLM offsets only tcp and inproc
    if not endpoint.startswith("tcp://"):
        return ""                                 # inproc: not reachable from outside
    addr = endpoint[len("tcp://"):]
    where, _, port = addr.rpartition(":")
    if not port.isdigit():
        return ""
    if where in ("*", "0.0.0.0", "[::]", "::", "[*]", ""):
        where = host
    return f"tcp://{where}:{int(port) + rank}"


def _zmq():
    import zmq
    return zmq


def endpoint_problem(ep: str) -> str:
    """Why ``ep`` cannot be a publisher's address ('' when it can): ZMQ's connect accepts
    ``tcp://127.0.0.1:99999`` and then waits for ever (issue 36 case 13)."""
    if ep.startswith("ipc://"):
        return "" if len(ep) > len("ipc://") else "ipc:// without a path"
    if not ep.startswith("tcp://"):
        return "expected tcp://HOST:PORT or ipc://PATH"
    where, _, port = ep[len("tcp://"):].rpartition(":")
    if not where:
        return "no host"
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        return "the port is not 1-65535"
    return ""


# Socket events that say whether a publisher is there (ZMQ reconnects by itself: a restarted
# publisher on the same address is joined again without a new socket)
_MONITOR = ("EVENT_CONNECTED", "EVENT_HANDSHAKE_SUCCEEDED", "EVENT_DISCONNECTED")
RCVHWM = 1_000    # messages ZMQ queues for a slow subscriber (vLLM: one per engine step);
#                   beyond it ZMQ drops them, and the sequence gap counts each one
# bytes received and not yet decoded, per publisher: the receiving thread takes messages off
# ZMQ's queue at once and hands them to the decoding thread up to this much; beyond it a
# message is dropped (the next one's sequence gap counts it as a lost batch, shown as
# kv.event_batches_dropped_per_second).  4 of the largest batches accepted; the real
# server's largest is 6.5 kB (issue 36 case 5: a 60 MB batch every 5 s grew RSS to 2.65 GB)
QUEUE_BYTES = 4 * MAX_PAYLOAD_BYTES


class _Subscriber:
    """One publisher endpoint: its socket, its thread, whether a publisher is connected."""

    def __init__(self, endpoint: str, sock: Any, monitor: Any, name: str) -> None:
        self.endpoint = endpoint
        self.sock = sock
        self.monitor = monitor
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.name = name
        self.connected = False
        self.gone_since: float | None = None    # the publisher went away at (time.time())
        self.bad = ""                           # the last message's decode error, if it was
        self.worker: threading.Thread | None = None   # decodes what the receiver queued
        self.queue: collections.deque = collections.deque()
        self.queued_bytes = 0
        self.queue_drops = 0                   # messages dropped over QUEUE_BYTES
        self.cond = threading.Condition()

    def alive(self) -> bool:
        return all(t is not None and t.is_alive() for t in (self.thread, self.worker))


class KvEventsProbe(Probe):
    """KV-cache event summaries of one server (``instance`` as its metrics source).

    ``resolve`` (when the endpoints come from the server's own command line): called off
    the event loop every ``RESOLVE_EVERY`` s, it returns the server's identity (pid, start
    time, the endpoints its --kv-events-config names); a new identity resubscribes."""

    RESOLVE_EVERY = 5.0

    def __init__(self, endpoints: list[str], instance: str, topic: str = "",
                 tracker: KvEventTracker | None = None,
                 resolve: Callable[[], tuple[Any, list[str]]] | None = None,
                 identity: Any = None) -> None:
        self.endpoints = list(endpoints)
        self.instance = instance
        self.topic = topic
        self.name = f"kvevents:{instance}"
        self.tracker = tracker or KvEventTracker()
        self.resolve = resolve
        self.identity = identity
        self._lock = threading.Lock()      # the tracker, between subscriber threads
        self._subs: list[_Subscriber] = []
        self._errors: dict[str, str] = {}
        self._ctx: Any = None
        # what collect() shows: (readings, since), replaced whole by the subscriber threads
        # after their work, so collect on the event loop never takes the tracker's lock
        self._view: tuple[tuple, float | None] = ((), None)
        self._resolving: asyncio.Future | None = None
        self._retired: list[_Subscriber] = []   # stopped by a resubscription, maybe closing
        self._resolved_at = time.monotonic()
        self.resubscribed = 0

    async def open(self) -> Capability:
        try:
            zmq = _zmq()
        except ImportError:
            return Capability(self.name, False, MISSING_DEPENDENCY)
        if not self.endpoints and self.resolve is None:
            return Capability(self.name, False, "no KV-event endpoint (give --kv-events URL, "
                                                "or start vLLM with --kv-events-config)")
        if self._ctx is None:
            self._ctx = zmq.Context()
            self._subscribe(self.endpoints)
            if self.endpoints and not self._subs:
                return Capability(self.name, False, "; ".join(self._errors.values())[:300])
        return Capability(self.name, True, features=frozenset({"kv_events"}))

    def _subscribe(self, endpoints: list[str]) -> None:
        zmq = _zmq()
        for ep in endpoints:
            problem = endpoint_problem(ep)
            if problem:
                self._errors[ep] = clean(f"cannot subscribe to {ep}: {problem}")[:200]
                continue
            try:
                sock = self._ctx.socket(zmq.SUB)
                sock.setsockopt(zmq.LINGER, 0)
                sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
                sock.setsockopt(zmq.RCVHWM, RCVHWM)
                sock.setsockopt(zmq.SUBSCRIBE, self.topic.encode())
                mask = 0
                for ev in _MONITOR:
                    mask |= getattr(zmq, ev, 0)
                monitor = sock.get_monitor_socket(mask)
                sock.connect(ep)    # connect never waits: ZMQ reconnects by itself
            except zmq.ZMQError as e:
                self._errors[ep] = clean(f"cannot subscribe to {ep}: {e}")[:200]
                continue
            sub = _Subscriber(ep, sock, monitor, f"infertop-kvevents-{len(self._subs)}")
            sub.thread = threading.Thread(target=self._run, args=(sub,), daemon=True,
                                          name=sub.name)
            sub.worker = threading.Thread(target=self._work, args=(sub,), daemon=True,
                                          name=sub.name + "-decode")
            self._subs.append(sub)
            sub.worker.start()
            sub.thread.start()

    def _run(self, sub: _Subscriber) -> None:
        """One publisher's messages until its stop; never raises: a bad message is counted
        as undecodable with its reason kept, a socket error ends this stream with its."""
        import zmq
        from zmq.utils.monitor import recv_monitor_message
        poller = zmq.Poller()
        poller.register(sub.sock, zmq.POLLIN)
        poller.register(sub.monitor, zmq.POLLIN)
        try:
            while not sub.stop.is_set():
                ready = dict(poller.poll(POLL_MS))
                if sub.monitor in ready:
                    ev = recv_monitor_message(sub.monitor)["event"]
                    if ev == zmq.EVENT_DISCONNECTED:
                        self._gone(sub)
                    else:
                        sub.connected, sub.gone_since = True, None
                if sub.sock not in ready:
                    continue
                frames = sub.sock.recv_multipart(copy=True)
                size = sum(len(f) for f in frames)
                with sub.cond:
                    if sub.queue and sub.queued_bytes + size > QUEUE_BYTES:
                        sub.queue_drops += 1      # the sequence gap counts it as lost
                        continue
                    sub.queue.append(frames)
                    sub.queued_bytes += size
                    sub.cond.notify()
        except Exception as e:   # a ZMQ error, or a bug: this stream ends with its reason
            if not sub.stop.is_set():
                self._errors[sub.endpoint] = clean(f"{sub.endpoint}: {type(e).__name__}: "
                                                   f"{e}")[:200]
        finally:
            sub.connected = False
            sub.stop.set()                 # the decoding thread ends with it
            with sub.cond:
                sub.cond.notify()
            try:
                sub.sock.disable_monitor()
            except Exception:
                pass
            sub.monitor.close(linger=0)
            sub.sock.close(linger=0)

    def _work(self, sub: _Subscriber) -> None:
        """Decode and track what the receiving thread queued, until its stop; never raises
        (a bug in one message is that message's decode error, shown)."""
        published = 0.0
        while True:
            with sub.cond:
                while not sub.queue and not sub.stop.is_set():
                    sub.cond.wait(POLL_MS / 1000)
                if not sub.queue:
                    return                     # stopped, nothing left
                frames = sub.queue.popleft()
                sub.queued_bytes -= sum(len(f) for f in frames)
                more = bool(sub.queue)
            try:
                self._message(sub, frames)
            except Exception as e:             # a bug: this message, not the stream
                sub.bad = clean(f"{sub.endpoint}: {type(e).__name__}: {e}")[:200]
            now = time.monotonic()
            if now - published > 0.1 or not more:
                self._publish()
                published = now

    def _message(self, sub: _Subscriber, frames: list) -> None:
        try:   # decoding outside the lock: a big batch never holds up another stream
            seq, payload = parse_frames(frames)
            batch = decode_batch(payload)
        except KvEventsError as e:
            sub.bad = clean(f"undecodable batch from {sub.endpoint}: {e}")[:200]
            with self._lock:
                self.tracker.add_undecodable(sub.endpoint)
            return
        sub.connected, sub.gone_since, sub.bad = True, None, ""
        with self._lock:   # bounded: at most MAX_HASHES_PER_BATCH hashes tracked a batch
            self.tracker.add(sub.endpoint, seq, batch)

    def _gone(self, sub: _Subscriber) -> None:
        """The publisher went away: what it had resident is unknown from now on (its
        batches not yet decoded are dropped with it)."""
        sub.connected, sub.gone_since = False, time.time()
        with sub.cond:
            sub.queue.clear()
            sub.queued_bytes = 0
        with self._lock:
            self.tracker.forget_stream(sub.endpoint)
        self._publish()

    def _publish(self) -> None:
        with self._lock:
            self._view = (tuple(self.tracker.readings(self.instance)), self.tracker.since)

    async def collect(self) -> Sample:
        now = time.time()
        await self._follow()
        readings, since = self._view
        meta = KvEventsMeta(endpoints=tuple(self.endpoints), since=since)
        if not self.endpoints:
            why = ("the server publishes no KV events (vLLM --kv-events-config)"
                   if self.identity is not None else "no server found: nothing to follow")
            return Sample(self.name, now, (), Status.NODATA, why, meta)
        subs = [s for s in self._subs if s.alive()]
        if not subs:
            why = "; ".join(self._errors.values()) or "every subscriber stopped"
            return Sample(self.name, now, readings, Status.ERROR, why[:300], meta)
        bad = [s.bad for s in subs if s.bad]
        if bad:       # the last message of a stream did not decode: not healthy
            return Sample(self.name, now, readings, Status.ERROR, "; ".join(bad)[:300], meta)
        if not any(s.connected for s in subs):
            gone = [s.gone_since for s in subs if s.gone_since is not None]
            why = (f"no publisher at {', '.join(self.endpoints)}"[:200] +
                   (f" (gone {now - max(gone):.0f} s ago)" if gone else " (none yet)"))
            stale = tuple(r.with_status(Status.STALE, why) for r in readings)
            return Sample(self.name, now, stale, Status.STALE, why, meta)
        return Sample(self.name, now, readings, meta=meta)

    async def _follow(self) -> None:
        """Every RESOLVE_EVERY s, ask (off the loop) who the server is now; a new pid,
        start time or --kv-events-config resubscribes (the old streams' state dropped)."""
        if self.resolve is None:
            return
        task = self._resolving
        if task is not None and task.done():
            self._resolving = None
            try:
                identity, endpoints = task.result()
            except Exception:
                identity, endpoints = self.identity, self.endpoints   # try again later
            if identity != self.identity or endpoints != self.endpoints:
                await self._resubscribe(identity, endpoints)
        elif task is None and time.monotonic() - self._resolved_at >= self.RESOLVE_EVERY:
            self._resolved_at = time.monotonic()
            self._resolving = asyncio.ensure_future(asyncio.to_thread(self.resolve))

    async def _resubscribe(self, identity: Any, endpoints: list[str]) -> None:
        old, self._subs = self._subs, []
        for s in old:
            s.stop.set()          # each thread closes its own socket within POLL_MS
        self._retired = [s for s in self._retired + old
                         if s.thread is not None and s.thread.is_alive()]
        for s in old:
            with s.cond:
                s.cond.notify()
        await asyncio.to_thread(self._forget, [s.endpoint for s in old])  # the lock: off the loop
        self._errors.clear()
        self.identity, self.endpoints = identity, list(endpoints)
        self.resubscribed += 1
        if self._ctx is not None:
            self._subscribe(self.endpoints)

    def _forget(self, endpoints: list[str]) -> None:
        with self._lock:
            for ep in endpoints:
                self.tracker.forget_stream(ep)
        self._publish()

    async def close(self) -> None:
        for s in self._subs:
            s.stop.set()
        if self._resolving is not None:
            self._resolving.cancel()
        await asyncio.to_thread(self._join)   # up to one poll interval: off the loop

    def _join(self) -> None:
        subs = self._subs + self._retired
        for s in subs:
            with s.cond:
                s.cond.notify()
            for t in (s.thread, s.worker):
                if t is not None:
                    t.join(timeout=1.0)
        ctx, self._ctx = self._ctx, None
        if ctx is not None and not any(s.thread is not None and s.thread.is_alive()
                                       for s in subs):
            ctx.term()   # every socket is closed by its thread: term() cannot hang


def check_endpoints(endpoints: list[str]) -> None:
    """ProbeUsageError for the first --kv-events endpoint no publisher can have (the CLI
    checks them before the terminal too: cli/checks.py)."""
    for ep in endpoints:
        problem = endpoint_problem(ep)
        if problem:
            raise ProbeUsageError(f"--kv-events {clean(ep)[:80]!r}: {problem}")


def kv_event_probes(args: Any, target: LiveTarget) -> list[KvEventsProbe]:
    """A KV-event subscriber for the watched server: at --kv-events's endpoints, else at
    those its own --kv-events-config names (none when it publishes no events)."""
    from infertop.probes.server.metrics import normalize_url
    urls = target.urls
    instance = normalize_url(urls[0])[1] if urls else "local"
    given = list(getattr(args, "kv_events", None) or [])
    if given:
        check_endpoints(given)
        return [KvEventsProbe(given, instance)]
    pid = target.pid
    url = urls[0] if urls else None

    last: list = [None, []]      # the identity and endpoints found last time

    def resolve() -> tuple[Any, list[str]]:
        """(identity, endpoints) of the server now: identity is (pid, start time, its
        --kv-events-config, kind), None when no server is found.  While the process found
        last lives with the same start time it is the same server with the same flags: one
        stat instead of discovery's scan of every process (~100 ms on a 120-process box)."""
        from infertop.probes.server.discovery import find_server, server_settings
        known = last[0]
        if known is not None and known[1] and _start_time(known[0]) == known[1]:
            return known, list(last[1])
        server = find_server(pid=pid, url=url)
        if server is None:
            last[:] = [None, []]
            return None, []
        settings = server_settings(server.kind, server.cmdline)
        config = settings.get("kv_events_config")
        endpoints = kv_events_endpoints(config, settings.get("data_parallel_size"))
        last[:] = [(server.pid, _start_time(server.pid), config, server.kind), endpoints]
        return last[0], list(endpoints)

    try:
        identity, endpoints = resolve()
    except Exception:   # discovery is a convenience here: no events, nothing else lost
        return []
    # a vLLM found without --kv-events-config is still followed (a restart may add it):
    # vLLM is the only server that publishes KV events
    if identity is None or not (endpoints or identity[3] == "vllm"):
        return []
    return [KvEventsProbe(endpoints, instance, resolve=resolve, identity=identity)]


def _start_time(pid: int) -> float:
    try:
        import psutil
        return float(psutil.Process(pid).create_time())
    except Exception:    # gone meanwhile, or not ours to read: the pid alone then
        return 0.0


SPEC = register(ProbeSpec(
    name="kvevents", order=40,
    keys=("kv.event_batches_total", "kv.event_batches_dropped_total",
          "kv.event_batches_undecodable_total", "kv.event_blocks_stored_total",
          "kv.event_blocks_evicted_total", "kv.event_blocks_restored_total",
          "kv.event_resident_blocks"),
    needs="pyzmq (infertop[kv-events]) and a server publishing KV events "
          "(vLLM --kv-events-config)",
    build=kv_event_probes,
    flags=BUILTIN_FLAGS["kvevents"],   # declared in probes/flags.py: --help imports no probe
))
