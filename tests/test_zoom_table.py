"""Tables a person can work with in a zoomed pane (issue 11, item 2): scroll, sort by any
column (by value, not text), filter by text; flagged rows stay marked; only the rows on
screen are drawn.  Content through the panes' own render_frame, keys through Pilot."""

from __future__ import annotations

import functools

import pytest
from rich.text import Text

from helpers.big_source import BigSource
from helpers.panes import frames_of, pane_text
from infertop.cli.main import build_parser, make_pipeline
from infertop.pipeline import Frame, Pipeline
from infertop.probes.sources.demo import DemoSource
from infertop.tui.app import InfertopApp
from infertop.tui.options import AppOptions
from infertop.tui.panes.columns import Columns
from infertop.tui.panes.widget import LayerPane
from infertop.tui.zoom_table import TableView, cell_value, sort_key, view_order

pytestmark = pytest.mark.slow   # zoomed tables driven through the whole app


@functools.cache
def big_frame() -> Frame:
    return frames_of(BigSource(gpus=64, engines=16, procs=200), 3)


@functools.cache
def demo_frame(name: str, ticks: int) -> Frame:
    return frames_of(DemoSource(name), ticks, make_pipeline(build_parser().parse_args([])))


def data_rows(text: str) -> list[str]:
    """The table's rows: lines that start with a GPU index or a PID."""
    return [ln for ln in text.splitlines() if ln[:1].isdigit()]


def position(text: str) -> str:
    return next(ln for ln in text.splitlines() if ln.startswith(("rows ", "no row")))


def number(cell: str) -> float:
    """A cell's sort value, which must be a number."""
    v = cell_value(cell)
    assert isinstance(v, float), (cell, v)
    return v


def word_key(cell: str) -> tuple:
    """The sort key of a cell that shows something (a cell showing nothing has no key)."""
    v = cell_value(cell)
    assert v is not None, cell
    return sort_key(v)


def shown_text(pane: LayerPane) -> str:
    """What the pane drew last (a Text: tables and messages alike)."""
    drawn = pane.last_renderable
    assert isinstance(drawn, Text), drawn
    return drawn.plain


# ---- sorting by value -------------------------------------------------------------------
def test_cells_sort_by_value_with_units_not_by_text():
    cells = ["1.2 GiB", "900 MiB", "2.00 s", "41 ms", "████░ 73 %", "█░░░░ 9 %", "12/80 GiB",
             "1.4 GHz", "900 MHz", "3.1 k/s", "950 /s"]
    v = {c: number(c) for c in cells}
    assert v["900 MiB"] < v["1.2 GiB"] < v["12/80 GiB"]
    assert v["41 ms"] < v["2.00 s"]
    assert v["█░░░░ 9 %"] < v["████░ 73 %"]
    assert v["900 MHz"] < v["1.4 GHz"]
    assert v["950 /s"] < v["3.1 k/s"]
    # words in natural order, after numbers; nothing shown is None (sorted last)
    words = sorted(["GPU 10", "GPU 2", "engine_core"], key=word_key)
    assert words == ["engine_core", "GPU 2", "GPU 10"]
    assert word_key("7") < word_key("api_server")
    assert [cell_value(c) for c in ("–", "n/a", "err", "")] == [None] * 4


def test_odd_digits_in_a_cell_do_not_break_the_sort():
    # str.isdigit() says yes to "²", int() says no: a command line like this once raised
    assert cell_value("a 2²") is not None and cell_value("x ٣ y")
    sorted(["a 2²", "a 10", "x ٣ y", "b"], key=word_key)


def test_a_measure_column_sorts_largest_first_an_identifier_in_order():
    from infertop.tui.zoom_table import is_measure
    headers = ["GPU", "PID", "GPU mem", "SM", "of PID"]
    rows = [[Text(c) for c in r] for r in (["0", "4180", "57.1 GiB", "68 %", "4100"],
                                           ["1", "4181", "12.0 GiB", "5 %", "4100"])]
    assert [is_measure(headers, rows, c) for c in range(5)] == [False, False, True, True,
                                                                False]


