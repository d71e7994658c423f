"""The command line: the main parser, each subcommand's parser, the source flags."""

from __future__ import annotations

import argparse
import math

from infertop import __version__

SUBCOMMANDS = ("snapshot", "doctor", "demo", "replay", "record", "demo-server", "tui")


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


def _port(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}")
    if not 0 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"a TCP port is 0..65535, not {v}")
    return v


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
        p.add_argument("--port", type=_port, default=8000, help="0: any free port")
        p.add_argument("--host", default="127.0.0.1")
        p.add_argument("--dialect", choices=("vllm", "sglang", "llamacpp", "tgi"), default=None)
        p.add_argument("--speed", type=_positive(float), default=1.0)
    return p
