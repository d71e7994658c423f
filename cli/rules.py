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
from typing import TYPE_CHECKING

from .errors import EXIT_OK, UsageError

if TYPE_CHECKING:
    from infertop.probes.sources.recording_file import RecordingFile


def _emit(args: argparse.Namespace, text: str) -> None:
    if args.output:
        from infertop.safefile import OutputError, write_file
        try:   # readable by all: Prometheus usually runs as another user
            write_file(args.output, text, force=args.force, mode=0o644)
        except OutputError as e:
            raise UsageError(str(e)) from None
    else:
        sys.stdout.write(text)


PROMTOOL_TIMEOUT = 60.0   # it checks the 75 rules in ~0.1 s; a hung binary is not waited on


def _promtool_check(text: str) -> bool:
    """The export through ``promtool check rules`` before it is written (issue 36, item 3):
    a config the ranges accept must still give rules Prometheus loads.  promtool is
    ``$INFERTOP_PROMTOOL`` or on PATH; False without it (the caller notes it after writing)."""
    import os
    import shutil
    import subprocess
    import tempfile
    binary = os.environ.get("INFERTOP_PROMTOOL") or shutil.which("promtool")
    if not binary:
        return False
    with tempfile.TemporaryDirectory(prefix="infertop-rules-") as tmp:
        path = Path(tmp) / "rules.yml"
        path.write_text(text, encoding="utf-8")
        try:
            got = subprocess.run([binary, "check", "rules", str(path)], capture_output=True,
                                 text=True, timeout=PROMTOOL_TIMEOUT, errors="replace")
        except (OSError, subprocess.TimeoutExpired) as e:
            raise UsageError(f"promtool ({binary}) could not check the rules: {e}; "
                             "nothing written") from None
    if got.returncode != 0:
        why = [ln.strip() for ln in (got.stdout + got.stderr).splitlines()
               if ln.strip() and "Checking" not in ln and ln.strip() != "FAILED:"]
        first = (why[0] if why else f"exit {got.returncode}").replace(str(path), "the export")
        raise UsageError(f"promtool rejects the exported rules ({first[:300]}); nothing "
                         "written: check the config's values")
    return True


def cmd_rules(args: argparse.Namespace) -> int:
    from infertop.config import ConfigError, load_config
    try:
        cfg = load_config(args.config)
    except ConfigError as e:
        raise UsageError(f"config: {e}") from None
    if args.action == "export":
        from infertop.promrules import export_text
        text = export_text(cfg)
        checked = _promtool_check(text)
        _emit(args, text)
        if not checked:   # after the file: a refusal to write stays the one line it was
            print("infertop: promtool not found: the rules were not checked (Debian/Ubuntu: "
                  "apt-get install prometheus)", file=sys.stderr)
        return EXIT_OK
    from infertop.probes.sources.recording_file import RecordingFile
    from infertop.promtool_input import GridTooLarge
    from infertop.promtool_input import render as render_test
    from infertop.recording import RecordingError
    path = Path(args.recording)
    try:
        # indexed once (the whole file decompressed once), read twice by line
        rf = RecordingFile(path)
    except RecordingError as e:
        raise UsageError(str(e)) from None
    try:
        try:
            series = _convert_streamed(rf, path)
        except (RecordingError, GridTooLarge) as e:
            raise UsageError(f"{path}: {e}" if isinstance(e, GridTooLarge) else str(e)) from None
        if not series.series:
            raise UsageError(f"{path}: no server or GPU readings to convert")
        asserts = _asserts(args, cfg, rf, path, series)
    finally:
        rf.close()
    _emit(args, render_test(series, [args.rules], asserts))
    return EXIT_OK


def _streamed_snapshots(rf, bad: list[str]):
    """The recording's snapshots, one line at a time: an unreadable line (a meta of the
    wrong type included) is left out and counted in ``bad``, as the replay does."""
    from infertop.recording import RecordingError, decode_snapshot
    for i in range(len(rf)):
        try:
            yield decode_snapshot(rf.line(i))
        except RecordingError as e:
            bad.append(f"line {rf.line_number(i)}: {e}")


def _convert_streamed(rf: RecordingFile, path: Path):
    """The recording through the replay's reader (recording_file.py): streamed under its
    caps (a line, the decompressed total, the gzip ratio), never held whole: the old
    whole-file decode took 1.36 GB on a gzip bomb (issue 36, case 11).  The grid's size
    is checked from the index's times before a snapshot is decoded."""
    import math

    from infertop.promtool_input import convert_snapshots, grid_steps

    header = rf.header
    raw = header.get("interval")
    interval = float(raw) if isinstance(raw, (int, float)) and \
        not isinstance(raw, bool) and math.isfinite(raw) and raw > 0 else 1.0
    if len(rf):
        grid_steps(rf.times[0], max(rf.times), interval)
    server = header.get("server")
    kind = server.get("kind") if isinstance(server, dict) else ""
    host = header.get("host")
    bad: list[str] = []
    series = convert_snapshots(_streamed_snapshots(rf, bad), interval,
                               host if isinstance(host, str) and host else "localhost",
                               kind if isinstance(kind, str) else "")
    # the lines the index could not place count too, as the replay counts them
    if bad or rf.skipped:
        first = f" (first: {bad[0]})" if bad else ""
        print(f"infertop: {path.name}: {len(bad) + rf.skipped} of "
              f"{len(rf) + rf.skipped} snapshot lines unreadable, left out{first}",
              file=sys.stderr)
    return series


def _asserts(args: argparse.Namespace, cfg, rf: RecordingFile, path: Path, series) -> str:
    """The expectations of infertop's own diagnosis of the recording (promtool_asserts),
    read as a stream again under the replay's caps; a test that would assert nothing is
    refused unless ``--no-asserts``."""
    if args.no_asserts:
        return ""
    from infertop.promtool_asserts import expectations
    # the second pass over the same index: its bad lines were said by the first
    got = expectations(_streamed_snapshots(rf, []), series.interval, series.steps,
                       any(k.startswith("DCGM_") for k in series.series), cfg)
    if not got.tests:
        raise UsageError(f"{path}: too short for the rules to judge, so the test would assert "
                         "nothing (promtool would print SUCCESS for any rules); record longer, "
                         "or --no-asserts for the input series alone")
    return got.yaml()
