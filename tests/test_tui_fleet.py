"""The fleet screen through Pilot: the node x GPU grid and the engines table with each
row's worst finding, sort, filter, Enter into one node's six panes and back; and the rows
as pure functions of a FleetFrame."""

from __future__ import annotations

import pytest
from textual.coordinate import Coordinate
from textual.widgets import DataTable

from helpers.fleet_source import DemoFleetSource
from helpers.tui_demo import screen_lines
from infertop.fleet import FleetPipeline, diagnoser_factory
from infertop.tui.modes import FleetApp, app_for_source
from infertop.tui.options import AppOptions
from infertop.tui.screens.fleet import NodeScreen, engine_rows, gpu_rows

pytestmark = pytest.mark.slow   # the fleet screen driven through the whole app

BAD = {2: ("dec-ttft-burst", 35)}   # node-03 plays a TTFT burst


async def _frames(src, pipe, n):
    frame = None
    for _ in range(n):
        frame = pipe.feed(await src.next())
    return frame


async def test_rows_name_every_node_and_the_bad_ones_worst_finding():
    src = DemoFleetSource(4, BAD)
    frame = await _frames(src, FleetPipeline(diagnoser_factory()), 15)
    grows = {r.node: r for r in gpu_rows(frame)}
    assert list(grows) == ["node-01", "node-02", "node-03", "node-04"]
    assert all(len(r.gpus) == 1 and r.gpus[0][1] is not None for r in grows.values())
    erows = {r.node: r for r in engine_rows(frame)}
    assert erows["node-03"].worst.code in ("DEC-001", "FLT-001", "FLT-002")
    assert erows["node-01"].worst.severity is None
    bad, good = erows["node-03"].values["ttft_p99"], erows["node-01"].values["ttft_p99"]
    assert bad is not None and good is not None and bad > 5 * good


def pane_text(screen, layer: str) -> str:
    from rich.console import Console
    con = Console(width=200, record=True, color_system=None)
    con.print(screen.query_one(f"#pane-{layer}").last_renderable)
    return con.export_text()


def row_key(table: DataTable, row: int) -> str:
    """The key of the table's row ``row`` ("node|engine" in the engines table)."""
    key = table.coordinate_to_cell_key(Coordinate(row, 0)).row_key.value
    assert key is not None
    return key


def text(widget) -> str:
    r = widget.render()
    return str(getattr(r, "plain", r))


async def test_fleet_screen_sort_filter_and_drill_down():
    src = DemoFleetSource(4, BAD)
    app = app_for_source(src, pipeline=FleetPipeline(diagnoser_factory()), interval=1.0,
                         options=AppOptions(manual_ticks=True))
    assert isinstance(app, FleetApp)
    async with app.run_test(size=(160, 48)) as pilot:
        for _ in range(12):
            await app._poll()
        await pilot.pause()
        gpus = app.query_one("#fleet-gpus", DataTable)
        engines = app.query_one("#fleet-engines", DataTable)
        assert gpus.row_count == 4 and engines.row_count == 4
        # sorted by worst finding first: the bad node on top
        assert row_key(engines, 0).startswith("node-03|")
        assert "4 nodes" in text(app.query_one("#header"))
        await pilot.press("s")          # worst -> TTFT p99 (descending): still node-03
        assert app.sort_by == "ttft_p99"
        assert row_key(engines, 0).startswith("node-03|")
        await pilot.press("S")          # ascending: node-03 last
        assert row_key(engines, 3).startswith("node-03|")
        await pilot.press("slash")
        for ch in "node-02":
            await pilot.press(ch if ch != "-" else "minus")
        await pilot.pause()
        assert engines.row_count == 1 and gpus.row_count == 1
        app.action_clear_filter()
        await pilot.pause()
        assert engines.row_count == 4
        engines.focus()
        engines.move_cursor(row=0)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen)
        node = app.screen.node
        await app._poll()
        await pilot.pause()
        # the node's own six panes, drawn from its own Frame
        assert "H100" in pane_text(app.screen, "hardware")
        assert "TTFT" in pane_text(app.screen, "decoding")
        # `h` on a zoomed pane plots this node's History under it, as on one box
        from infertop.tui.widgets.history_plot import HistoryPlot
        plot = app.screen.query_one(HistoryPlot)
        await pilot.press("h")                  # nothing zoomed: a hint, no plot
        await pilot.pause()
        assert not plot.shown
        await pilot.press("1")
        await pilot.press("h")
        await app._poll()
        await pilot.pause()
        assert plot.shown and plot.draws >= 1
        drawn = plot.last_text.plain
        assert "history: hardware" in str(plot.border_title) and "gpu" in drawn.lower()
        assert plot.last_text is not None
        await pilot.press("h")
        await pilot.pause()
        assert not plot.shown
        await pilot.press("1")
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, NodeScreen)
        assert node.startswith("node-")




