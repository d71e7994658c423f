"""`h` on a zoomed pane: the layer's readings over the whole History as a braille plot.

The renderer is checked dot by dot (a known ramp lands on the rows its values map to);
the app's part with Pilot, ticks driven by hand (no timers, no wall-clock asserts)."""

from __future__ import annotations

import pytest

from helpers import tui_demo
from helpers.synthetic_source import SyntheticSource
from infertop.history import History
from infertop.model import Layer, Reading, Sample, Snapshot, make_labels
from infertop.pipeline import Pipeline
from infertop.tui.app import InfertopApp
from infertop.tui.options import AppOptions
from infertop.tui.widgets.braille_plot import Canvas, Trace, y_ticks
from infertop.tui.widgets.history_plot import HistoryPlot, plot_text

pytestmark = pytest.mark.slow   # the history plot driven through the whole app

BRAILLE = range(0x2801, 0x2900)
# dot row (0..3) of each braille bit
_ROW_OF_BIT = {0x01: 0, 0x08: 0, 0x02: 1, 0x10: 1, 0x04: 2, 0x20: 2, 0x40: 3, 0x80: 3}
LO, HI = 0.10, 0.85


def last_drawn(plot: HistoryPlot) -> str:
    """What the plot drew last; the test fails when it has drawn nothing."""
    assert plot.last_text is not None, "the plot drew nothing"
    return plot.last_text.plain


def dot_rows(lines: list[str]) -> list[int]:
    """Every dot row (0 = top) lit in these plot rows."""
    rows = []
    for cy, line in enumerate(lines):
        for ch in line:
            if ord(ch) in BRAILLE:
                bits = ord(ch) - 0x2800
                rows += [cy * 4 + r for b, r in _ROW_OF_BIT.items() if bits & b]
    return rows


def plot_rows(text: str, title: str) -> list[str]:
    """The rows of dots under a panel's title line, up to the next title or the x axis."""
    lines = text.split("\n")
    start = next(i for i, ln in enumerate(lines) if ln.startswith(title)) + 1
    out = []
    for ln in lines[start:]:
        if "┤" not in ln and "│" not in ln:
            break
        out.append(ln)
    return out


def expected_row(value: float, rows: int) -> int:
    """Where the plot puts ``value`` on a 0..100 % axis of ``rows`` text rows."""
    return int((1.0 - value) * (4 * rows - 1) + 0.5)


def kv_history(n: int = 120, engines: int = 1) -> History:
    """KV usage ramping from 10 % to 85 % over ``n`` one-second ticks."""
    h = History()
    for i in range(n):
        t = 1_700_000_000.0 + i
        rs = tuple(Reading("kv.usage_ratio", LO + (HI - LO) * i / (n - 1), "ratio",
                           make_labels(instance="127.0.0.1:8000", engine=e)) for e in range(engines))
        h.add(Snapshot(t, {"server": Sample("server", t, rs)}, i, {}))
    return h


# -- the renderer --------------------------------------------------------------------------
def test_a_ramp_lights_the_dot_rows_its_ends_map_to():
    c = Canvas(20, 5)
    xs = [float(i) for i in range(41)]
    c.line(Trace("r", xs, [LO + (HI - LO) * i / 40 for i in range(41)]), 0, 0.0, 40.0, 0.0, 1.0)
    lines = [t.plain for t in c.rows(["x"])]
    lit = dot_rows(lines)
    assert min(lit) == expected_row(HI, 5)
    assert max(lit) == expected_row(LO, 5)
    # the first column holds the low end, the last column the high end
    first = dot_rows([ln[0] for ln in lines])
    last = dot_rows([ln[-1] for ln in lines])
    assert max(first) == expected_row(LO, 5) and min(last) == expected_row(HI, 5)


def test_points_farther_apart_than_the_gap_are_not_joined():
    c = Canvas(40, 2)
    xs = [0.0, 1.0, 2.0, 30.0, 31.0, 32.0]   # a hole between 2 s and 30 s
    c.line(Trace("g", xs, [0.5] * 6), 0, 0.0, 32.0, 0.0, 1.0, gap=3.0)
    lines = [t.plain for t in c.rows(["x"])]
    cols_lit = {i for ln in lines for i, ch in enumerate(ln) if ord(ch) in BRAILLE}
    assert {0, 1} <= cols_lit and 39 in cols_lit
    assert not cols_lit & set(range(5, 35))          # nothing drawn across the hole
    joined = Canvas(40, 2)
    joined.line(Trace("g", xs, [0.5] * 6), 0, 0.0, 32.0, 0.0, 1.0)
    assert all(any(ord(ln[i]) in BRAILLE for ln in (t.plain for t in joined.rows(["x"])))
               for i in range(40))


def test_y_ticks_label_both_ends():
    ticks = y_ticks(0.0, 0.06, 4)
    assert ticks[:2] == [0.06, 0.0]
    assert y_ticks(0.0, 1.0, 12) == [1.0, 0.0, 0.25, 0.5, 0.75]


