"""The screen: the only place the command line imports Textual (lazily)."""

from __future__ import annotations

import argparse
import os
import sys

from .errors import UsageError
from .sources import make_pipeline


def run_tui(source, args: argparse.Namespace) -> int:
    from infertop.tui.modes import app_for_source
    pipeline = make_pipeline(args, source)
    from infertop.tui.app import UnknownTheme
    from infertop.tui.options import AppOptions
    options = AppOptions(speed=getattr(args, "speed", None) or 1.0,
                         capture_dir=getattr(args, "capture_dir", None),
                         record_path=getattr(args, "record", None),
                         record_now=bool(getattr(args, "record", None)),
                         settle_gc=True)
    try:
        app = app_for_source(source, interval=args.interval, pipeline=pipeline,
                             theme=getattr(args, "theme", None), options=options)
    except UnknownTheme as e:
        raise UsageError(str(e)) from None
    app.run()
    # Textual's status: 1 after a crash in the app, 128+N after signal N (app.py) or 129
    # when the terminal went away (tui/driver.py)
    code = app.return_code or 0
    if code > 128:
        leave_now(code)
    return code


def leave_now(code: int) -> None:
    """End the process at once after a signal or a lost terminal: the app has shut down
    (recording closed, terminal restored), and the interpreter's teardown that is left
    took 1.3 s of a loaded 2-core machine, past the 2 s a dropped session may take
    (issue 22); it also joins worker threads, which a stuck read could hold."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass   # the terminal is gone
    os._exit(code)


def nothing_live(source) -> bool:
    """No GPU and no server found: what --or-demo checks before starting the screen."""
    try:
        from infertop.probes.server.discovery import discover_all
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
