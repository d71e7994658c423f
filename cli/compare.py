"""``infertop compare BEFORE AFTER``: what changed between two recordings.

Both recordings are replayed through today's pipeline (rates, quantiles and findings
recomputed), then compared by infertop.compare.  Headless: no Textual.
"""

from __future__ import annotations

import argparse
import sys

from .sources import make_pipeline


def load_run(path: str, args: argparse.Namespace):
    """A RunSummary of one recording (RecordingError/UsageError: one line, exit 2).  The
    recording is streamed (probes/sources/replay.py): a days-long file costs its index."""
    from infertop.probes.sources.replay import open_replay, unreadable_message
    from infertop.recording import RecordingError
    from infertop.runsummary import summarize
    # RecordingError (one line): no snapshot, or past RecordingFile's caps (size, ratio,
    # line length): the same limits as `replay`
    rec = open_replay(path)
    pipe = make_pipeline(args, rec)
    window = args.window or pipe.window
    # the window is stated with every median: compare (10 s) and report --baseline (the
    # config's 60 s) gave two TTFT p99s of the same recordings without saying why
    meta = {"file": path, "host": rec.header.get("host"),
            "recorded": rec.header.get("started"), "window_s": window}
    run = summarize(rec.iter_snapshots(), pipe.diagnoser,
                    window=window, max_ticks=args.max_ticks, meta=meta)
    if run.ticks == 0:   # every line corrupt: no verdict and no comparison rests on nothing
        raise RecordingError(unreadable_message(rec.path.name, rec.skipped, rec.lines_total))
    run.meta["notes"] = rec.notes   # counted after the pass: bad lines are one note
    return run


def cmd_compare(args: argparse.Namespace) -> int:
    from infertop.compare import compare, render_json, render_text
    before = load_run(args.before, args)
    after = load_run(args.after, args)
    c = compare(before, after, min_rel=args.min_change, resamples=args.resamples,
                seed=args.seed, loaded_only=not args.all_ticks)
    print(render_json(c) if args.format == "json" else render_text(c), end="")
    if args.fail_on_regression:
        from infertop.compare import regressions
        from infertop.textclean import clean
        worse = regressions(c)
        if worse:     # a CI gate: the first few on stderr, exit 1
            shown = "; ".join(worse[:5]) + (f"; +{len(worse) - 5} more" if len(worse) > 5
                                             else "")
            print(clean(f"infertop: {len(worse)} regression(s): {shown}"), file=sys.stderr)
            return 1
    return 0