# -- the plot of a layer -------------------------------------------------------------------
def test_plot_text_shows_the_ramp_with_units_and_time_labels():
    h = kv_history(120)
    text = plot_text(h, Layer.MEMORY, 100, 20).plain
    assert text.startswith("KV-cache usage")
    assert "min 10 %" in text and "max 85 %" in text and "now 85 %" in text
    lines = text.split("\n")
    assert "100 %┤" in lines[1] and any("0 %┤" in ln for ln in lines)
    assert lines[-1].rstrip().endswith("now") and "-60s" in lines[-1]
    rows = plot_rows(text, "KV-cache usage")
    lit = dot_rows(rows)
    assert min(lit) == expected_row(HI, len(rows))
    assert max(lit) == expected_row(LO, len(rows))


def test_replay_axis_reads_time_into_the_recording():
    h = kv_history(120)
    text = plot_text(h, Layer.MEMORY, 100, 12, origin=1_700_000_000.0 - 300).plain
    axis_labels = text.split("\n")[-1]
    # ticks 300..419 s into the recording, labelled at whole steps of its clock
    assert "0:05:00" in axis_labels and "0:06:45" in axis_labels and "now" not in axis_labels


def test_too_small_says_so_and_empty_history_says_what_it_waits_for():
    h = kv_history(10)
    assert "needs at least" in plot_text(h, Layer.MEMORY, 30, 12).plain
    assert "needs at least" in plot_text(h, Layer.MEMORY, 80, 5).plain
    assert plot_text(History(), Layer.DECODING, 80, 20).plain.startswith(
        "no history yet for TTFT p99")


def test_one_line_per_engine_named_in_the_legend_and_label_text_cleaned():
    h = History()
    for i in range(30):
        rs = tuple(Reading("gpu.util_ratio", 0.5, "ratio", make_labels(gpu=g))
                   for g in ("0", "1\x1b[2J"))
        h.add(Snapshot(1000.0 + i, {"nvml": Sample("nvml", 1000.0 + i, rs)}, i, {}))
    text = plot_text(h, Layer.HARDWARE, 100, 20).plain
    assert "━ GPU 0 50 %" in text and "\x1b" not in text and "GPU 1␛[2J" in text


def test_more_series_than_colours_says_how_many_are_not_drawn():
    h = History()
    for i in range(5):
        rs = tuple(Reading("gpu.util_ratio", 0.5, "ratio", make_labels(gpu=g)) for g in range(11))
        h.add(Snapshot(1000.0 + i, {"nvml": Sample("nvml", 1000.0 + i, rs)}, i, {}))
    assert "+3 not drawn" in plot_text(h, Layer.HARDWARE, 200, 20).plain


# -- the app -------------------------------------------------------------------------------
def ramp_app() -> tuple[InfertopApp, SyntheticSource]:
    src = SyntheticSource(kv=LO)
    return InfertopApp(src, pipeline=Pipeline(), options=AppOptions(manual_ticks=True)), src


async def ramp(pilot, app, src, n: int) -> None:
    for _ in range(200):
        if app.ticks >= 1:
            break
        await pilot.pause(0.02)
    for i in range(1, n):
        src.kv = LO + (HI - LO) * i / (n - 1)
        await app._poll()
    await pilot.pause()


def screen_lines(app) -> list[str]:
    return tui_demo.screen_lines(app, strip_right=True)


async def test_h_on_a_zoomed_pane_plots_its_history_and_h_hides_it():
    app, src = ramp_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await ramp(pilot, app, src, 60)
        plot = app.query_one(HistoryPlot)
        await pilot.press("3")
        full = app.query_one("#pane-memory").size.height
        await pilot.press("h")
        await pilot.pause()
        assert plot.shown and plot.last_text is not None
        text = plot.last_text.plain
        assert "KV-cache usage" in text and "max 85 %" in text and "min 10 %" in text
        assert "100 %┤" in text and "now" in text and "-50s" in text
        rows = plot_rows(text, "KV-cache usage")
        assert min(dot_rows(rows)) == expected_row(HI, len(rows))
        assert max(dot_rows(rows)) == expected_row(LO, len(rows))
        shown = "\n".join(screen_lines(app))
        assert "history: memory" in shown and "KV-cache usage" in shown
        assert app.query_one("#pane-memory").size.height < full    # the plot took rows
        await pilot.press("h")
        await pilot.pause()
        assert not plot.shown
        assert "history: memory" not in "\n".join(screen_lines(app))
        assert app.query_one("#pane-memory").size.height == full


async def test_h_needs_a_zoomed_pane_and_unzooming_hides_the_plot():
    app, src = ramp_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ramp(pilot, app, src, 5)
        plot = app.query_one(HistoryPlot)
        await pilot.press("h")
        assert not plot.shown and not plot.wanted
        await pilot.press("6")
        await pilot.press("h")
        await pilot.pause()
        assert plot.shown and "TTFT p99" in plot.last_text.plain
        await pilot.press("6")                    # back to six panes: no plot
        await pilot.pause()
        assert not plot.shown
        await pilot.press("1")                    # zoom another: the plot follows
        await pilot.pause()
        assert plot.shown and plot.last_text.plain.startswith("GPU util")


