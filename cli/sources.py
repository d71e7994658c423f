"""Turning flags into a SnapshotSource and a Pipeline, and sampling a window headless."""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import time

from infertop.meta import ProcessMeta, ServerMeta
from infertop.model import Status
from infertop.source import SnapshotSource, pace

from .checks import bad_source, check_live_args, load_diagnosis_config
from .errors import UsageError
from .options import SourceArgs, typed

__all__ = ["load_diagnosis_config", "make_pipeline", "make_source", "source_and_pipeline"]


def make_source(args: argparse.Namespace, cfg=None):
    """live | demo:NAME | replay:FILE -> a SnapshotSource (raises UsageError).  ``cfg``: the
    config already read (load_diagnosis_config), so the TOML is parsed once per run."""
    given = typed(SourceArgs, args)
    spec = given.source or "live"
    speed = given.speed or 1.0
    if spec.startswith("demo"):
        from infertop.demo.scenario import ScenarioError
        from infertop.probes.sources.demo import DemoSource
        name = spec.split(":", 1)[1] if ":" in spec else None
        try:
            return DemoSource(name or None, speed=speed, gpus=given.gpus)
        except ScenarioError as e:
            raise UsageError(str(e)) from None
    if spec.startswith("replay:"):
        from infertop.probes.sources.replay import ReplaySource
        from infertop.recording import RecordingError
        try:
            return ReplaySource(spec.split(":", 1)[1], speed=speed)
        except RecordingError as e:
            raise UsageError(str(e)) from None
    if spec != "live":
        raise bad_source(spec)
    if given.prometheus:
        return make_prometheus_source(args)
    return make_live_source(args, cfg)


def make_prometheus_source(args: argparse.Namespace):
    """--prometheus URL: the fleet Prometheus scrapes (probes/prometheus/source.py)."""
    check_live_args(args)
    from infertop.probes.prometheus.source import PrometheusSource
    try:
        return PrometheusSource(args.prometheus, timeout=max(2.0, min(10.0, args.interval * 4)))
    except ValueError as e:
        raise UsageError(f"--prometheus: {e}") from None


def is_fleet_args(args: argparse.Namespace) -> bool:
    """--prometheus, or --url on remote hosts / NAME=URL: the fleet pipeline and screen."""
    given = typed(SourceArgs, args)
    if (given.source or "live") != "live":
        return False
    if given.prometheus:
        return True
    from infertop.probes.sources.fleet_hub import fleet_nodes
    return fleet_nodes(list(given.url)) is not None


def make_live_source(args: argparse.Namespace, cfg=None):
    """This machine's probes, from the registry (probes/registry.py), under one Hub; or a
    fleet read directly when --url names remote hosts."""
    from infertop.probes.registry import LiveTarget, ProbeUsageError, build_probes
    from infertop.probes.sources.hub import Hub, deadline_for

    urls = list(args.url or [])
    from infertop.probes.sources.fleet_hub import FleetHub, fleet_nodes
    check_live_args(args)   # bad --url, --pid with remote nodes, bad --kv-events: at once
    nodes = fleet_nodes(urls)
    if nodes:   # remote hosts or NAME=URL: a fleet read directly, no local probes
        return FleetHub(nodes, deadline=deadline_for(args.interval))
    # probes read a few thresholds (the host's top consumers are scanned from
    # thresholds.host_top_scan_at)
    th = (load_diagnosis_config(args) if cfg is None else cfg).thresholds
    routes = [] if urls else discovered_routes(args.pid)
    target = LiveTarget(pid=args.pid, given_urls=tuple(urls),
                        urls=tuple(urls or [r.url for r in routes]), routes=tuple(routes),
                        host_top_at=min(th.host_top_scan_at, th.host_cpu_saturated))
    try:
        probes, disabled = build_probes(args, target)
    except ProbeUsageError as e:
        raise UsageError(str(e)) from None
    from infertop.redact import redact_url  # a --url may carry user:pass@ or ?token=
    label = ", ".join(redact_url(u) for u in target.urls) or "local"
    return Hub(probes, deadline=deadline_for(args.interval), label=label, disabled=disabled)


def discovered_urls(pid: int | None) -> list[str]:
    """With no --url: the listening port of a discovered server, if any."""
    return [r.url for r in discovered_routes(pid)]


def discovered_routes(pid: int | None) -> list:
    """With no --url: how each discovered server is read (probes/server/reach.py Route):
    ``127.0.0.1:PORT`` on this host, or into its container's network namespace."""
    try:
        from infertop.probes.server.discovery import (
            discover_all,
            find_server,
            routes_of,
        )
        servers = [find_server(pid=pid)] if pid else discover_all()
        return routes_of([s for s in servers if s is not None])
    except Exception:
        return []


def source_and_pipeline(args: argparse.Namespace, cfg=None) -> tuple:
    """``args``' source and its pipeline, the config TOML parsed once for both (doctor,
    snapshot, the screen: ``cfg`` when it read it already); raises UsageError for a bad
    config or source."""
    if cfg is None:
        cfg = load_diagnosis_config(args)
    source = make_source(args, cfg)
    return source, make_pipeline(args, source, cfg)