def table(rows: list[list[str]], headers=("name", "mem")) -> Columns:
    t = Columns(list(headers))
    for r in rows:
        t.add_row(*[Text(c) for c in r])
    return t


def test_rows_without_a_value_go_last_in_both_directions():
    t = table([["a", "–"], ["b", "2 GiB"], ["c", "900 MiB"], ["d", "n/a"], ["e", "5 GiB"]])
    for reverse, want in ((False, ["c", "b", "e"]), (True, ["e", "b", "c"])):
        order = view_order(t.rows, list(range(5)), TableView(sort=1, reverse=reverse))
        names = [t.rows[i][0].plain for i in order]
        assert names[:3] == want and sorted(names[3:]) == ["a", "d"]


def test_filter_keeps_matching_rows_case_insensitive():
    t = table([["vllm api", "1 GiB"], ["VLLM::Worker", "2 GiB"], ["python", "3 GiB"]])
    order = view_order(t.rows, [0, 1, 2], TableView(query="vllm"))
    assert order == [0, 1]


# ---- the window: drawn rows only --------------------------------------------------------
def test_window_draws_only_the_rows_it_shows():
    t = table([[f"row{i}", f"{i} GiB"] for i in range(100)])
    t.add_row(Text("x" * 25), Text("0 GiB"))      # wide, but outside the window below
    view = TableView(sort=1, reverse=True)          # biggest first: row99 .. row0, the wide one last
    out = t.window_text(view, limit=6).plain.splitlines()
    assert len(out) == 6 and out[1].startswith("row99") and out[4].startswith("row96")
    assert out[-1].startswith("rows 1-4 of 101 · sort mem ▼")
    assert len(out[1].split("  ")[0]) == len("row99")   # width from the rows shown only
    assert view.rows == 101 and view.page == 4
    view.offset = 10**6                              # End: clamped to the last page
    out = t.window_text(view, limit=6).plain.splitlines()
    assert out[-2].startswith("x" * 25) and out[-1].startswith("rows 98-101 of 101")


def test_flagged_rows_stay_marked_wherever_the_sort_puts_them():
    t = Columns(["GPU", "SM act"])
    for g in range(30):
        t.add_row(str(g), Text("20 % PAR-001") if g == 3 else Text("80 %"))
    view = TableView()
    top = t.window_text(view, limit=6).plain.splitlines()
    assert top[1].startswith("3 ") and "PAR-001" in top[1]          # own order: flagged first
    view.sort, view.reverse = 1, True                               # busiest first: GPU 3 last
    page = t.window_text(view, limit=6).plain.splitlines()
    assert "PAR-001" not in "\n".join(page[:-1])
    assert "1 flagged below" in page[-1]
    view.offset = 10**6
    end = t.window_text(view, limit=6).plain.splitlines()
    assert "PAR-001" in end[-2] and end[-2].startswith("3 ") and "1 flagged above" not in end[-1]
    view.query, view.offset = "80", 0                # a filter that leaves the flagged row out
    out = t.window_text(view, limit=6).plain.splitlines()
    assert "1 flagged not matching" in out[-1] and "PAR-001" not in "\n".join(out)


