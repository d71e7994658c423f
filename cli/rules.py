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
import os
import sys
import tempfile
from pathlib import Path

from .errors import EXIT_OK, UsageError


def write_file_safely(path: str, text: str, force: bool) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename,
    so a reader never sees half a file; an existing file is kept unless ``force``.
    (One small function on purpose: a shared safe-write helper can replace it.)"""
    target = Path(path)
    if target.exists() and not force:
        raise UsageError(f"{path}: already exists (use --force to overwrite)")
    if target.is_dir():
        raise UsageError(f"{path}: is a folder")
    folder = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except OSError as e:
        raise UsageError(f"{path}: cannot write: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)   # mkstemp makes 0600: Prometheus may run as another user
        os.replace(tmp, target)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise UsageError(f"{path}: cannot write: {e.strerror or e}") from None


def _emit(args: argparse.Namespace, text: str) -> None:
    if args.output:
        write_file_safely(args.output, text, args.force)
    else:
        sys.stdout.write(text)


def cmd_rules(args: argparse.Namespace) -> int:
    from infertop.config import ConfigError, load_config
    try:
        cfg = load_config(args.config)
    except ConfigError as e:
        raise UsageError(f"config: {e}") from None
    if args.action == "export":
        from infertop.promrules import build, render
        _emit(args, render(build(cfg)))
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
    _emit(args, render_test(series, [args.rules]))
    return EXIT_OK
