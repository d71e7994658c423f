"""The ``infertop`` command: the live screen and its headless siblings.

    infertop [--url URL]... [--pid PID] [--interval S] [--no-gpu] [--theme NAME]
    infertop snapshot --json [--window S] [source flags]
    infertop doctor [--duration S] [--format text|json|markdown] [source flags]
    infertop demo [NAME] [--speed X] | infertop demo --list
    infertop replay FILE [--speed X]
    infertop record -o FILE [--duration S] [source flags]
    infertop demo-server [NAME] [--port N] [--host H] [--dialect D]

Every error a user can cause (bad flag, unreadable file, nothing to read) ends in one
line on stderr and a non-zero exit code, never a traceback.  Headless commands import
no Textual.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from typing import Any, Sequence

from infertop import __version__

SUBCOMMANDS = ("snapshot", "doctor", "demo", "replay", "record", "demo-server", "tui")

EXIT_OK, EXIT_USAGE, EXIT_NO_SOURCE = 0, 2, 3


class UsageError(Exception):
    """A problem with what the user asked for: one line, exit 2."""


# ---------------------------------------------------------------------------------------
# argument parsing
# ---------------------------------------------------------------------------------------
def _positive(kind: type):
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}")
        if not (v > 0) or (isinstance(v, float) and math.isinf(v)):
            raise argparse.ArgumentTypeError(f"must be greater than 0, got {text!r}")
        return v
    return parse


def add_source_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sources")
    g.add_argument("--url", action="append", default=[], metavar="URL",
                   help="server base or /metrics URL (repeat for several servers)")
    g.add_argument("--pid", type=_positive(int), help="server process id (else auto-discovered)")
    g.add_argument("--no-gpu", action="store_true", help="do not load NVML")
    g.add_argument("--source", default="live", metavar="live|demo:NAME|replay:FILE",
                   help="where snapshots come from (default: live)")
    g.add_argument("--speed", type=_positive(float), default=1.0,
                   help="demo/replay speed factor (default 1)")
    g.add_argument("--interval", type=_positive(float), default=1.0, metavar="S",
                   help="seconds between ticks (default 1)")
    g.add_argument("--config", metavar="FILE", help="thresholds/SLO TOML (default: XDG config)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="infertop",
        description="top for LLM inference servers: hardware, kernels, memory, scheduling, "
                    "parallelism and decoding, live.",
        epilog="Subcommands: snapshot, doctor, demo, replay, record, demo-server "
               "(infertop SUBCOMMAND --help).  Exit codes: 0 ok, 2 bad usage or file, "
               "3 no source could be read; doctor: 1 warning, 2 critical.")
    p.add_argument("--version", action="version", version=f"infertop {__version__}")
    add_source_flags(p)
    p.add_argument("--theme", help="Textual theme name (default: infertop)")
    p.add_argument("--capture-dir", help="where captures go (default: XDG data dir)")
    p.add_argument("--record", metavar="FILE", help="start recording to FILE at once")
    p.add_argument("--or-demo", action="store_true",
                   help="when no GPU and no server is found, run the demo tour instead")
    return p


def build_sub_parser(cmd: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"infertop {cmd}")
    if cmd == "snapshot":
        p.description = "Sample for a window and print one JSON object."
        p.add_argument("--json", action="store_true", help="print JSON (the only format)")
        p.add_argument("--window", type=_positive(float), default=2.0, metavar="S",
                       help="seconds to sample (default 2; at least two ticks)")
        add_source_flags(p)
    elif cmd == "doctor":
        p.description = ("Sample, diagnose and print a report.  Exit code: 0 healthy, 1 worst "
                         "finding is a warning, 2 critical, 3 no source could be read.")
        p.add_argument("--duration", type=_positive(float), default=10.0, metavar="S")
        p.add_argument("--format", choices=("text", "json", "markdown"), default="text")
        add_source_flags(p)
    elif cmd == "demo":
        p.description = "Play a scripted bottleneck scenario (no GPU or server needed)."
        p.add_argument("name", nargs="?", help="scenario (default: the tour of all)")
        p.add_argument("--list", action="store_true", help="list scenarios and exit")
        p.add_argument("--speed", type=_positive(float), default=1.0)
        p.add_argument("--interval", type=_positive(float), default=1.0)
        p.add_argument("--theme")
        p.add_argument("--config")
        p.add_argument("--record", metavar="FILE")
    elif cmd == "replay":
        p.description = "Replay a recording in the same panes."
        p.add_argument("file")
        p.add_argument("--speed", type=_positive(float), default=1.0)
        p.add_argument("--interval", type=_positive(float), default=1.0)
        p.add_argument("--theme")
        p.add_argument("--config")
    elif cmd == "record":
        p.description = "Record snapshots headless (no screen) to a JSON Lines file."
        p.add_argument("-o", "--output", required=True, metavar="FILE",
                       help="file to write (.gz compresses)")
        p.add_argument("--duration", type=_positive(float), metavar="S",
                       help="stop after S seconds (default: until Ctrl-C)")
        p.add_argument("--max-bytes", type=_positive(int), help="rotate at this size")
        add_source_flags(p)
    elif cmd == "demo-server":
        p.description = "Serve a scenario's metrics over HTTP like a real server."
        p.add_argument("name", nargs="?", default="healthy")
        p.add_argument("--port", type=int, default=8000)
        p.add_argument("--host", default="127.0.0.1")
        p.add_argument("--dialect", choices=("vllm", "sglang", "llamacpp", "tgi"), default=None)
        p.add_argument("--speed", type=_positive(float), default=1.0)
    return p


# ---------------------------------------------------------------------------------------
# sources
# ---------------------------------------------------------------------------------------
def make_source(args: argparse.Namespace):
    """live | demo:NAME | replay:FILE -> a SnapshotSource (raises UsageError)."""
    spec = getattr(args, "source", "live") or "live"
    speed = getattr(args, "speed", 1.0)
    if spec.startswith("demo"):
        from infertop.probes.demo import DemoSource
        from infertop.scenario import ScenarioError
        name = spec.split(":", 1)[1] if ":" in spec else None
        try:
            return DemoSource(name or None, speed=speed)
        except ScenarioError as e:
            raise UsageError(str(e)) from None
    if spec.startswith("replay:"):
        from infertop.probes.replay import ReplaySource
        from infertop.recording import RecordingError
        try:
            return ReplaySource(spec.split(":", 1)[1], speed=speed)
        except RecordingError as e:
            raise UsageError(str(e)) from None
    if spec != "live":
        raise UsageError(f"--source must be live, demo:NAME or replay:FILE, not {spec!r}")
    return make_live_source(args)


def make_live_source(args: argparse.Namespace):
    from infertop.probes.hub import Hub
    from infertop.probes.process import ProcessProbe
    from infertop.probes.server_metrics import ServerMetricsProbe

    urls = list(args.url or [])
    probes: list = []
    if not args.no_gpu:
        from infertop.probes.nvml import NvmlProbe
        probes.append(NvmlProbe())
    probes.append(ProcessProbe(pid=args.pid, url=urls[0] if urls else None))
    if not urls:
        urls = discovered_urls(args.pid)
    seen = set()
    for u in urls:
        probe = ServerMetricsProbe(u)
        if probe.name in seen:
            continue
        seen.add(probe.name)
        probes.append(probe)
    # A slow /metrics (10 s) must not hold the tick: the deadline is below the interval.
    deadline = max(0.2, min(args.interval * 0.8, 5.0))
    disabled = {"nvml": "GPU readings off (--no-gpu)"} if args.no_gpu else {}
    return Hub(probes, deadline=deadline, label=", ".join(urls) or "local", disabled=disabled)


def discovered_urls(pid: int | None) -> list[str]:
    """With no --url: the listening port of a discovered server, if any."""
    try:
        from infertop.probes.discovery import discover_all, find_server
        servers = [find_server(pid=pid)] if pid else discover_all()
    except Exception:
        return []
    out = []
    for s in servers:
        if s is not None and s.port:
            out.append(f"http://127.0.0.1:{s.port}")
    return out


def make_pipeline(args: argparse.Namespace):
    from infertop.config import ConfigError, load_config
    from infertop.pipeline import Pipeline
    from infertop.rules.engine import Diagnoser
    try:
        cfg = load_config(getattr(args, "config", None))
    except ConfigError as e:
        raise UsageError(f"config: {e}") from None
    # one window for the screen's quantiles and the rules' evidence, so they agree
    return Pipeline(Diagnoser(cfg), window=cfg.diagnosis.window)


async def sample_window(source, pipeline, window: float, interval: float):
    """Tick the source across ``window`` seconds (at least two ticks); last Frame."""
    ticks = max(2, int(math.ceil(window / interval)) + 1)
    await source.start()
    frame = None
    try:
        for i in range(ticks):
            started = time.monotonic()
            snap = await source.next()
            if snap is None:
                break
            frame = pipeline.feed(snap, getattr(source, "epoch", None))
            if source.realtime and i < ticks - 1:
                await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))
    finally:
        await source.stop()
    return frame


def sources_status(frame) -> dict[str, dict[str, str]]:
    out = {}
    snap = frame.snapshot
    for name, cap in snap.capabilities.items():
        if not cap.available:
            out[name] = {"status": "unavailable", "reason": cap.reason}
    for name, s in snap.samples.items():
        out[name] = {"status": s.status.value, "reason": s.reason}
    return out


def snapshot_json(frame) -> dict[str, Any]:
    layers = {name: {"readings": [r.to_dict() for r in readings]}
              for name, readings in frame.layers().items()}
    return {"time": frame.snapshot.time, "version": __version__,
            "sources": sources_status(frame), "layers": layers,
            "findings": [f.to_dict() for f in frame.findings]}


# ---------------------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------------------
def cmd_snapshot(args: argparse.Namespace) -> int:
    source = make_source(args)
    pipeline = make_pipeline(args)
    interval = args.interval
    frame = asyncio.run(sample_window(source, pipeline, args.window, interval))
    if frame is None:
        raise UsageError("the source produced no snapshot (empty recording?)")
    print(json.dumps(snapshot_json(frame), indent=1, allow_nan=False, default=str))
    for name, st in sources_status(frame).items():
        if st["status"] in ("error", "stale"):   # say it on stderr too: scripts see it
            print(f"infertop: {name}: {st['reason']}", file=sys.stderr)
    if not frame.sources_ok():
        bad = "; ".join(f"{n}: {s['reason']}" for n, s in sources_status(frame).items())
        print(f"infertop: no source could be read ({bad})", file=sys.stderr)
        return EXIT_NO_SOURCE
    return EXIT_OK


def cmd_doctor(args: argparse.Namespace) -> int:
    from infertop.report import exit_code, render_report
    source = make_source(args)
    pipeline = make_pipeline(args)
    frame = asyncio.run(sample_window(source, pipeline, args.duration, args.interval))
    if frame is None:
        raise UsageError("the source produced no snapshot (empty recording?)")
    desc = source.describe()
    where = f" on {desc['host']}" if desc.get("host") else ""
    meta = {"version": __version__, "source": f"{desc.get('source')} {desc.get('label', '')}{where}",
            "sources": {n: st["status"] if st["status"] == "ok" else f"{st['status']}: {st['reason']}"
                        for n, st in sources_status(frame).items()},
            "duration": args.duration,
            "ticks": pipeline.history.ticks, "now": frame.snapshot.time,
            "any_source_ok": frame.sources_ok(),
            "unchecked": pipeline.diagnoser.missing_inputs(pipeline.history)}
    print(render_report(frame.findings, frame.layers(), args.format, meta))
    return exit_code(frame.findings, frame.sources_ok())


def cmd_record(args: argparse.Namespace) -> int:
    from infertop.probes.recorder import run_record
    source = make_source(args)
    # demo and replay compute the next tick at once: record them as fast as they go
    interval = args.interval if source.realtime else 0.0
    ticks = run_record(source, args.output, duration=args.duration, interval=interval,
                       max_bytes=args.max_bytes)
    print(f"infertop: recorded {ticks} ticks to {args.output}", file=sys.stderr)
    return EXIT_OK


def cmd_demo_server(args: argparse.Namespace) -> int:
    from infertop.probes.demo_server import serve
    return serve(args.name, args.host, args.port, args.dialect, args.speed) or 0


def cmd_demo_list() -> int:
    from infertop.scenario import catalogue
    for sc in catalogue():
        layer = getattr(sc.layer, "value", sc.layer)
        print(f"{sc.name:30} {layer:12} {sc.title}")
    return EXIT_OK


def run_tui(source, args: argparse.Namespace) -> int:
    from .modes import app_for_source
    pipeline = make_pipeline(args)
    options = {"speed": getattr(args, "speed", 1.0),
               "capture_dir": getattr(args, "capture_dir", None),
               "record_path": getattr(args, "record", None),
               "record_now": bool(getattr(args, "record", None))}
    from .app import UnknownTheme
    try:
        app = app_for_source(source, interval=args.interval, pipeline=pipeline,
                             theme=getattr(args, "theme", None), options=options)
    except UnknownTheme as e:
        raise UsageError(str(e)) from None
    app.run()
    return getattr(app, "exit_code", None) or 0


def nothing_live(source) -> bool:
    """No GPU and no server found: what --or-demo checks before starting the screen."""
    try:
        from infertop.probes.discovery import discover_all
        if discover_all():
            return False
    except Exception:
        pass
    try:
        import pynvml
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        return False
    except Exception:
        return True


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in SUBCOMMANDS and argv[0] != "tui":
            cmd = argv[0]
            args = build_sub_parser(cmd).parse_args(argv[1:])
            if cmd == "snapshot":
                return cmd_snapshot(args)
            if cmd == "doctor":
                return cmd_doctor(args)
            if cmd == "record":
                return cmd_record(args)
            if cmd == "demo-server":
                return cmd_demo_server(args)
            if cmd == "demo":
                if args.list:
                    return cmd_demo_list()
                args.source = f"demo:{args.name}" if args.name else "demo"
                return run_tui(make_source(args), args)
            if cmd == "replay":
                args.source = f"replay:{args.file}"
                return run_tui(make_source(args), args)
        if argv and argv[0] == "tui":
            argv = argv[1:]
        args = build_parser().parse_args(argv)
        if args.or_demo and args.source == "live" and not args.url and not args.pid \
                and nothing_live(None):
            print("infertop: no GPU and no inference server found here: starting the demo "
                  "tour (run `infertop` for the live screen)", file=sys.stderr)
            args.source = "demo"
        return run_tui(make_source(args), args)
    except UsageError as e:
        print(f"infertop: {e}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as e:  # the known one-line errors of scenarios, recordings, servers
        if type(e).__name__ in ("RecordingError", "ScenarioError", "DemoServerError",
                                "ConfigError", "CaptureError"):
            print(f"infertop: {e}", file=sys.stderr)
            return EXIT_USAGE
        raise
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `infertop demo --list | head`: the reader left, not an error
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
