"""``infertop demo-server`` and ``infertop demo --list``: the demo without a screen."""

from __future__ import annotations

import argparse
import sys

from .errors import EXIT_OK, UsageError


def cmd_demo_server(args: argparse.Namespace) -> int:
    from infertop.cli.demo_server import serve, serve_fleet
    if args.nodes:
        bad = None
        if args.bad_node is not None:
            if not 1 <= args.bad_node <= args.nodes:
                raise UsageError(f"--bad-node must be between 1 and {args.nodes}")
            bad = args.bad_node - 1
        return serve_fleet(args.nodes, args.name, args.host, args.port, args.dialect,
                           args.speed, bad_node=bad, bad_scenario=args.bad_scenario,
                           targets=args.targets) or 0
    if args.bad_node is not None or args.targets:
        raise UsageError("--bad-node and --targets need --nodes")
    return serve(args.name, args.host, args.port, args.dialect, args.speed) or 0


def cmd_demo_list() -> int:
    from infertop.demo.scenario import catalogue
    for sc in catalogue():
        print(f"{sc.name:30} {sc.layer.value:12} {sc.title}")
    # flush here, inside main's try: a pipe reader that left (`| head -1`) is then a
    # BrokenPipeError main handles, not one at interpreter exit (a traceback, exit 120)
    sys.stdout.flush()
    return EXIT_OK
