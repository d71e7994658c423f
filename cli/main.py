"""The ``infertop`` command: the live screen and its headless siblings.

    infertop [--url URL]... [--pid PID] [--interval S] [--no-gpu] [--theme NAME]
    infertop snapshot --json [--window S] [source flags]
    infertop doctor [--duration S] [--format text|json|markdown] [source flags]
    infertop demo [NAME] [--speed X] | infertop demo --list
    infertop replay FILE [--speed X]
    infertop record -o FILE [--duration S] [source flags]
    infertop demo-server [NAME] [--port N] [--host H] [--dialect D]
    infertop compare BEFORE AFTER [--format text|json]
    infertop report RECORDING [-o FILE] [--format html|markdown] [--baseline BEFORE]
    infertop rules export --format prometheus [-o FILE] | rules promtool-input RECORDING
    infertop serve [--port N] [--host H] [infertop args]   (the screen in a browser)

Every error a user can cause (bad flag, unreadable file, nothing to read) ends in one
line on stderr and a non-zero exit code, never a traceback.  Headless commands import
no Textual, and each command imports only its own module: `--version`, `--help` and the
screen's no-terminal error answer in well under 0.15 s (issue 35; tests/test_fast_start.py).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib import import_module
from typing import TYPE_CHECKING, Any

from infertop import __version__
from infertop.textclean import clean

from . import splash
from .args import SUBCOMMANDS, build_parser, build_sub_parser
from .errors import EXIT_OK, EXIT_USAGE, UsageError

if TYPE_CHECKING:      # at run time through __getattr__ below
    from .sources import make_pipeline, make_source

__all__ = ["build_parser", "make_pipeline", "make_source", "main"]

# subcommand -> (module under cli/, its function): imported when that command runs
COMMANDS = {
    "snapshot": ("snapshot", "cmd_snapshot"),
    "doctor": ("doctor", "cmd_doctor"),
    "record": ("record", "cmd_record"),
    "demo-server": ("demo", "cmd_demo_server"),
    "compare": ("compare", "cmd_compare"),
    "report": ("report", "cmd_report"),
    "rules": ("rules", "cmd_rules"),
    "serve": ("serve", "cmd_serve"),
}


def _command(module: str, name: str) -> Any:
    return getattr(import_module(f"{__package__}.{module}"), name)


def __getattr__(name: str) -> Any:
    """make_pipeline and make_source, imported on first use (not by `--version`)."""
    if name in ("make_pipeline", "make_source"):
        return _command("sources", name)
    raise AttributeError(name)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv == ["--version"]:      # without building the parser (it imports the probes)
        print(f"infertop {__version__}")
        return EXIT_OK
    try:
        if argv and argv[0] in SUBCOMMANDS and argv[0] != "tui":
            cmd = argv[0]
            if cmd == "serve":   # the screen's flags pass through without a `--`
                args = _command("serve", "parse_serve_args")(argv[1:])
            else:
                args = build_sub_parser(cmd).parse_args(argv[1:])
            if cmd in COMMANDS:
                return _command(*COMMANDS[cmd])(args)
            screen = _command("interactive", "screen")
            if cmd == "demo":
                if args.list:
                    return _command("demo", "cmd_demo_list")()
                args.source = f"demo:{args.name}" if args.name else "demo"
                return screen(args)
            if cmd == "replay":
                args.source = f"replay:{args.file}"
                return screen(args)
        if argv and argv[0] == "tui":
            argv = argv[1:]
        args = build_parser().parse_args(argv)
        screen = _command("interactive", "screen")
        # without a terminal: its one-line error before --or-demo looks for GPUs and servers
        _command("interactive", "stop_without_terminal")(args)
        if args.or_demo and args.source == "live" and not args.url and not args.pid \
                and _command("interactive", "nothing_live")(None):
            print("infertop: no GPU and no inference server found here: starting the demo "
                  "tour (run `infertop` for the live screen)", file=sys.stderr)
            args.source = "demo"
        return screen(args)
    except UsageError as e:
        splash.hide()
        print(clean(f"infertop: {e}"), file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `infertop demo --list | head`: the reader left, not an error
        # (before `except Exception`, which would re-raise it as a traceback)
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as e:  # the known one-line errors of scenarios, recordings, servers
        if type(e).__name__ in ("RecordingError", "ScenarioError", "DemoServerError",
                                "ConfigError", "CaptureError", "OutputError"):
            splash.hide()
            print(clean(f"infertop: {e}"), file=sys.stderr)
            return EXIT_USAGE
        splash.hide()
        raise
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
