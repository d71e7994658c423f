"""``infertop rules``: the rule catalogue for other tools.

    infertop rules export --format prometheus [-o FILE] [--force] [--config FILE]
    infertop rules promtool-input RECORDING [-o FILE] [--rules FILE] [--force] [--no-asserts]

``export`` writes Prometheus recording and alerting rules (``infertop.promrules``) with
the thresholds of ``--config`` (the screen's config); ``promtool-input`` turns a
recording into a promtool test file whose ``input_series`` are the series Prometheus
would have scraped (``infertop.promtool_input``), to run the rules on a real incident,
with the expectations infertop's own diagnosis of it sets (``infertop.promtool_asserts``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .errors import EXIT_OK, UsageError


def _emit(args: argparse.Namespace, text: str) -> None:
    if args.output:
        from infertop.safefile import OutputError, write_file
        try:   # readable by all: Prometheus usually runs as another user
            write_file(args.output, text, force=args.force, mode=0o644)
        except OutputError as e:
            raise UsageError(str(e)) from None
    else:
        sys.stdout.write(text)


def cmd_rules(args: argparse.Namespace) -> int:
    from infertop.config import ConfigError, load_config
    try:
        cfg = load_config(args.config)
    except ConfigError as e:
        raise UsageError(f"config: {e}") from None
    if args.action == "export":
        from infertop.promrules import export_text
        _emit(args, export_text(cfg))
        return EXIT_OK
    from infertop.promtool_input import convert
    from infertop.promtool_input import render as render_test
    from infertop.recording import RecordingError, decode
    path = Path(args.recording)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise UsageError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        series = convert(decode(data, path.name))
    except RecordingError as e:
        raise UsageError(str(e)) from None
    if not series.series:
        raise UsageError(f"{path}: no server or GPU readings to convert")
    _emit(args, render_test(series, [args.rules], _asserts(args, cfg, data, path, series)))
    return EXIT_OK


def _asserts(args: argparse.Namespace, cfg, data: bytes, path: Path, series) -> str:
    """The expectations of infertop's own diagnosis of the recording (promtool_asserts);
    a test that would assert nothing is refused unless ``--no-asserts``."""
    if args.no_asserts:
        return ""
    from infertop.promtool_asserts import expectations
    from infertop.recording import decode, iter_snapshots
    got = expectations(iter_snapshots(decode(data, path.name)), series.interval, series.steps,
                       any(k.startswith("DCGM_") for k in series.series), cfg)
    if not got.tests:
        raise UsageError(f"{path}: too short for the rules to judge, so the test would assert "
                         "nothing (promtool would print SUCCESS for any rules); record longer, "
                         "or --no-asserts for the input series alone")
    return got.yaml()