# ---- panes ------------------------------------------------------------------------------
def test_zoomed_hardware_sorts_by_sm_activity_and_scrolls():
    frame = big_frame()
    plain = pane_text("hardware", frame, width=150, height=20)
    assert plain.splitlines()[-1].endswith("more")       # without a view: cut, no scrolling
    view = TableView()
    text = pane_text("hardware", frame, width=150, height=20, view=view)
    assert position(text).startswith("rows 1-") and " of 64" in position(text)
    assert view.rows == 64 and view.headers[2] == "SM act"
    view.sort, view.reverse = 2, False                                # SM act, least first
    text = pane_text("hardware", frame, width=150, height=20, view=view)
    assert data_rows(text)[0].split()[0] == "3"                       # the 20 % GPU
    assert "SM act ▲" in text.splitlines()[0]
    view.offset = 20
    text = pane_text("hardware", frame, width=150, height=20, view=view)
    first = int(position(text).split()[1].split("-")[0])
    assert first == 21 and len(text.splitlines()) <= 20
    view.query = "6 H100"                                            # GPUs 6, 16, 26 ...
    view.offset = 0
    text = pane_text("hardware", frame, width=150, height=20, view=view)
    assert sorted(r.split()[0] for r in data_rows(text)) == ["16", "26", "36", "46", "56", "6"]
    assert 'filter "6 H100"' in position(text)


def test_zoomed_memory_lists_every_gpu_process_like_nvitop():
    frame = big_frame()
    view = TableView()
    text = pane_text("memory", frame, width=150, height=40, view=view)
    header = next(ln for ln in text.splitlines() if ln.startswith("GPU  PID"))
    assert header.split() == ["GPU", "PID", "user", "role", "GPU", "mem", "SM", "command"]
    assert view.rows == 64                              # one per GPU process, all of them
    row = next(r for r in data_rows(text) if r.split()[1] == "1001")
    assert "worker" in row and "46.6 GiB" in row


def test_process_list_shows_user_sm_and_a_cleaned_command():
    from helpers.snapkit import reading
    from infertop.meta import ProcessMeta
    from infertop.model import Capability, Sample, Snapshot
    evil = "python -m vllm serve m \x1b]0;pwned\x07 --port 8000"
    proc = (reading("process.info", 1, text=evil, pid=77, ppid=1, name="python",
                    role="api_server", user="svc"),
            reading("process.cpu_ratio", 0.5, pid=77))
    gpu = (reading("gpu.info", 1, text="NVIDIA H100", gpu=0),
           reading("process.gpu_mem_bytes", 3 * 2**30, pid=77, gpu=0),
           reading("process.gpu_sm_ratio", 0.42, pid=77, gpu=0),
           reading("process.gpu_mem_bytes", 2**30, pid=9999, gpu=0))
    snap = Snapshot(1_700_000_000.0, {"nvml": Sample("nvml", 1_700_000_000.0, gpu),
                                      "process": Sample("process", 1_700_000_000.0, proc,
                                                        meta=ProcessMeta(tree=(77,)))},
                    1, {"nvml": Capability("nvml", True)})
    frame = Pipeline().feed(snap)
    text = pane_text("memory", frame, width=160, height=30, view=TableView())
    row = next(r for r in data_rows(text) if r.split()[1] == "77")
    assert row.split()[2] == "svc" and "42 %" in row and "3.0 GiB" in row
    assert "\x1b" not in text and "\x07" not in text and "pwned" in row
    other = next(r for r in data_rows(text) if r.split()[1] == "9999")
    assert "(not the server)" in other


