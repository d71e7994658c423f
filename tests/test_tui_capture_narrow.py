"""issue 23, the capture screens at 80x24: a DataTable sized each column to its widest cell,
so `P`'s cpu and gil columns were past the table's right edge (a 34-column thread name)
and names were cut by the edge with no mark.  Every value column (PID, state, cpu, gil,
time, calls, avg µs) must be whole on screen for every row; a name that does not fit
ends with "…"."""

from __future__ import annotations

import pytest

from helpers.tui_demo import demo_app, open_capture
from infertop.probes.capture.nsys import NsysResult
from infertop.probes.capture.pyspy import DumpResult, RecordResult
from infertop.tui.screens.capture_table import fit_widths


def table_lines(app) -> list[str]:
    """The screen's lines inside the capture table's region (its header first)."""
    strips = app.screen._compositor.render_strips()
    lines = ["".join(seg.text for seg in strip) for strip in strips]
    region = app.screen.query_one("#capture-threads").region
    return [ln[region.x:region.right] for ln in lines[region.y:region.bottom]]


def expected(result) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """The value column headers, and each row's name and values, from the result itself."""
    if isinstance(result, DumpResult):
        return ["PID", "state"], [(th.name or "", [str(p.pid), th.state])
                                  for p in result.processes for th in p.threads]
    if isinstance(result, RecordResult):
        assert result.summary is not None
        return ["cpu", "gil"], [(name, [f"{a * 100:.0f}%", f"{g * 100:.0f}%"])
                                for name, a, g in result.summary.per_thread]
    assert isinstance(result, NsysResult) and result.summary is not None
    return ["time", "calls", "avg µs"], [
        (k.name, [f"{k.time_share * 100:.1f}%", str(k.instances), f"{k.avg_ns / 1000:.1f}"])
        for k in result.summary.top_kernels]


@pytest.mark.slow   # demo apps driven key by key (fit_widths below stays in the quick loop)
@pytest.mark.parametrize("scenario,key", [("sch-gil-contention", "p"),
                                          ("sch-gil-contention", "P"),
                                          ("krn-launch-bound", "n")])
async def test_values_whole_and_names_cut_with_a_mark_at_80x24(scenario, key):
    await check_80x24(scenario, key, (80, 24))


@pytest.mark.slow
async def test_a_terminal_shrunk_to_80_columns_refits_the_table():
    await check_80x24("sch-gil-contention", "P", (160, 48))


async def check_80x24(scenario: str, key: str, size: tuple[int, int]) -> None:
    """Open ``key``'s capture at ``size``, shrink to 80x24 if needed, check the table."""
    app = demo_app(scenario)
    async with app.run_test(size=size) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        for _ in range(20 - app.ticks):
            await app._poll()
        await pilot.pause()
        screen = await open_capture(app, pilot, key)
        if size != (80, 24):
            assert " cpu " in " ".join(table_lines(app)[:1])
            await pilot.resize_terminal(80, 24)
        await pilot.pause()
        await pilot.pause()
        lines = table_lines(app)
        region = screen.query_one("#capture-threads").region
        assert region.right <= 80
        headers, rows = expected(screen.result)
        assert rows
        for h in headers:
            assert f" {h} " in f" {lines[0]} ", lines[0]
        shown = lines[1:]
        cut = 0
        for (name, values), line in zip(rows, shown):     # every row the table's height shows
            words = line.split()
            for v in values:
                assert v in words, f"{v!r} not whole in {line!r}"
            if name not in line:
                # cut: a prefix of the name, then the cut mark
                head = line.split("…")[0].split("  ")[-1].strip()
                assert "…" in line and head and name.startswith(head), (name, line)
                cut += 1
        assert cut, "\n".join(lines)    # the demo's names are long enough to need a cut
        assert len(shown) >= min(len(rows), 3)


def test_fit_widths_shrinks_the_labels_only_in_their_order():
    # PID 5, role 11, thread 30, state 6; 4 columns of 2 padding in 35
    # the thread to CUT_MIN first, then the role
    assert fit_widths([5, 11, 30, 6], 35, 2, (2, 1)) == [5, 10, 6, 6]
    assert fit_widths([5, 11, 30, 6], 45, 2, (2, 1)) == [5, 11, 15, 6]
    assert fit_widths([5, 11, 30, 6], 60, 2, (2, 1)) == [5, 11, 30, 6]    # fits: natural
    assert fit_widths([30, 3, 3], 20, 2, (0,)) == [8, 3, 3]
    # too narrow for the labels' floor: below it, values still whole
    assert fit_widths([30, 3, 3], 12, 2, (0,)) == [1, 3, 3]
    assert fit_widths([30, 3, 3], 4, 2, (0,)) == [1, 3, 3]


@pytest.mark.slow   # a demo app driven key by key
async def test_the_dump_stacks_wrap_at_boundaries_at_80x24():
    """The stacks beside `p`'s table wrapped mid-word at 80 columns
    ("vllm.entrypoints.openai.api_serv" / "er --model ..."): a line now ends with a whole
    word, after a name's separator ("/", ".", "_"), or with the cut mark."""
    from infertop.tui.widgets.boundary_wrap import BREAK_AFTER
    app = demo_app("sch-gil-contention")
    async with app.run_test(size=(80, 24)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        screen = await open_capture(app, pilot, "p")
        strips = app.screen._compositor.render_strips()
        region = screen.query_one("#capture-stacks-scroll").region
        lines = ["".join(seg.text for seg in strip)[region.x:region.right].rstrip()
                 for strip in strips[region.y:region.bottom]]
    words: set[str] = set()
    for p in screen.result.processes:
        words |= set(f"Process {p.pid} [{p.role}] {p.command}".split())
        for th in p.threads:
            words |= set(f'Thread {th.tid_text} ({th.state}): "{th.name or ""}"'.split())
            for f in th.frames:
                words |= set(f.text().split())
    shown = [ln for ln in lines if ln.strip()]
    assert len(shown) >= 8 and any("Process" in ln for ln in shown), "\n".join(lines)
    for ln in shown:
        last = ln.split()[-1]
        assert any(w.endswith(last) for w in words) or last[-1] in BREAK_AFTER \
            or last.endswith("…"), \
            f"{ln!r} ends inside a word\n" + "\n".join(lines)


@pytest.mark.parametrize("first", [80, 120])
async def test_the_narrow_class_follows_the_terminal_width(first):
    """Below 100 columns the capture table takes 55% of the width (`-narrow`), from the
    screen's first frame and across resizes."""
    from textual.app import App

    from infertop.tui.screens.capture import CaptureScreen

    app: App[None] = App()
    async with app.run_test(size=(first, 24)) as pilot:
        await app.push_screen(CaptureScreen())
        await pilot.pause()
        screen = app.screen
        for n, width in enumerate((first, 99, 100, 80, 160)):
            if n:
                await pilot.resize_terminal(width, 24)
                await pilot.pause()
            assert screen.has_class("-narrow") == (width < 100), width
            table = screen.query_one("#capture-threads")
            assert table.outer_size.width == (width * 55 // 100 if width < 100
                                              else max(30, width * 45 // 100)), width