async def test_the_plot_kept_between_ticks_is_the_one_on_screen():
    """sync_history_plot keeps the plot it found (no DOM query a tick); a plot that left
    the DOM is not the one drawn: the new one is found and drawn."""
    from infertop.tui.widgets.history_plot import _plot_of
    app, src = ramp_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ramp(pilot, app, src, 5)
        first = app.query_one(HistoryPlot)
        assert _plot_of(app) is first and _plot_of(app) is first
        await first.remove()
        second = HistoryPlot(id="history-plot")
        await app.screen_stack[0].mount(second, before=app.query_one("#too-small"))
        assert _plot_of(app) is second
        await pilot.press("6")
        await pilot.press("h")
        await app._poll()
        await pilot.pause()
        assert second.shown and "TTFT p99" in last_drawn(second)


async def test_plot_fits_80x24():
    app, src = ramp_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await ramp(pilot, app, src, 30)
        await pilot.press("3")
        await pilot.press("h")
        await pilot.pause()
        plot = app.query_one(HistoryPlot)
        text = last_drawn(plot)
        assert text.startswith("KV-cache usage") and "now" in text
        assert len(text.split("\n")) <= plot.size.height
        assert all(len(ln) <= plot.size.width for ln in text.split("\n"))
        shown = "\n".join(screen_lines(app))
        assert "KV-cache usage" in shown and "100 %┤" in shown
        await pilot.resize_terminal(70, 20)       # below 80x24: the notice, no plot
        await pilot.pause()
        shown = "\n".join(screen_lines(app))
        assert "terminal too small" in shown and "KV-cache usage" not in shown


async def test_plot_redraws_at_most_once_a_second_while_ticks_arrive():
    app, src = ramp_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ramp(pilot, app, src, 3)
        plot = app.query_one(HistoryPlot)
        clock = [100.0]
        plot.clock = lambda: clock[0]
        await pilot.press("3")
        await pilot.press("h")
        await pilot.pause()
        drawn = plot.draws
        assert drawn >= 1
        for _ in range(4):                         # four ticks within the same second
            src.kv = 0.5
            await app._poll()
        assert plot.draws == drawn
        clock[0] += 1.0                            # a second later: the next tick draws
        await app._poll()
        assert plot.draws == drawn + 1
        assert "now 50 %" in last_drawn(plot)
        clock[0] += 0.95                           # the next 1 s tick, a little early
        await app._poll()
        assert plot.draws == drawn + 2


def test_help_lists_h():
    from rich.console import Console

    from infertop.tui.screens.help import bindings_table
    con = Console(width=160, record=True, color_system=None)
    con.print(bindings_table(InfertopApp(SyntheticSource(), pipeline=Pipeline())))
    row = next(ln for ln in con.export_text().splitlines() if ln.strip().startswith("h "))
    assert "history" in row and "zoomed pane" in row


async def test_replay_plot_reads_time_into_the_recording(tmp_path):
    import re

    from infertop.cli.main import build_parser, make_pipeline
    from infertop.probes.sources.demo import DemoSource
    from infertop.probes.sources.recorder import record_headless
    from infertop.probes.sources.replay import ReplaySource
    from infertop.tui.modes import ReplayApp
    path = tmp_path / "kv.jsonl"
    assert await record_headless(DemoSource("mem-kv-leak"), path, 90, 0) == 90
    src = ReplaySource(path)
    app = ReplayApp(src, pipeline=make_pipeline(build_parser().parse_args([])),
                    options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(140, 40)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        for _ in range(60):
            await app._poll()
        await pilot.press("3")
        await pilot.press("h")
        await pilot.pause()
        plot = app.query_one(HistoryPlot)
        labels = last_drawn(plot).split("\n")[-1]
        clock = [int(m[0]) * 3600 + int(m[1]) * 60 + int(m[2])
                 for m in re.findall(r"(\d):(\d\d):(\d\d)", labels)]
        assert "now" not in labels and clock and clock == sorted(clock)
        assert min(clock) >= 0 and max(clock) <= src.elapsed   # the replay's own timeline
        assert src.elapsed - max(clock) <= 15


def test_nan_and_inf_values_leave_holes_not_a_broken_axis():
    h = History()
    for i in range(20):
        v = float("nan") if i == 5 else float("inf") if i == 6 else 0.5
        h.add(Snapshot(1000.0 + i, {"s": Sample("s", 1000.0 + i, (
            Reading("server.requests_running", v * 10, "count", make_labels(engine=0)),))}, i, {}))
    text = plot_text(h, Layer.SCHEDULING, 80, 12).plain
    assert "max 5 " in text and "min 5 " in text and "nan" not in text.lower()


def test_plot_keeps_textual_visible():
    # shown/hidden is the plot's own state (`shown`); Textual's read-write Widget.visible
    # (visibility, read by its compositor) must stay Textual's: it was shadowed by a
    # read-only property, so `plot.visible = False` raised AttributeError
    plot = HistoryPlot()
    assert not plot.shown and plot.visible          # not shown yet; visibility untouched
    plot.set_visible(True)
    assert plot.shown and plot.has_class("-visible")
    plot.visible = False
    assert plot.styles.visibility == "hidden" and not plot.visible and plot.shown