def make_pipeline(args: argparse.Namespace, source: SnapshotSource | None = None, cfg=None):
    """The pipeline for ``source``; ``cfg`` the config make_source was given (read here
    when None)."""
    from infertop.pipeline import Pipeline
    from infertop.rules.engine import Diagnoser
    if cfg is None:
        cfg = load_diagnosis_config(args)
    # one window for the screen's quantiles and the rules' evidence, so they agree
    if is_fleet_args(args) or (source is not None and source.fleet):
        from infertop.fleet import FleetPipeline, diagnoser_factory
        return FleetPipeline(diagnoser_factory(cfg), window=cfg.diagnosis.window)
    return Pipeline(Diagnoser(cfg, fleet=False), window=cfg.diagnosis.window)


def pace_of(source: SnapshotSource, interval: float, speed: float | None) -> float:
    """Real seconds between ticks: ``interval`` live; for demo and replay their own tick
    divided by ``--speed`` when it was given, else 0 (computed as fast as they go)."""
    step = interval if source.realtime or source.tick_seconds is None \
        else float(source.tick_seconds)
    return pace(source.realtime, step, speed)


DEAD_TICKS = 3    # doctor: ticks with every server unreachable from the start, then it stops


def all_servers_dead(frame) -> bool:
    """Every server source of the frame unreachable (there is at least one)."""
    servers = [n for n in frame.snapshot.samples if n.startswith("server:")]
    return bool(servers) and set(servers) <= set(frame.unreachable_servers())


def prometheus_down(frame) -> str | None:
    """Why the fleet's Prometheus gave nothing (down, or not Prometheus): the frame holds
    its error sample alone.  None when it answered."""
    samples = frame.snapshot.samples
    prom = samples.get("prometheus")
    if prom is None or len(samples) != 1 or prom.status is Status.OK:
        return None
    return prom.reason or "Prometheus gave no data"


async def sample_window(source: SnapshotSource, pipeline, window: float, interval: float,
                        speed: float | None = None, give_up_dead: int = 0):
    """Tick the source across ``window`` seconds (at least two ticks); last Frame.
    ``speed`` paces demo/replay ticks in real time (see ``pace_of``).  ``give_up_dead``:
    a live run stops after that many ticks on which every server was unreachable, none
    ever read (doctor on a dead --url waited its whole --duration to say so)."""
    # an infinite window (a whole recording): until the source ends
    ticks = max(2, int(math.ceil(window / interval)) + 1) if math.isfinite(window) \
        else sys.maxsize
    pace = pace_of(source, interval, speed)
    # live: the window is wall time; a source that hangs (every tick a timeout) ends it
    # one interval past the window, not after ticks x timeout (29 s for doctor --duration 6)
    deadline = time.monotonic() + window + interval if source.realtime else math.inf
    await source.start()
    frame = None
    dead = 0      # ticks with every server unreachable; -1 once one was read
    try:
        for i in range(ticks):
            if frame is not None and time.monotonic() > deadline:
                break
            started = time.monotonic()
            snap = await source.next()
            if snap is None:
                break
            frame = pipeline.feed(snap, source.epoch)
            dead = dead + 1 if dead >= 0 and all_servers_dead(frame) else -1
            if source.realtime and (give_up_dead and dead >= give_up_dead
                                    or prometheus_down(frame)):
                break     # nothing will come: say so now (Prometheus: one line, exit 3)
            if pace > 0 and i < ticks - 1:
                await asyncio.sleep(max(0.0, pace - (time.monotonic() - started)))
    finally:
        await source.stop()
    return frame


def no_snapshot(source: SnapshotSource) -> UsageError:
    """The error for a source that ended before its first tick."""
    if source.skipped:
        from infertop.probes.sources.replay import unreadable_message
        return UsageError(unreadable_message(source.label, source.skipped,
                                             source.lines_total))
    return UsageError("the source produced no snapshot (empty recording?)")


def sources_status(frame) -> dict[str, dict[str, str]]:
    out = {}
    snap = frame.snapshot
    for name, cap in snap.capabilities.items():
        if not cap.available:
            out[name] = {"status": "unavailable", "reason": cap.reason}
    for name, s in snap.samples.items():
        out[name] = {"status": s.status.value, "reason": s.reason}
        if isinstance(s.meta, ServerMeta):   # a server in a container: how it was read
            if s.meta.via and not s.meta.via.startswith("prometheus"):
                out[name]["via"] = s.meta.via
            if s.meta.container:
                out[name]["container"] = s.meta.container
        server = s.meta.server if isinstance(s.meta, ProcessMeta) else None
        if server is not None and server.container:   # the followed server's container
            out[name]["container"] = server.container
        if server is not None and server.found_by:
            # the process tree is a name search's guess, not --url's port owner
            out[name]["found_by"] = server.found_by
            out[name]["reason"] = s.reason or server.reason
    return out
