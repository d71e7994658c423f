"""``infertop snapshot --json``: sample a window, print one JSON object."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from infertop import __version__
from infertop.textclean import clean

from .errors import EXIT_NO_SOURCE, EXIT_OK
from .sources import make_pipeline, make_source, no_snapshot, sample_window, sources_status


def snapshot_json(frame) -> dict[str, Any]:
    layers = {name: {"readings": [r.to_dict() for r in readings]}
              for name, readings in frame.layers().items()}
    return {"time": frame.snapshot.time, "version": __version__,
            "sources": sources_status(frame),
            "unreachable": frame.unreachable_servers(), "layers": layers,
            "findings": [f.to_dict() for f in frame.findings]}


def cmd_snapshot(args: argparse.Namespace) -> int:
    source = make_source(args)
    pipeline = make_pipeline(args, source)
    interval = args.interval
    frame = asyncio.run(sample_window(source, pipeline, args.window, interval,
                                      getattr(args, "speed", None)))
    if frame is None:
        raise no_snapshot(source)
    print(json.dumps(snapshot_json(frame), indent=1, allow_nan=False, default=str),
          flush=True)   # inside main's try: `| head` is a handled BrokenPipeError
    for name, st in sources_status(frame).items():
        if st["status"] in ("error", "stale"):   # say it on stderr too: scripts see it
            print(clean(f"infertop: {name}: {st['reason']}"), file=sys.stderr)
    unreachable = frame.unreachable_servers()
    if unreachable:
        bad = "; ".join(f"{n}: {why}" for n, why in unreachable.items())
        print(clean(f"infertop: server unreachable ({bad})"), file=sys.stderr)
    if not frame.sources_ok():
        bad = "; ".join(f"{n}: {s['reason']}" for n, s in sources_status(frame).items())
        print(clean(f"infertop: no source could be read ({bad})"), file=sys.stderr)
    return EXIT_NO_SOURCE if unreachable or not frame.sources_ok() else EXIT_OK
