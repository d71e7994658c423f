"""One median in the tree: the standard library's (the mean of the two middle values for an
even count), wherever a median is taken; windowstat.median says why."""

from __future__ import annotations

import ast
import statistics
from pathlib import Path
from types import SimpleNamespace

from infertop import compare, windowstat
from infertop.probes.sources.replay import ReplaySource
from infertop.tui.widgets.history_plot import _gap

ROOT = Path(__file__).resolve().parent.parent
EVEN = [4.0, 1.0, 3.0, 2.0]     # middles 2 and 3: 2.5 (the upper middle would say 3)


def test_window_and_compare_median_are_the_standard_one():
    assert windowstat.median(EVEN) == 2.5
    assert windowstat.median([]) is None and windowstat.median(None) is None
    assert compare.median is statistics.median


def test_replay_tick_step_is_the_median_step():
    src = ReplaySource.__new__(ReplaySource)      # only the recorded times matter here
    # a stand-in decoder: _median_step reads only its times
    src._dec = SimpleNamespace(times=[0.0, 1.0, 2.0, 4.0, 6.0])  # type: ignore[assignment]
    assert src._median_step() == 1.5


def test_history_plot_gap_is_three_median_ticks():
    assert _gap([[(0.0, 0), (1.0, 0), (2.0, 0), (4.0, 0), (6.0, 0)]]) == 4.5


def _upper_middles(path: Path) -> list[int]:
    """Lines that index a sequence by len(x) // 2: a hand-made (upper-middle) median."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.BinOp) \
                and isinstance(node.slice.op, ast.FloorDiv) \
                and isinstance(node.slice.left, ast.Call) \
                and getattr(node.slice.left.func, "id", "") == "len" \
                and getattr(node.slice.right, "value", None) == 2:
            out.append(node.lineno)
    return out


def test_no_hand_made_median_in_the_tree():
    found = {}
    for top in ("infertop", "probes", "cli", "tui"):
        for f in (ROOT / top).rglob("*.py"):
            lines = _upper_middles(f)
            if lines:
                found[str(f.relative_to(ROOT))] = lines
    assert not found, found