# ---- keys -------------------------------------------------------------------------------
async def test_keys_sort_scroll_and_filter_only_in_a_zoomed_pane():
    app = InfertopApp(BigSource(gpus=64, engines=16, procs=200), pipeline=Pipeline(),
                      options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(120, 36)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.05)
        await app._poll()
        await pilot.pause()
        hw = app.query_one("#pane-hardware", LayerPane)
        hw.focus()
        await pilot.press("s", "end")                 # not zoomed: the keys do nothing
        assert hw.table_view.sort is None and hw.table_view.offset == 0
        await pilot.press("1")
        await pilot.pause()
        shown = lambda: shown_text(hw)   # noqa: E731
        assert position(shown()).startswith("rows 1-")
        await pilot.press("s", "s", "s")              # GPU, util, SM act: largest first
        assert hw.table_view.sort == 2 and hw.table_view.reverse
        assert "SM act ▼" in shown().splitlines()[0]
        await pilot.press("S")                        # reversed: the 20 % GPU on top
        assert data_rows(shown())[0].split()[0] == "3" and "SM act ▲" in shown()
        page = hw.table_view.page
        await pilot.press("pagedown")
        assert position(shown()).startswith(f"rows {page + 1}-")
        await pilot.press("end")
        assert "-64 of 64 · sort SM act ▲" in position(shown())
        await pilot.press("home")
        assert position(shown()).startswith("rows 1-")
        await pilot.press("slash")
        await pilot.pause()
        # typed on the bottom line, the table in view and filtered as each key lands
        assert app.screen is app.screen_stack[0] and app.focused is not None
        assert app.focused.id == "table-filter"
        await pilot.press(*"6 H1")
        await pilot.pause()
        assert 'filter "6 H1"' in shown()
        await pilot.press(*"00", "enter")
        await pilot.pause()
        assert len(data_rows(shown())) == 6 and 'filter "6 H100"' in shown()
        assert app.focused is hw                      # Enter: back to the table's keys
        await pilot.press("escape")                   # clears the filter, stays zoomed
        assert "filter" not in position(shown()) and app.zoomed == 0
        assert " of 64" in position(shown())
        await pilot.press("1")                        # back to six panes: no position line
        await pilot.pause()
        assert not any(ln.startswith("rows ") for ln in shown().splitlines())


async def test_help_lists_the_zoomed_pane_keys():
    app = InfertopApp(BigSource(gpus=2), pipeline=Pipeline(),
                      options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(140, 50)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        from rich.console import Console

        from infertop.tui.screens.help import bindings_table
        con = Console(width=140, record=True, file=open("/dev/null", "w"))
        con.print(bindings_table(app))
        text = con.export_text()
        assert "zoomed pane: sort by the next column" in text
        assert "zoomed pane: filter rows by text" in text and "PgDn" in text


async def test_a_fleet_nodes_zoomed_pane_takes_the_table_keys_and_esc_still_goes_back():
    from helpers.fleet_source import DemoFleetSource
    from infertop.fleet import FleetPipeline, diagnoser_factory
    from infertop.tui.modes import FleetApp, app_for_source
    from infertop.tui.screens.fleet import NodeScreen
    app = app_for_source(DemoFleetSource(2, {}), pipeline=FleetPipeline(diagnoser_factory()),
                         interval=1.0, options=AppOptions(manual_ticks=True))
    from helpers.tui_demo import open_first_node
    async with app.run_test(size=(160, 48)) as pilot:
        await open_first_node(app, pilot)
        await pilot.press("1")                        # zoom the node's hardware pane
        await app._poll()
        await pilot.pause()
        hw = app.screen.query_one("#pane-hardware", LayerPane)
        await pilot.press("s")
        assert isinstance(app, FleetApp)
        assert hw.table_view.sort == 0 and app.sort_by == "worst"   # the pane's, not the fleet's
        assert "GPU ▲" in shown_text(hw).splitlines()[0]
        await pilot.press("escape")                   # no filter: Esc is the node screen's
        await pilot.pause()
        assert not isinstance(app.screen, NodeScreen)


async def test_left_right_scroll_a_zoomed_tables_columns_and_the_first_stays():
    app = InfertopApp(BigSource(gpus=8), pipeline=Pipeline(), options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(80, 24)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.05)
        await pilot.press("1")
        await pilot.pause()
        hw = app.query_one("#pane-hardware", LayerPane)
        head = lambda: shown_text(hw).splitlines()[0].split()   # noqa: E731
        assert head()[:3] == ["GPU", "util", "SM"]
        await pilot.press("right")
        await pilot.pause()
        assert head()[:3] == ["GPU", "SM", "act"] and "left of view (←)" in shown_text(hw)
        await pilot.press("left", "left")
        await pilot.pause()
        assert head()[:2] == ["GPU", "util"]
        await pilot.press("1")                        # un-zoomed: ← → are not the table's
        await pilot.pause()
        assert "table_columns" not in {b.binding.action for b in app.screen.active_bindings.values()}
