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


def test_o_scrolled_right_keeps_the_columns_that_fit():
    # `o` at 80 columns, Right twice: user and role scroll out of view; the drop order
    # (RSS, SM, user, GPU) named the columns of the unscrolled table, so the scrolled one
    # lost GPU, SM and RSS although they fit (only PID, GPU mem and CPU were left)
    from infertop.tui.panes.columns import Columns
    from infertop.tui.screens.processes import HEADERS
    from infertop.tui.zoom_table import TableView
    t = Columns(HEADERS, max_width=60)
    t.cut, t.drop = (2, 8), (7, 5, 1, 3)
    t.add_row("41234", "root", "engine core", "0,1", "60.1 GiB", "80 %", "95 %",
              "12.3 GiB", "python -m vllm.entrypoints.openai.api_server --model x")
    header = t.window_text(TableView(col_offset=2), 10, width=78).plain.splitlines()[0]
    for name in ("PID", "GPU", "GPU mem", "SM", "CPU", "RSS"):
        assert name in [h.strip() for h in header.split("  ")], header
    assert "user" not in header and "role" not in header, header
