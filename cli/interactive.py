"""The screen: the only place the command line imports Textual (lazily)."""

from __future__ import annotations

import argparse
import os
import sys

from . import splash
from .checks import check_record_target, check_screen_args
from .errors import UsageError
from .options import ScreenArgs, typed


def screen(args: argparse.Namespace) -> int:
    """The screen for ``args``' source; the config TOML parsed once for source and pipeline."""
    stop_without_terminal(args)
    if not typed(ScreenArgs, args).theme:
        splash.show()    # before the sources are made (an error there takes it down again)
    from .sources import load_diagnosis_config, source_and_pipeline
    cfg = load_diagnosis_config(args)
    source, pipeline = source_and_pipeline(args, cfg)
    return run_tui(source, args, pipeline=pipeline, cfg=cfg)


def stop_without_terminal(args: argparse.Namespace) -> None:
    """Without a terminal, the one-line error now: after the arguments' own errors (the
    more specific), found without making the source (cli/checks.py: no probe is built or
    imported, Textual neither), so it comes at once (issue 35).  With --theme the screen
    checks the theme first (that imports Textual) and the terminal after it (run_tui)."""
    if not typed(ScreenArgs, args).theme and not on_terminal():
        check_screen_args(args)
        require_terminal()


def run_tui(source, args: argparse.Namespace, pipeline=None, cfg=None) -> int:
    """The screen for ``source``; its pipeline made here (``args``' config, ``cfg`` when
    read already) when not given."""
    given = typed(ScreenArgs, args)
    check_record_target(args)   # a bad --record target is named first: the more specific
    if not given.theme:
        # before Textual is imported (~0.5 s): without a terminal the one-line error comes
        # at once (a --theme is checked against the app's themes first, as before) ...
        require_terminal()
        splash.show()       # ... and with one, a first line on the screen at once (issue 35)
    from infertop.tui.modes import app_for_source
    if cfg is None:
        from .sources import load_diagnosis_config
        cfg = load_diagnosis_config(args)
    if pipeline is None:
        from .sources import make_pipeline
        pipeline = make_pipeline(args, source, cfg)
    from infertop.tui.app import UnknownTheme
    from infertop.tui.options import AppOptions
    options = AppOptions(speed=given.speed or 1.0,
                         capture_dir=given.capture_dir,
                         record_path=given.record,
                         record_now=bool(given.record),
                         record_force=given.force,
                         settle_gc=True,
                         # set by `infertop serve` for each browser session's process
                         read_only=os.environ.get("INFERTOP_READ_ONLY") == "1",
                         low_bandwidth=_low_bandwidth(given.low_bandwidth, cfg.low_bandwidth))
    try:
        app = app_for_source(source, interval=args.interval, pipeline=pipeline,
                             theme=given.theme, options=options)
    except UnknownTheme as e:
        raise UsageError(str(e)) from None
    require_terminal()
    splash.handed_over()    # Textual's screen from here on
    app.run()
    # Textual's status: 1 after a crash in the app, 128+N after signal N (app.py) or 129
    # when the terminal went away (tui/driver.py)
    code = app.return_code or 0
    if code > 128:
        leave_now(code)
    return code


def _low_bandwidth(flag: float | None, configured: float | None) -> float | None:
    """--low-bandwidth N, else the config's [ui] low_bandwidth (a fleet's too: read from
    the config, not from a pipeline); the flag without N (0) takes the config's N, else
    LOW_BANDWIDTH_SECONDS."""
    from infertop.config import LOW_BANDWIDTH_SECONDS
    if flag is None:
        return configured
    return flag or configured or LOW_BANDWIDTH_SECONDS


def on_terminal() -> bool:
    """stdin, stdout and stderr are terminals (require_terminal would pass)."""
    try:
        require_terminal()
    except UsageError:
        return False
    return True


def require_terminal() -> None:
    """The screen reads keys from stdin and draws on stdout and stderr (Textual writes
    the screen to stderr): each must be a terminal.  Without one it said nothing useful
    (stdin closed: an AttributeError traceback; stdout a file: the file filled with
    full-screen escapes), so it stops here in one line (exit 2) and names the commands
    made for files and pipes."""
    if os.environ.get("TEXTUAL_DRIVER", "").startswith("textual.drivers.web_driver:"):
        return     # `infertop serve`: textual-serve speaks to the browser over pipes
    for name in ("stdin", "stdout", "stderr"):
        stream = getattr(sys, name)
        try:
            ok = stream is not None and os.isatty(stream.fileno())
        except (OSError, ValueError, AttributeError):   # closed, or no file behind it
            ok = False
        if not ok:
            raise UsageError(f"the screen needs a terminal, and {name} is not one; without "
                             "a terminal use `infertop snapshot --json`, `infertop doctor` "
                             "or `infertop record -o FILE`")


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
