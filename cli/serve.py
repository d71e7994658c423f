"""``infertop serve``: the screen in a browser, through textual-serve, for workshops (each
attendee follows the presenter's demo on a laptop).

textual-serve starts one infertop process per browser session (its web driver over
pipes), so attendees do not share a screen or a cursor.  Their keys are read-only by
default: nothing that writes a file or runs a capture on this machine (``--all-keys``
allows it).  It listens on 127.0.0.1 unless ``--host`` says otherwise: a screen that
shows process command lines is not for the whole network by accident.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from .errors import UsageError

INSTALL = "pip install 'infertop[serve]' (or pip install textual-serve)"

# serve's own flags; the screen has none of these names, so they are taken out wherever
# they stand (before a `--`) and every other word is the screen's: `serve --port 8000
# --theme x` needed a `--` before `--theme` (argparse refused it as unrecognized)
OWN_WITH_VALUE = ("--port", "--host")
OWN_SWITCHES = ("--all-keys", "-h", "--help")


def split_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """(serve's own arguments, the screen's) of ``argv``; all after a `--` is the screen's."""
    own: list[str] = []
    inner: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            inner += argv[i + 1:]
            break
        if word.split("=", 1)[0] in OWN_WITH_VALUE:
            own.append(word)
            if "=" not in word and i + 1 < len(argv):    # its value, whatever it looks like
                i += 1
                own.append(argv[i])
        elif word in OWN_SWITCHES:
            own.append(word)
        else:
            inner.append(word)
        i += 1
    return own, inner


def parse_serve_args(argv: list[str]) -> argparse.Namespace:
    """serve's parsed flags, the screen's words in ``infertop_args`` (checked by cmd_serve)."""
    from .args import build_sub_parser
    own, inner = split_args(argv)
    args = build_sub_parser("serve").parse_args(own)
    args.infertop_args = inner
    return args


def child_command(inner: list[str]) -> str:
    """The command each browser session runs: this infertop with the screen's args."""
    return shlex.join([sys.executable, "-m", "infertop", *inner])


def cmd_serve(args: argparse.Namespace) -> int:
    inner = list(args.infertop_args)
    if inner[:1] == ["--"]:
        inner = inner[1:]
    if inner[:1] == ["serve"]:
        raise UsageError("serve: the screen's arguments cannot be serve again")
    from .args import SUBCOMMANDS, build_parser, build_sub_parser
    # bad screen arguments fail here, in one line, not in each browser session
    if inner and inner[0] in SUBCOMMANDS:
        if inner[0] not in ("demo", "replay", "tui"):
            raise UsageError(f"serve shows the screen: {inner[0]!r} is a headless command")
        build_sub_parser(inner[0]).parse_args(inner[1:]) if inner[0] != "tui" else \
            build_parser().parse_args(inner[1:])
    else:
        build_parser().parse_args(inner)
    try:
        from textual_serve.server import Server
    except ImportError:
        raise UsageError(f"serve needs textual-serve: {INSTALL}") from None
    if not args.all_keys:
        os.environ["INFERTOP_READ_ONLY"] = "1"    # the sessions inherit it (interactive.py)
    server = Server(child_command(inner), host=args.host, port=args.port, title="infertop")
    print(f"infertop: serving the screen on http://{args.host}:{args.port} "
          f"({'all keys' if args.all_keys else 'read-only keys'}; Ctrl+C stops)",
          file=sys.stderr, flush=True)
    server.serve()
    return 0
