"""``infertop doctor``: sample, diagnose, print a report; the exit code is the verdict."""

from __future__ import annotations

import argparse
import asyncio

from infertop import __version__

from .errors import UsageError
from .sources import make_pipeline, make_source, sample_window, sources_status


def cmd_doctor(args: argparse.Namespace) -> int:
    from infertop.report import episodes, exit_code, render_report
    source = make_source(args)
    pipeline = make_pipeline(args)
    frame = asyncio.run(sample_window(source, pipeline, args.duration, args.interval,
                                      getattr(args, "speed", None)))
    if frame is None:
        raise UsageError("the source produced no snapshot (empty recording?)")
    desc = source.describe()
    where = f" on {desc['host']}" if desc.get("host") else ""
    meta = {"version": __version__, "source": f"{desc.get('source')} {desc.get('label', '')}{where}",
            "sources": {n: st["status"] if st["status"] == "ok" else f"{st['status']}: {st['reason']}"
                        for n, st in sources_status(frame).items()},
            "duration": args.duration,
            "ticks": pipeline.history.ticks, "now": frame.snapshot.time,
            "any_source_ok": frame.sources_ok(),
            "unchecked": pipeline.diagnoser.missing_inputs(pipeline.history),
            # the whole window, not only its last tick: every raise and clear of the run
            "episodes": episodes(pipeline.diagnoser.events, frame.findings)}
    print(render_report(frame.findings, frame.layers(), args.format, meta))
    return exit_code(frame.findings, frame.sources_ok())
