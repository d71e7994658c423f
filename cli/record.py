"""``infertop record``: snapshots to JSON Lines, headless."""

from __future__ import annotations

import argparse
import sys

from infertop.textclean import clean

from .errors import EXIT_OK, UsageError
from .sources import make_source


def cmd_record(args: argparse.Namespace) -> int:
    from infertop.probes.sources.recorder import run_record
    from infertop.safefile import OutputError, check_target
    try:
        check_target(args.output, force=args.force)   # before any source is started
    except OutputError as e:
        raise UsageError(str(e)) from None
    source = make_source(args)
    # demo and replay compute the next tick at once: record them as fast as they go
    interval = args.interval if source.realtime else 0.0
    ticks = run_record(source, args.output, duration=args.duration, interval=interval,
                       max_bytes=args.max_bytes, force=args.force)
    print(clean(f"infertop: recorded {ticks} ticks to {args.output}"), file=sys.stderr)
    return EXIT_OK
