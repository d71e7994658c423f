"""Subscribe to a server's KV-cache events (vLLM ``--kv-events-config``, ZMQ PUB).

One ``KvEventsProbe`` per server: a daemon thread per publisher endpoint receives
``(topic, seq, payload)`` messages, decodes them (``infertop.kvevents``) and updates one
``KvEventTracker`` under a lock; ``collect`` only copies the tracker's counters, so a tick
never waits on a socket.  pyzmq and msgpack are an optional extra
(``pip install 'infertop[kv-events]'``): without them the source is unavailable with that
one-line reason, and nothing else changes.

Endpoints come from ``--kv-events URL`` or from the server's own command line
(``kv_events_endpoints``): vLLM binds ``tcp://*:5557`` by default, one port per
data-parallel rank (base + rank).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

from infertop.kvevents import (MISSING_DEPENDENCY, KvEventsError, KvEventTracker, decode_batch,
                               parse_frames)
from infertop.meta import KvEventsMeta
from infertop.model import Capability, Sample, Status
from infertop.textclean import clean

from ..base import Probe
from ..registry import LiveTarget, ProbeSpec, ProbeUsageError, register

DEFAULT_ENDPOINT = "tcp://*:5557"   # vLLM KVEventsConfig.endpoint's default
POLL_MS = 200                       # how often a subscriber thread checks for close()
# a publisher that sent nothing for this long is quiet, not broken: an idle engine stores
# and evicts nothing; the source stays OK with its counters flat
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
    import msgpack  # noqa: F401  (checked here so open() can say what is missing)
    import zmq
    return zmq


class KvEventsProbe(Probe):
    """KV-cache event summaries of one server (``instance`` as its metrics source)."""

    def __init__(self, endpoints: list[str], instance: str, topic: str = "",
                 tracker: KvEventTracker | None = None) -> None:
        self.endpoints = list(endpoints)
        self.instance = instance
        self.topic = topic
        self.name = f"kvevents:{instance}"
        self.tracker = tracker or KvEventTracker()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._errors: dict[str, str] = {}
        self._ctx: Any = None

    async def open(self) -> Capability:
        if not self.endpoints:
            return Capability(self.name, False, "no KV-event endpoint (give --kv-events URL, "
                                                "or start vLLM with --kv-events-config)")
        try:
            zmq = _zmq()
        except ImportError:
            return Capability(self.name, False, MISSING_DEPENDENCY)
        if self._ctx is None:
            self._ctx = zmq.Context()
            for ep in self.endpoints:
                try:
                    sock = self._ctx.socket(zmq.SUB)
                    sock.setsockopt(zmq.LINGER, 0)
                    sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
                    sock.setsockopt(zmq.RCVHWM, 100_000)
                    sock.setsockopt(zmq.SUBSCRIBE, self.topic.encode())
                    sock.connect(ep)    # connect never waits: ZMQ reconnects by itself
                except zmq.ZMQError as e:
                    self._errors[ep] = f"cannot subscribe to {ep}: {e}"
                    continue
                t = threading.Thread(target=self._run, args=(sock, ep), daemon=True,
                                     name=f"infertop-kvevents-{len(self._threads)}")
                self._threads.append(t)
                t.start()
        if not self._threads:
            return Capability(self.name, False, "; ".join(self._errors.values())[:300])
        return Capability(self.name, True, features=frozenset({"kv_events"}))

    def _run(self, sock, endpoint: str) -> None:
        """One publisher's messages until close(); never raises (a bad message is
        counted as undecodable, a socket error ends this stream with its reason)."""
        import zmq
        try:
            while not self._stop.is_set():
                if not sock.poll(POLL_MS):
                    continue
                frames = sock.recv_multipart(copy=True)
                try:
                    seq, payload = parse_frames(frames)
                    batch = decode_batch(payload)
                except KvEventsError:
                    with self._lock:
                        self.tracker.add_undecodable(endpoint)
                    continue
                with self._lock:
                    self.tracker.add(endpoint, seq, batch)
        except zmq.ZMQError as e:
            if not self._stop.is_set():
                self._errors[endpoint] = clean(f"{endpoint}: {e}")[:200]
        finally:
            sock.close(linger=0)

    async def collect(self) -> Sample:
        now = time.time()
        with self._lock:
            readings = tuple(self.tracker.readings(self.instance))
            since = self.tracker.since
        alive = [t for t in self._threads if t.is_alive()]
        meta = KvEventsMeta(endpoints=tuple(self.endpoints), since=since)
        if not alive:
            why = "; ".join(self._errors.values()) or "every subscriber stopped"
            return Sample(self.name, now, readings, Status.ERROR, why[:300], meta)
        return Sample(self.name, now, readings, meta=meta)

    async def close(self) -> None:
        self._stop.set()
        await asyncio.to_thread(self._join)   # up to one poll interval: off the loop

    def _join(self) -> None:
        for t in self._threads:
            t.join(timeout=1.0)
        ctx, self._ctx = self._ctx, None
        if ctx is not None and not any(t.is_alive() for t in self._threads):
            ctx.term()   # every socket is closed by its thread: term() cannot hang


def kv_event_probes(args: Any, target: LiveTarget) -> list[KvEventsProbe]:
    """A KV-event subscriber for the watched server: at --kv-events's endpoints, else at
    those its own --kv-events-config names (none when it publishes no events)."""
    from infertop.probes.server.metrics import normalize_url
    urls = target.urls
    instance = normalize_url(urls[0])[1] if urls else "local"
    given = list(getattr(args, "kv_events", None) or [])
    if given:
        for ep in given:
            if not ep.startswith(("tcp://", "ipc://")):
                raise ProbeUsageError(f"--kv-events: expected tcp://HOST:PORT or ipc://PATH, "
                                      f"got {ep[:80]!r}")
        return [KvEventsProbe(given, instance)]
    try:
        from infertop.probes.server.discovery import find_server, server_settings
        server = find_server(pid=target.pid, url=urls[0] if urls else None)
    except Exception:   # discovery is a convenience here: no events, nothing else lost
        return []
    if server is None:
        return []
    settings = server_settings(server.kind, server.cmdline)
    endpoints = kv_events_endpoints(settings.get("kv_events_config"),
                                    settings.get("data_parallel_size"))
    return [KvEventsProbe(endpoints, instance)] if endpoints else []


def _flags(g: Any) -> None:
    g.add_argument("--kv-events", action="append", default=[], metavar="ENDPOINT",
                   help="subscribe to the server's KV-cache events at this ZMQ endpoint "
                        "(tcp://HOST:PORT; repeat per data-parallel rank); default: from "
                        "the server's --kv-events-config (needs infertop[kv-events])")


SPEC = register(ProbeSpec(
    name="kvevents", order=40,
    keys=("kv.event_batches_total", "kv.event_batches_dropped_total",
          "kv.event_batches_undecodable_total", "kv.event_blocks_stored_total",
          "kv.event_blocks_evicted_total", "kv.event_blocks_restored_total",
          "kv.event_resident_blocks"),
    needs="pyzmq and msgpack (infertop[kv-events]) and a server publishing KV events "
          "(vLLM --kv-events-config)",
    build=kv_event_probes,
    add_flags=_flags,
))
