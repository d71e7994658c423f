"""``infertop demo-server`` and ``infertop demo --list``: the demo without a screen."""

from __future__ import annotations

import argparse
import sys

from .errors import EXIT_OK


def cmd_demo_server(args: argparse.Namespace) -> int:
    from infertop.demo.server import serve
    return serve(args.name, args.host, args.port, args.dialect, args.speed) or 0


def cmd_demo_list() -> int:
    from infertop.demo.scenario import catalogue
    for sc in catalogue():
        layer = getattr(sc.layer, "value", sc.layer)
        print(f"{sc.name:30} {layer:12} {sc.title}")
    # flush here, inside main's try: a pipe reader that left (`| head -1`) is then a
    # BrokenPipeError main handles, not one at interpreter exit (a traceback, exit 120)
    sys.stdout.flush()
    return EXIT_OK
