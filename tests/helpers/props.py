"""The property-based fault suite's shared parts: Hypothesis strategies for hostile input
(floats at the limits, odd label text, page and recording corruption) and the checks every
output must pass (no raw control byte, no number past what a person can read).

Examples are bounded and derandomized (``PROPS``): the suite runs in ``make test`` with the
same inputs every time; ``INFERTOP_PROPS_EXAMPLES`` raises the count for a longer hunt.
Every example run is counted per reader x writer (``TRIED``) and printed at the end of the
session (tests/conftest.py), so a run says how much it tried.
"""

from __future__ import annotations

import asyncio
import collections
import io
import json
import math
import os
import re
from collections.abc import Iterable
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from rich.console import Console

from infertop.fleet import FleetPipeline
from infertop.model import Capability, Sample, Snapshot, Status
from infertop.pipeline import Frame, Pipeline
from infertop.probes.sources.source import SnapshotSource
from infertop.themes import roles
from infertop.tui.app import PANE_CLASSES
from infertop.tui.panes.context import PaneContext

EXAMPLES = int(os.environ.get("INFERTOP_PROPS_EXAMPLES", "0") or 0)


# shrinking a failure to its smallest form can take minutes on a busy box: the suite
# reports the failing input as found (INFERTOP_PROPS_SHRINK=1 shrinks it)
PHASES = tuple(p for p in Phase if p is not Phase.shrink or os.environ.get("INFERTOP_PROPS_SHRINK"))


def props(n: int):
    """Settings for one property: ``n`` examples (or INFERTOP_PROPS_EXAMPLES; the fast
    profile of `make test-fast` caps them at its own count), the same ones every run, no
    deadline (a busy 2-core box is slow, not wrong), no database."""
    if settings.get_current_profile_name() == "fast":
        current = settings.default
        assert current is not None   # a profile is loaded (tests/conftest.py)
        n = min(n, current.max_examples)
    return settings(max_examples=EXAMPLES or n, derandomize=True, deadline=None,
                    database=None, print_blob=True, phases=PHASES,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


# reader x writer -> examples run (printed by conftest at the end of the session)
TRIED: collections.Counter[tuple[str, str]] = collections.Counter()


def tried(reader: str, *writers: str) -> None:
    for w in writers:
        TRIED[(reader, w)] += 1


# ---- hostile values ---------------------------------------------------------------------
LIMITS = [1.7976931348623157e308, -1.7976931348623157e308, 1.7e308, 1e308, -1e308, 5e-324,
          -5e-324, 2.2250738585072014e-308, 0.0, -0.0, 1e15, 9007199254740993.0, 1e-9,
          math.nan, math.inf, -math.inf, 1.0, 0.5, 100.0, 101.0, -1.0]
floats = st.one_of(st.sampled_from(LIMITS), st.floats(allow_nan=True, allow_infinity=True),
                   st.integers(-10**6, 10**6).map(float))

# text as a hostile server writes it: escapes, C1, bidi, markup of every kind, quotes
NASTY = ["\x1b[2J", "\x1b]0;PWNED\x07", "\x9b31m", "\u202e", "\u2066", "\x00", "\x7f", "\r",
         "\t", "\n", "[bold red]", "[/]", "[link=http://x]", "<script>alert(1)</script>",
         "<img src=x onerror=alert(1)>", "`", "``", "|", "*", "_", "\\", '"', "'", "&amp;",
         "](javascript:alert(1))", "<!--", "{", "}", "=", ",", "#", "日本", "🙂", "\ud800"]
text = st.one_of(
    st.lists(st.sampled_from(NASTY) | st.text(max_size=6), max_size=6).map("".join),
    st.text(max_size=40),
    st.integers(1, 20).map(lambda k: "m" * (1000 * k)))   # up to 20,000 characters


# ---- checks on every output ---------------------------------------------------------------
# raw bytes a terminal or a browser would act on: C0 (but \n and \t), DEL, C1, bidi controls
_RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f\x80-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f"
                  "\u061c\u2028\u2029\ud800-\udfff]")
# a number nobody can read: 20 digits in a row (1.7e308 printed fixed-point is 309)
_LONG_NUMBER = re.compile(r"\d{20,}")