async def test_fleet_at_80_columns_shows_node_worst_finding_and_latency_first():
    """issue 23: at 80 columns the engines table stopped after "run"; Home did nothing."""
    src = DemoFleetSource(4, BAD)
    app = app_for_source(src, pipeline=FleetPipeline(diagnoser_factory()), interval=1.0,
                         options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(12):
            await app._poll()
        await pilot.pause()
        lines = screen_lines(app)
        head = next(ln for ln in lines if "TTFT p99" in ln and "ITL p50" in ln)
        assert head.index("node") < head.index("worst finding") < head.index("TTFT p99"), head
        bad = next(ln for ln in lines[lines.index(head):] if "node-03" in ln)
        assert any(c in bad for c in ("DEC-001", "FLT-001", "FLT-002")) and " s" in bad, bad
        engines = app.query_one("#fleet-engines", DataTable)
        assert app.focused is engines and engines.cursor_row == 0   # on the worst row
        await pilot.press("end")
        assert engines.cursor_row == engines.row_count - 1
        await pilot.press("home")
        assert engines.cursor_row == 0
        await pilot.press("right")
        await pilot.pause()
        assert engines.scroll_x > 0                 # the columns past the node scroll
        assert "node-03" in "\n".join(screen_lines(app))   # the node stays (fixed column)


async def test_fleet_at_80_columns_marks_the_columns_it_cuts_when_scrolled():
    """A column cut by the table's edge showed without a cut mark: "tok" for "tok/s" at the
    right, and scrolled, the tail of "18ms" as "s" behind the node column (read as a value)."""
    from infertop.tui.screens.fleet import ENGINE_COLUMNS
    src = DemoFleetSource(4, BAD)
    app = app_for_source(src, pipeline=FleetPipeline(diagnoser_factory()), interval=1.0,
                         options=AppOptions(manual_ticks=True))
    labels = tuple(label for label, _ in ENGINE_COLUMNS) + ("…", "worst (Prometheus)")

    def engines_lines() -> list[str]:
        lines = screen_lines(app)
        head = next(i for i, ln in enumerate(lines) if " KV" in ln and "run" in ln)
        return [ln.rstrip() for ln in lines[head:head + 5]]

    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(12):
            await app._poll()
        await pilot.pause()
        engines = app.query_one("#fleet-engines")
        seen = []
        for _ in range(4):
            lines = engines_lines()
            seen.append((engines.scroll_x, lines))
            head, rows = lines[0], lines[1:]
            after_node = head.split("node", 1)[1].lstrip()
            assert after_node.startswith(labels), (engines.scroll_x, head)
            if engines.scroll_x < engines.max_scroll_x:   # more columns to the right
                assert head.endswith("…") and all(r.endswith("…") for r in rows), lines
            await pilot.press("right")
            await pilot.pause()
        assert seen[-1][0] == engines.max_scroll_x > 0, seen


async def test_a_dead_prometheus_is_said_in_the_body():
    from infertop.probes.prometheus.source import PrometheusSource
    src = PrometheusSource("http://127.0.0.1:9", timeout=0.5)
    app = app_for_source(src, pipeline=FleetPipeline(diagnoser_factory()), interval=1.0,
                         options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(80, 24)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        await pilot.pause()
        body = "\n".join(screen_lines(app)[1:])
    assert "cannot read the fleet" in body and "127.0.0.1:9" in body, body


async def test_fleet_strip_cuts_a_long_first_title_at_80_columns():
    """The fleet strip put its first finding's title whole (a long one ran past the strip's
    rows and hid the count of the rest); it is fitted as the main strip's now."""
    from types import SimpleNamespace

    from infertop.findings import Finding, Layer, Severity
    long_title = "TTFT p99 over the SLO " + "while the prefill queue grows " * 12
    fs = [Finding("DEC-001", Layer.DECODING, Severity.CRIT, long_title,
                  (), "", 0.0, subject=(("node", "node-03"),)),
          Finding("MEM-001", Layer.MEMORY, Severity.WARN, "KV cache nearly full", (), "", 0.0,
                  subject=(("node", "node-01"),))]
    app = app_for_source(DemoFleetSource(2, {}), pipeline=FleetPipeline(diagnoser_factory()),
                         interval=1.0, options=AppOptions(manual_ticks=True))
    assert isinstance(app, FleetApp)
    async with app.run_test(size=(80, 24)) as pilot:
        await app._poll()
        await pilot.pause()
        app._update_strip(SimpleNamespace(findings=fs))
        strip = app._shown["#findings-strip"].plain
    assert len(strip) <= 78, strip      # 80x24 is the small layout: one row, as the main strip
    assert strip.startswith("node-03 DEC-001 TTFT p99") and "…" in strip, strip
    assert "node-01 MEM-001" in strip or strip.endswith("+1 more (f)"), strip


async def test_m_in_f_mutes_a_fleet_finding_out_of_the_fleet_strip() -> None:
    """`m` in `f` mutes a finding for 30 min: the main strip leaves it out and says how many
    are muted; the fleet strip showed it still (issue 35's habits, in fleet mode)."""
    src = DemoFleetSource(4, BAD)
    app = app_for_source(src, pipeline=FleetPipeline(diagnoser_factory()), interval=1.0,
                         options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(160, 48)) as pilot:
        for _ in range(40):
            await app._poll()
            if app.frame is not None and app.frame.findings:
                break
        await pilot.pause()
        assert app.frame is not None and app.frame.findings
        first = app.frame.findings[0]
        lead = f"{dict(first.subject).get('node', '')} {first.code}".strip()
        assert app._shown["#findings-strip"].plain.startswith(lead)
        await pilot.press("f")
        await pilot.pause()
        await pilot.press("m")
        await pilot.pause()
        await pilot.press("escape")
        await app._poll()
        await pilot.pause()
        strip = app._shown["#findings-strip"].plain
        assert not strip.startswith(lead) and "1 muted: f" in strip, strip
        await pilot.press("f")             # listed still; m unmutes: back in the strip
        await pilot.pause()
        await pilot.press("m")
        await pilot.press("escape")
        await app._poll()
        await pilot.pause()
        strip = app._shown["#findings-strip"].plain
        assert strip.startswith(lead) and "muted" not in strip, strip
