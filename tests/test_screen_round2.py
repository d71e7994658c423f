"""The screen's remaining defects (issue 35, item 3): each test failed before its fix."""

from __future__ import annotations

import functools

from helpers.panes import frames_of, pane_text
from infertop.cli.main import build_parser, make_pipeline
from infertop.pipeline import Frame
from infertop.probes.sources.demo import DemoSource


@functools.lru_cache(maxsize=None)
def demo_frame(name: str, ticks: int) -> Frame:
    return frames_of(DemoSource(name), ticks, make_pipeline(build_parser().parse_args([])))


def test_short_decoding_pane_keeps_ttft_beside_a_flagged_row_of_another_table():
    # 80x24: the decoding pane has 5 lines; DEC-004 flags the errors row of the second
    # table, and the latency table (header + TTFT needs 2 lines) used to lose all its rows
    frame = demo_frame("dec-error-restart", 35)
    text = pane_text("decoding", frame, width=38, height=5, wide=False)
    assert "DEC-004" in text, text
    assert any(ln.split()[:1] == ["TTFT"] for ln in text.splitlines()), text