def raw_controls(out: str, *, allow_tab: bool = True) -> list[str]:
    return sorted({repr(c) for c in _RAW.findall(out)} |
                  ({"'\\t'"} if not allow_tab and "\t" in out else set()))


def check_output(out: str, where: str) -> None:
    """No raw control byte and no unreadable number anywhere in ``out``."""
    bad = raw_controls(out)
    assert not bad, f"{where}: raw control characters {bad}"
    m = _LONG_NUMBER.search(out)
    if m is not None:
        around = out[max(0, m.start() - 40):m.start() + 40]
        raise AssertionError(f"{where}: a {len(m.group())}-digit number ...{around!r}")


def check_json(out: str, where: str) -> Any:
    """Strict JSON (no NaN/Infinity literals: other tools cannot read them)."""
    check_output(out, where)

    def no_constant(c: str) -> None:
        raise AssertionError(f"{where}: non-standard JSON number {c}")
    return json.loads(out, parse_constant=no_constant)


# ---- writers ----------------------------------------------------------------------------
PANES = {cls.pane_layer.value: cls for cls in PANE_CLASSES}
SIZES = ((80, 24), (160, 48))


def render_panes(frame: Frame) -> Iterable[tuple[str, str]]:
    """Every pane's plain text at 80x24 and 160x48 (``render_frame`` without an App)."""
    for width, height in SIZES:
        for layer, cls in PANES.items():
            ctx = PaneContext(frame, roles({}), wide=width >= 120, height=height, width=width)
            con = Console(width=width, height=height, record=True, color_system=None,
                          file=io.StringIO())
            con.print(cls().draw(ctx, zoomed=False, view=None), no_wrap=True,
                      overflow="ellipsis", crop=True)
            yield f"pane {layer} {width}x{height}", con.export_text()


def check_frame_writers(frame: Frame, pipeline: Pipeline | FleetPipeline,
                        source: SnapshotSource, reader: str) -> None:
    """The panes, ``snapshot --json`` and doctor text/JSON/markdown of one Frame (a
    fleet's FleetFrame is one, from a FleetPipeline)."""
    from infertop.cli.doctor import doctor_meta
    from infertop.cli.snapshot import snapshot_json
    from infertop.report import render_report
    for where, out in render_panes(frame):
        check_output(out, where)
    tried(reader, "panes 80x24+160x48")
    check_json(json.dumps(snapshot_json(frame), indent=1, allow_nan=False, default=str),
               "snapshot --json")
    tried(reader, "snapshot --json")
    meta = doctor_meta(source, pipeline, frame, 3.0)
    for fmt in ("text", "json", "markdown"):
        out = render_report(frame.findings, frame.layers(), fmt, meta)
        (check_json if fmt == "json" else check_output)(out, f"doctor {fmt}")
        tried(reader, f"doctor {fmt}")


# ---- a source of given snapshots ------------------------------------------------------------
class ListSource(SnapshotSource):
    """Hands out prepared Snapshots (no I/O): the readers' output, fed to the pipeline."""

    kind = "live"
    label = "props"

    def __init__(self, snaps: list[Snapshot]) -> None:
        self.snaps = list(snaps)

    @property
    def realtime(self) -> bool:
        return False

    async def start(self) -> dict[str, Capability]:
        return dict(self.snaps[0].capabilities) if self.snaps else {}

    async def next(self) -> Snapshot | None:
        return self.snaps.pop(0) if self.snaps else None

    def describe(self) -> dict[str, Any]:
        return {"source": "props", "label": "props"}


def feed(source: SnapshotSource, pipeline: Pipeline) -> Frame | None:
    async def run() -> Frame | None:
        await source.start()
        frame = None
        while (snap := await source.next()) is not None:
            frame = pipeline.feed(snap, None)
        await source.stop()
        return frame
    return asyncio.run(run())


def snapshot_of(t: float, tick: int, samples: list[Sample]) -> Snapshot:
    caps = {s.source: Capability(s.source, s.status is not Status.ERROR, s.reason)
            for s in samples}
    return Snapshot(t, {s.source: s for s in samples}, tick, caps)
