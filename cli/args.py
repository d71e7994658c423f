"""The command line: the main parser, each subcommand's parser, the source flags."""

from __future__ import annotations

import argparse
import math
from typing import NoReturn

from infertop import __version__

from .suggest import SuggestingParser

SUBCOMMANDS = ("snapshot", "doctor", "demo", "replay", "record", "demo-server", "compare",
               "report", "rules", "tui", "serve")


class _Parser(SuggestingParser):
    """argparse's parser that names the nearest flag (SuggestingParser), whose error echoes
    a bad value at most 300 characters long (`--duration` of a megabyte was a megabyte on
    stderr: issue 36, case 13)."""

    def error(self, message: str) -> NoReturn:
        super().error(message if len(message) <= 300 else message[:300] + "…")
        raise AssertionError("unreachable: argparse's error exits")


def _positive(kind: type):
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not (v > 0) or (isinstance(v, float) and math.isinf(v)):
            raise argparse.ArgumentTypeError(f"must be greater than 0, got {text!r}")
        return v
    return parse


# Linux's pid_max is at most 2**22: a larger pid names no process, and a recording's meta
# refuses it (infertop/meta.py Pid), so it is refused here where it enters
PID_MAX = 4_194_304


def _pid(text: str) -> int:
    v: int = _positive(int)(text)
    if v > PID_MAX:
        raise argparse.ArgumentTypeError(f"no process id is above {PID_MAX:,}, got {text!r}")
    return v


def _low_bandwidth(text: str) -> float:
    """--low-bandwidth N: seconds in the config's range for [ui] low_bandwidth."""
    from infertop.config import value_range
    v = _positive(float)(text)
    lo, hi, why = value_range("ui.low_bandwidth", "positive") or (1.0, 3600.0, "")
    if not lo <= v <= hi:
        raise argparse.ArgumentTypeError(f"must be {lo:g} to {hi:g} seconds ({why}), "
                                         f"got {text!r}")
    return v


def _ratio(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text!r}")
    return v


def _port(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"a TCP port is 0..65535, not {v}")
    return v


def add_source_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sources")
    g.add_argument("--url", action="append", default=[], metavar="URL",
                   help="server base or /metrics URL (repeat for several servers); on "
                        "remote hosts, or as NODE=URL, each is a node of a fleet (a "
                        "dcgm-exporter URL gives that node's GPUs)")
    g.add_argument("--pid", type=_pid, help="server process id (else auto-discovered)")
    g.add_argument("--prometheus", metavar="URL",
                   help="read a fleet through Prometheus (dcgm-exporter and servers' /metrics "
                        "it scrapes) instead of this machine")
    # each probe's own flags (--no-gpu, --kv-events...): declared as data (probes/flags.py),
    # no probe module imported
    from infertop.probes.flags import add_probe_flags
    add_probe_flags(g)
    g.add_argument("--source", default="live", metavar="live|demo:NAME|replay:FILE",
                   help="where snapshots come from (default: live)")
    g.add_argument("--speed", type=_positive(float), default=None,
                   help="demo/replay speed factor: the screen defaults to 1; headless "
                        "commands run demo/replay as fast as they compute unless given, "
                        "then pace each tick at its interval / X in real time")
    g.add_argument("--interval", type=_positive(float), default=1.0, metavar="S",
                   help="seconds between ticks (default 1)")
    g.add_argument("--config", metavar="FILE", help="thresholds/SLO TOML (default: XDG config)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="infertop",
        description="top for LLM inference servers: hardware, kernels, memory, scheduling, "
                    "parallelism and decoding, live.",
        epilog="Subcommands: snapshot, doctor, demo, replay, record, demo-server, compare, "
               "report, rules "
               "(infertop SUBCOMMAND --help).  Exit codes: 0 ok, 2 bad usage or file, "
               "3 no source could be read; doctor: 1 warning, 2 critical.")
    p.add_argument("--version", action="version", version=f"infertop {__version__}")
    add_source_flags(p)
    p.add_argument("--theme", help="Textual theme name (default: infertop; projector: "
                   "high contrast on white, for beamers)")
    p.add_argument("--capture-dir", help="where captures go (default: XDG data dir)")
    p.add_argument("--record", metavar="FILE", help="start recording to FILE at once")
    p.add_argument("--force", action="store_true",
                   help="--record may replace FILE if it exists (never a link, device or FIFO)")
    # without N: 0, the config's [ui] low_bandwidth or its default (cli/interactive.py;
    # infertop.config is not imported for --help)
    p.add_argument("--low-bandwidth", nargs="?", const=0.0, default=None,
                   type=_low_bandwidth, metavar="N",
                   help="for slow links (SSH over a VPN, a phone): redraw the screen at most "
                        "every N seconds (default 5; 1 to 3600); the findings strip stays "
                        "live and a key redraws at once ([ui] low_bandwidth in the config)")
    p.add_argument("--or-demo", action="store_true",
                   help="when no GPU and no server is found, run the demo tour instead")
    return p


