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
no Textual.
"""

from __future__ import annotations

import sys
from typing import Sequence

from infertop.textclean import clean

from .args import SUBCOMMANDS, build_parser, build_sub_parser
from .compare import cmd_compare
from .demo import cmd_demo_list, cmd_demo_server
from .doctor import cmd_doctor
from .errors import EXIT_OK, EXIT_USAGE, UsageError
from .interactive import nothing_live, screen
from .record import cmd_record
from .report import cmd_report
from .rules import cmd_rules
from .snapshot import cmd_snapshot
from .sources import make_pipeline, make_source

__all__ = ["build_parser", "make_pipeline", "make_source", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in SUBCOMMANDS and argv[0] != "tui":
            cmd = argv[0]
            args = build_sub_parser(cmd).parse_args(argv[1:])
            if cmd == "snapshot":
                return cmd_snapshot(args)
            if cmd == "doctor":
                return cmd_doctor(args)
            if cmd == "record":
                return cmd_record(args)
            if cmd == "demo-server":
                return cmd_demo_server(args)
            if cmd == "compare":
                return cmd_compare(args)
            if cmd == "report":
                return cmd_report(args)
            if cmd == "rules":
                return cmd_rules(args)
            if cmd == "serve":
                from .serve import cmd_serve
                return cmd_serve(args)
            if cmd == "demo":
                if args.list:
                    return cmd_demo_list()
                args.source = f"demo:{args.name}" if args.name else "demo"
                return screen(args)
            if cmd == "replay":
                args.source = f"replay:{args.file}"
                return screen(args)
        if argv and argv[0] == "tui":
            argv = argv[1:]
        args = build_parser().parse_args(argv)
        if args.or_demo and args.source == "live" and not args.url and not args.pid \
                and nothing_live(None):
            print("infertop: no GPU and no inference server found here: starting the demo "
                  "tour (run `infertop` for the live screen)", file=sys.stderr)
            args.source = "demo"
        return screen(args)
    except UsageError as e:
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
            print(clean(f"infertop: {e}"), file=sys.stderr)
            return EXIT_USAGE
        raise
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
