"""``infertop report RECORDING -o report.html``: a self-contained incident report.

The recording is replayed through today's pipeline (findings and rates recomputed), then
written by infertop.htmlreport as one HTML file (inline CSS and SVG, nothing fetched) or
as Markdown (``--format markdown``).  ``--baseline BEFORE`` adds a before/after section
(infertop compare).  Headless: no Textual.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from infertop import __version__
from infertop.safefile import OutputError, write_file

from .compare import load_run
from .errors import UsageError


def cmd_report(args: argparse.Namespace) -> int:
    from infertop.compare import compare
    from infertop.htmlreport import render_html, render_markdown
    run = load_run(args.recording, args)
    comparison = None
    if args.baseline:
        base = load_run(args.baseline, args)
        comparison = compare(base, run)
    title = Path(args.recording).name
    render = render_markdown if args.format == "markdown" else render_html
    text = render(run, title=title, version=__version__, comparison=comparison)
    if not args.output or args.output == "-":
        sys.stdout.write(text)
        return 0
    out = Path(args.output)
    try:
        # whole or not at all, 0600 (it holds the server's settings and model names), a
        # regular file only, replaced only with --force (infertop.safefile)
        write_file(out, text, force=args.force)
    except OutputError as e:
        raise UsageError(str(e)) from None
    print(f"infertop: wrote {out} ({len(text.encode())} bytes)", file=sys.stderr)
    return 0
