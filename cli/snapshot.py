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
from .options import SourceArgs, typed
from .sources import (
    no_snapshot,
    prometheus_down,
    sample_window,
    source_and_pipeline,
    sources_status,
)


def snapshot_json(frame, diagnosis: dict[str, Any] | None = None) -> dict[str, Any]:
    """``diagnosis``: whether the window was long enough for the rules to judge
    (``judgement``); when it was not, ``findings`` is null, never an empty list that
    reads as "nothing wrong"."""
    layers = {name: {"readings": [r.to_dict() for r in readings]}
              for name, readings in frame.layers().items()}
    judged = diagnosis is None or diagnosis.get("judged", True)
    out = {"time": frame.snapshot.time, "version": __version__,
           "sources": sources_status(frame),
           "unreachable": frame.unreachable_servers(), "layers": layers,
           "findings": [f.to_dict() for f in frame.findings] if judged or frame.findings
           else None}
    if diagnosis is not None:
        out["diagnosis"] = diagnosis
    return out


def judgement(pipeline, window: float, interval: float) -> dict[str, Any]:
    """{"judged", "window_s", "needs_s", "why"}: rules raise only after a condition held a
    few seconds (and a median needs half its window), so a 2 s window judges nothing."""
    from infertop.rules.engine import Diagnoser
    diag = pipeline.diagnoser     # a Pipeline's or a FleetPipeline's (None: no rules)
    if not isinstance(diag, Diagnoser):
        return {"judged": True, "window_s": window, "needs_s": 0.0, "why": ""}
    needs = diag.judge_after() + interval
    judged = window + 1e-9 >= needs
    why = "" if judged else (
        f"a {window:g} s window is too short to judge: rules raise after a condition held "
        f"{diag.judge_after():g} s; use --window {needs:g} or more (or infertop doctor)")
    return {"judged": judged, "window_s": window, "needs_s": needs, "why": why}


def cmd_snapshot(args: argparse.Namespace) -> int:
    source, pipeline = source_and_pipeline(args)
    interval = args.interval
    frame = asyncio.run(sample_window(source, pipeline, args.window, interval,
                                      typed(SourceArgs, args).speed))
    if frame is None:
        raise no_snapshot(source)
    down = prometheus_down(frame)
    if down:      # the fleet has nothing else to say: one line, as README promises
        print(clean(f"infertop: {down}"), file=sys.stderr)
        return EXIT_NO_SOURCE
    diagnosis = judgement(pipeline, args.window, interval)
    print(json.dumps(snapshot_json(frame, diagnosis), indent=1, allow_nan=False, default=str),
          flush=True)   # inside main's try: `| head` is a handled BrokenPipeError
    if not diagnosis["judged"]:
        print(clean(f"infertop: findings not judged: {diagnosis['why']}"), file=sys.stderr)
    said_why = set()      # each source's reason once: the summaries below name it only
    for name, st in sources_status(frame).items():
        if st["status"] in ("error", "stale"):   # say it on stderr too: scripts see it
            print(clean(f"infertop: {name}: {st['reason']}"), file=sys.stderr)
            said_why.add(name)
    unreachable = frame.unreachable_servers()
    if unreachable:
        bad = "; ".join(n if n in said_why else f"{n}: {why}" for n, why in unreachable.items())
        print(clean(f"infertop: server unreachable ({bad})"), file=sys.stderr)
    if not frame.sources_ok():
        bad = "; ".join(n if n in said_why or not s["reason"] else f"{n}: {s['reason']}"
                        for n, s in sources_status(frame).items())
        print(clean(f"infertop: no source could be read ({bad})"), file=sys.stderr)
    return EXIT_NO_SOURCE if unreachable or not frame.sources_ok() else EXIT_OK
