"""Speedscope JSON and SVG flame graph from a RecordResult (the files `py-spy record` leaves).

Split out of pyspy.py, which runs py-spy and turns its output into a ``RecordResult``;
this module only *writes* that result: one merged speedscope document (one sampled
profile per thread) and a static SVG flame graph drawn from the same stacks, saved
together atomically in the capture directory.  Pure functions of the result plus one
file write, so record() can run them off the event loop (``asyncio.to_thread``).

RecordResult and StackFrame stay in pyspy.py and are only named here in annotations, so
this module never imports pyspy at run time: no import cycle (pyspy.py imports this).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from html import escape as _xml_escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infertop.probes.capture.files import capture_path, write_all_atomic

if TYPE_CHECKING:
    from infertop.probes.capture.pyspy import RecordResult, StackFrame

__all__ = ["speedscope_document", "flamegraph_svg"]


def _short(filename: str) -> str:
    """Package-relative file name, like py-spy's short_filename."""
    for marker in ("site-packages/", "dist-packages/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    m = re.search(r"/lib/python3\.\d+/(.*)$", filename)
    if m:
        return m.group(1)
    return os.path.basename(filename) or filename


def _frame_label(f: StackFrame) -> str:
    return f"{f.name} ({_short(f.filename)}:{f.line})"


def _save_record(result: RecordResult, out_dir: Path, server: str) -> None:
    now = time.time()
    ss = capture_path(out_dir, server, "pyspy-record", "speedscope.json", now=now)
    svg = ss.with_name(ss.name[: -len(".speedscope.json")] + ".svg")
    write_all_atomic({ss: json.dumps(speedscope_document(result)),
                      svg: flamegraph_svg(result)})
    result.speedscope_path, result.svg_path = ss, svg


def speedscope_document(result: RecordResult) -> dict[str, Any]:
    """Merged speedscope file (https://www.speedscope.app/file-format-schema.json):
    one sampled profile per thread, samples in the order py-spy took them."""
    ordered = result.ordered or {
        k: [s for s, n in c.items() for _ in range(n)] for k, c in result.stacks.items()}
    by_key = {(t.pid, t.key): t for t in result.threads}
    w = 1.0 / result.rate
    profiles = []
    for key in sorted(ordered, key=lambda k: (k[0], -len(ordered[k]))):
        samples = ordered[key]
        if not samples:
            continue
        t = by_key.get(key)
        role, tname = (t.role, t.name) if t else ("", "")
        name = f"{role or 'pid'} {key[0]} / Thread {key[1]} \"{tname}\""
        profiles.append({"type": "sampled", "name": name, "unit": "seconds", "startValue": 0,
                         "endValue": round(len(samples) * w, 6),
                         "samples": [list(s) for s in samples], "weights": [w] * len(samples)})
    return {"$schema": "https://www.speedscope.app/file-format-schema.json",
            "shared": {"frames": [{"name": f.name, "file": f.filename, "line": f.line}
                                  for f in result.frames]},
            "profiles": profiles, "name": "infertop py-spy record (on-CPU samples)",
            "activeProfileIndex": 0, "exporter": "infertop"}


def flamegraph_svg(result: RecordResult, width: int = 1200, row: int = 17) -> str:
    """A static SVG flame graph (root at the bottom) of the on-CPU samples.

    Levels: all -> process -> thread -> Python frames.  Each box has a <title> tooltip with
    its sample count and share, so a browser shows details on hover.
    """
    root: dict[str, Any] = {"n": 0, "c": {}}
    by_key = {(t.pid, t.key): t for t in result.threads}
    for (pid, key), counter in result.stacks.items():
        t = by_key.get((pid, key))
        proc = f"{t.role if t and t.role else 'pid'} {pid}"
        thread = f"{t.name if t else ''} ({key})"
        for stack, n in counter.items():
            path = [proc, thread] + [_frame_label(result.frames[i]) for i in stack]
            node = root
            node["n"] += n
            for name in path:
                node = node["c"].setdefault(name, {"n": 0, "c": {}})
                node["n"] += n
    total = root["n"] or 1

    def depth(node: dict, d: int = 0) -> int:
        return max([d] + [depth(c, d + 1) for c in node["c"].values()])

    levels = depth(root) + 1
    height = levels * row + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}" font-family="monospace" '
           f'font-size="11">',
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="#f8f8f8"/>',
           f'<text x="{width / 2}" y="16" text-anchor="middle" font-size="14">'
           f'infertop py-spy flame graph: {root["n"]} on-CPU samples, {result.rate}/s</text>']
    char_w = 6.6

    def draw(name: str, node: dict, x: float, d: int) -> None:
        w = node["n"] / total * (width - 20)
        if w < 0.3:
            return
        y = height - (d + 1) * row - 4
        hue = int(hashlib.md5(name.encode()).hexdigest()[:4], 16)
        color = f"rgb({205 + hue % 50},{80 + hue % 130},{40 + hue % 50})"
        share = node["n"] / total * 100
        fits = int((w - 4) / char_w)
        label = name if len(name) <= fits else name[: max(0, fits - 2)] + ".."
        out.append(f'<g><title>{_xml_escape(name)} ({node["n"]} samples, {share:.2f}%)</title>'
                   f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row - 1}" '
                   f'fill="{color}" rx="2"/>'
                   + (f'<text x="{x + 3:.1f}" y="{y + row - 5}">{_xml_escape(label)}</text>'
                      if w > 3 * char_w else "") + "</g>")
        cx = x
        for cname, child in sorted(node["c"].items(), key=lambda kv: kv[0]):
            draw(cname, child, cx, d + 1)
            cx += child["n"] / total * (width - 20)

    draw("all", root, 10.0, 0)
    out.append("</svg>")
    return "\n".join(out) + "\n"