def build_sub_parser(cmd: str) -> argparse.ArgumentParser:
    p = _Parser(prog=f"infertop {cmd}")
    if cmd == "snapshot":
        p.description = "Sample for a window and print one JSON object."
        p.add_argument("--json", action="store_true", help="print JSON (the only format)")
        p.add_argument("--window", type=_positive(float), default=2.0, metavar="S",
                       help="seconds to sample (default 2; at least two ticks)")
        add_source_flags(p)
    elif cmd == "doctor":
        p.description = ("Sample, diagnose and print a report.  Exit code: 0 healthy, 1 worst "
                         "finding is a warning, 2 critical, 3 no source could be read.")
        p.add_argument("--duration", type=_positive(float), metavar="S",
                       help="seconds to sample (default 10; a replay: the whole recording)")
        p.add_argument("--format", choices=("text", "json", "markdown"), default="text")
        add_source_flags(p)
    elif cmd == "demo":
        p.description = "Play a scripted bottleneck scenario (no GPU or server needed)."
        p.add_argument("name", nargs="?", help="scenario (default: the tour of all)")
        p.add_argument("--list", action="store_true", help="list scenarios and exit")
        p.add_argument("--gpus", type=_positive(int), metavar="N",
                       help="play every scenario on a host of N GPUs (1-16), the model "
                            "spread over them; no fake driver needed")
        p.add_argument("--speed", type=_positive(float), default=1.0)
        p.add_argument("--interval", type=_positive(float), default=1.0)
        p.add_argument("--theme")
        p.add_argument("--config")
        p.add_argument("--record", metavar="FILE")
        p.add_argument("--force", action="store_true", help="--record may replace FILE")
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
        p.add_argument("--force", action="store_true",
                       help="replace FILE if it exists (never a link, device or FIFO)")
        add_source_flags(p)
    elif cmd == "compare":
        p.description = ("Compare two recordings (before/after a deploy or a config change): "
                         "readings that moved beyond their noise, findings that appeared or "
                         "vanished, settings that differ.")
        p.add_argument("before", help="recording before the change")
        p.add_argument("after", help="recording after the change")
        p.add_argument("--format", choices=("text", "json"), default="text")
        p.add_argument("--min-change", type=_ratio, default=0.05, metavar="R",
                       help="smallest relative change of a median worth reporting "
                            "(default 0.05)")
        p.add_argument("--resamples", type=_positive(int), default=400,
                       help="bootstrap resamples per reading (default 400)")
        p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
        p.add_argument("--window", type=_positive(float), default=10.0, metavar="S",
                       help="window of rates and quantiles (default 10 s: shorter than the "
                            "screen's 60 s, so each tick says more about its own moment)")
        p.add_argument("--all-ticks", action="store_true",
                       help="compare every tick, not only those with requests in flight")
        p.add_argument("--fail-on-regression", action="store_true",
                       help="exit 1 when a finding appeared, a latency rose, a throughput "
                            "fell or the error share rose (a CI gate)")
        p.add_argument("--max-ticks", type=_positive(int), default=20_000,
                       help="snapshots read per recording at most (default 20000)")
        p.add_argument("--config", metavar="FILE", help="thresholds/SLO TOML")
    elif cmd == "report":
        p.description = ("Write an incident report of a recording: the findings timeline, "
                         "charts of the key readings per layer with the findings shaded, "
                         "evidence and remedies, the server's settings.  One self-contained "
                         "HTML file (nothing fetched) or Markdown.")
        p.add_argument("recording")
        p.add_argument("-o", "--output", metavar="FILE",
                       help="file to write (default: standard output)")
        p.add_argument("--format", choices=("html", "markdown"), default="html")
        p.add_argument("--force", action="store_true",
                       help="replace FILE if it exists (never a link, device or FIFO)")
        p.add_argument("--baseline", metavar="BEFORE",
                       help="a recording to compare with (adds a before/after section)")
        p.add_argument("--window", type=_positive(float), default=None, metavar="S",
                       help="window of rates, quantiles and rules (default: the config's, "
                            "as on the screen)")
        p.add_argument("--max-ticks", type=_positive(int), default=20_000)
        p.add_argument("--config", metavar="FILE", help="thresholds/SLO TOML")
    elif cmd == "rules":
        p.description = ("The diagnosis rules for Prometheus: `export` writes recording and "
                         "alerting rules (thresholds from --config, as on the screen); "
                         "`promtool-input` turns a recording into a promtool test file.")
        sub = p.add_subparsers(dest="action", required=True)
        ex = sub.add_parser("export", help="write the rules as Prometheus rule_files YAML")
        ex.add_argument("--format", choices=("prometheus",), default="prometheus")
        pi = sub.add_parser("promtool-input",
                            help="a recording as promtool input_series (a test file)")
        pi.add_argument("recording")
        pi.add_argument("--rules", default="infertop-rules.yml", metavar="FILE",
                        help="the rules file the test loads (default infertop-rules.yml)")
        pi.add_argument("--no-asserts", action="store_true",
                        help="write the input series alone, without the expectations "
                             "infertop's own diagnosis of the recording sets")
        for q in (ex, pi):
            q.add_argument("-o", "--output", metavar="FILE",
                           help="file to write (default: standard output)")
            q.add_argument("--force", action="store_true", help="overwrite an existing file")
            q.add_argument("--config", metavar="FILE", help="thresholds/SLO TOML")
    elif cmd == "demo-server":
        p.description = "Serve a scenario's metrics over HTTP like a real server."
        p.add_argument("name", nargs="?", default="healthy")
        p.add_argument("--port", type=_port, default=8000, help="0: any free port")
        p.add_argument("--host", default="127.0.0.1")
        from infertop.servers import registry  # the kinds the demo can play
        p.add_argument("--dialect", choices=(*registry.demo_kinds(), "dcgm"),
                       default=None, help="dcgm: the GPUs' dcgm-exporter page")
        p.add_argument("--speed", type=_positive(float), default=1.0)
        p.add_argument("--nodes", type=_positive(int), metavar="N",
                       help="serve a fleet of N nodes (server + dcgm-exporter page each, on "
                            "ports from --port, or free ports with --port 0)")
        p.add_argument("--bad-node", type=int, metavar="I",
                       help="fleet: node I (1-based) misbehaves (plays --bad-scenario)")
        p.add_argument("--bad-scenario", default="dec-ttft-burst", metavar="NAME")
        p.add_argument("--targets", metavar="DIR",
                       help="fleet: write Prometheus file_sd files (server.json, dcgm.json)")
    elif cmd == "serve":
        p.description = ("Serve the screen in a browser (textual-serve): one infertop per "
                         "browser session, read-only keys (no capture, no recording).")
        p.usage = "infertop serve [--port N] [--host H] [--all-keys] [INFERTOP ARGS...]"
        p.add_argument("--port", type=_port, default=8000)
        p.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default loopback only; 0.0.0.0 for a room)")
        p.add_argument("--all-keys", action="store_true",
                       help="let browser sessions capture and record on this machine")
        p.add_argument("infertop_args", nargs=argparse.REMAINDER,
                       help="the screen's own arguments (demo, --url URL, ...)")
    return p
