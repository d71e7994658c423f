"""The screen's arguments checked without making its source (issue 35: instant start).

Without a terminal the screen stops in one line, but a mistake in its arguments is the
more specific error and is named first: a bad --config, an unknown scenario, a file that
is not a recording, a bad --url or --kv-events, a bad --record target.  Making the source
to find those built every probe first (their imports, NVML's start, a scan of every
process: the no-terminal error took 0.26-0.43 s).  These checks give the same errors and
import only what a given flag needs (--url's parser, the scenario, the recording's
index): with none of those, no probe module at all (tests/test_start_imports.py).
make_source and run_tui run the same checks (cli/sources.py, cli/interactive.py).
"""

from __future__ import annotations

import argparse

from .errors import UsageError
from .options import ScreenArgs, SourceArgs, typed


def load_diagnosis_config(args: argparse.Namespace):
    """--config or the user's file, parsed (UsageError when it is bad).  Read it once per
    run and pass it to make_source and make_pipeline."""
    from infertop.config import ConfigError, load_config
    try:
        return load_config(typed(SourceArgs, args).config)
    except ConfigError as e:
        raise UsageError(f"config: {e}") from None


def bad_source(spec: str) -> UsageError:
    return UsageError(f"--source must be live, demo:NAME or replay:FILE, not {spec!r}")


def check_live_args(args: argparse.Namespace) -> None:
    """What the live source refuses before reading anything: --prometheus with --url or
    --pid, a --url that can never be read, --pid with remote nodes, a --kv-events
    endpoint no publisher can have."""
    given = typed(SourceArgs, args)
    pid = given.pid
    if given.prometheus:
        if given.url or pid:
            raise UsageError("--prometheus reads the fleet from Prometheus: drop --url/--pid")
        return
    urls = list(given.url)
    fleet = False
    if urls:
        from infertop.probes.server.metrics import normalize_url
        from infertop.probes.sources.fleet_hub import fleet_nodes, split_node
        for u in urls:   # a URL that can never be read is the user's to fix: say so at once
            try:
                normalize_url(split_node(u)[1])
            except ValueError as e:
                raise UsageError(f"--url: {e}") from None
        fleet = fleet_nodes(urls) is not None
        if fleet and pid:
            raise UsageError("--pid is a process of this machine: not with remote --url nodes")
    endpoints = list(given.kv_events)
    if endpoints and not fleet:      # a fleet read directly has no local probes
        from infertop.probes.registry import ProbeUsageError
        from infertop.probes.server.kvevents import check_endpoints
        try:
            check_endpoints(endpoints)
        except ProbeUsageError as e:
            raise UsageError(str(e)) from None


def check_source_args(args: argparse.Namespace) -> None:
    """The errors make_source would give for ``args``, without making the source (a
    recording is indexed, as the screen would: its errors are in its lines)."""
    given = typed(SourceArgs, args)
    spec = given.source or "live"
    if spec.startswith("demo"):
        name = spec.split(":", 1)[1] if ":" in spec else None
        check_scenario(name or None, given.gpus)
    elif spec.startswith("replay:"):
        from infertop.probes.sources.replay import ReplaySource
        from infertop.recording import RecordingError
        try:
            ReplaySource(spec.split(":", 1)[1])
        except RecordingError as e:
            raise UsageError(str(e)) from None
    elif spec != "live":
        raise bad_source(spec)
    elif given.prometheus:
        # its URL parsed by the source's own client (nothing is fetched); that maker
        # checks the live arguments first
        from .sources import make_prometheus_source
        make_prometheus_source(args)
    else:
        check_live_args(args)


def check_scenario(name: str | None, gpus: int | None) -> None:
    """The scenario DemoSource would play first (``name``, or the tour's first) loads and
    plays on ``gpus`` GPUs; its ScenarioError as a UsageError."""
    from infertop.demo.scenario import (
        ScenarioError,
        list_scenarios,
        load_scenario,
        with_gpus,
    )
    try:
        first = name if name is not None else next(iter(list_scenarios()), None)
        if first is None:
            raise ScenarioError("no scenarios are installed")
        scenario = load_scenario(first)
        if gpus is not None:
            with_gpus(scenario, gpus)
    except ScenarioError as e:
        raise UsageError(str(e)) from None


def check_record_target(args: argparse.Namespace) -> None:
    """A --record target the screen could not write (a link, a FIFO, a missing folder)."""
    given = typed(ScreenArgs, args)
    if given.record:
        from infertop.safefile import OutputError, check_target
        try:
            check_target(given.record, force=given.force)
        except OutputError as e:
            raise UsageError(str(e)) from None


def check_screen_args(args: argparse.Namespace) -> None:
    """Every error the screen's arguments would give before it draws, in the order the
    screen finds them: the config, the source, the --record target."""
    load_diagnosis_config(args)
    check_source_args(args)
    check_record_target(args)
