"""``infertop rules``: the rule catalogue for other tools.

    infertop rules export --format prometheus [-o FILE] [--force] [--config FILE]
    infertop rules promtool-input RECORDING [-o FILE] [--rules FILE] [--force]

``export`` writes Prometheus recording and alerting rules (``infertop.promrules``) with
the thresholds of ``--config`` (the screen's config); ``promtool-input`` turns a
recording into a promtool test file whose ``input_series`` are the series Prometheus
would have scraped (``infertop.promtool_input``), to run the rules on a real incident.
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
    from infertop.promtool_input import GridTooLarge
    from infertop.promtool_input import render as render_test
    from infertop.recording import RecordingError
    path = Path(args.recording)
    try:
        series = _convert_streamed(path)
    except (RecordingError, GridTooLarge) as e:
        raise UsageError(f"{path}: {e}" if isinstance(e, GridTooLarge) else str(e)) from None
    if not series.series:
        raise UsageError(f"{path}: no server or GPU readings to convert")
    _emit(args, render_test(series, [args.rules]))
    return EXIT_OK


def _convert_streamed(path: Path):
    """The recording through the replay's reader (recording_file.py): streamed under its
    caps (a line, the decompressed total, the gzip ratio), never held whole: the old
    whole-file decode took 1.36 GB on a gzip bomb (issue 36, case 11).  The grid's size
    is checked from the index's times before a snapshot is decoded."""
    import math

    from infertop.probes.sources.recording_file import RecordingFile
    from infertop.promtool_input import convert_snapshots, grid_steps
    from infertop.recording import RecordingError, decode_snapshot

    rf = RecordingFile(path)
    try:
        header = rf.header
        raw = header.get("interval")
        interval = float(raw) if isinstance(raw, (int, float)) and \
            not isinstance(raw, bool) and math.isfinite(raw) and raw > 0 else 1.0
        if len(rf):
            grid_steps(rf.times[0], max(rf.times), interval)

        def snaps():
            for i in range(len(rf)):
                try:
                    yield decode_snapshot(rf.line(i))
                except RecordingError:
                    continue   # as the replay does: an unreadable line is left out
        server = header.get("server")
        kind = server.get("kind") if isinstance(server, dict) else ""
        host = header.get("host")
        return convert_snapshots(snaps(), interval,
                                 host if isinstance(host, str) and host else "localhost",
                                 kind if isinstance(kind, str) else "")
    finally:
        rf.close()
