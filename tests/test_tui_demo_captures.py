"""issue 23, presenter controls: in demo mode `P`, `G` and `n` show what a capture of the
playing scenario would show, from bundled captures (tui/bundled/), labelled as bundled."""

import pytest
from textual.widgets import DataTable

from helpers.tui_demo import demo_app, wait_until
from infertop.probes.capture.nsys import NsysResult
from infertop.probes.capture.pyspy_record import RecordResult
from infertop.tui.demo_captures import bundled_gil, bundled_nsys, bundled_record
from infertop.tui.panes.widget import LayerPane
from infertop.tui.screens.capture import CaptureScreen

pytestmark = pytest.mark.slow   # demo apps driven key by key


def test_bundled_record_counts_the_real_dumps_as_the_live_summary_does():
    busy = bundled_record("healthy").summary
    assert busy is not None
    # the real busy vLLM: engine core and worker on CPU in 88 of 100 dumps, no GIL marks,
    # half the on-CPU time in the shm_broadcast ring's sched_yield polling
    threads = {name: (cpu, gil) for name, cpu, gil in busy.per_thread}
    assert threads["engine_core/MainThread (15571)"] == (0.88, 0.0)
    assert dict(busy.top_functions)["sched_yield (utils.py)"] == 0.5
    assert not any("not measured" in n for n in bundled_record("healthy").notes)
    staged_notes = bundled_record("sch-gil-contention").notes
    assert any("set to what sch-gil-contention describes, not measured" in n for n in staged_notes)
    gil = bundled_record("sch-gil-contention").summary
    assert gil is not None
    assert gil.gil_share == 0.97 and gil.per_process[0][0] == "api_server 15092"
    assert gil.per_thread[0] == ("api_server/MainThread (15092)", 0.97, 0.97)
    pid, role, agg = bundled_gil("sch-gil-contention")
    assert (pid, role, agg.gil_held_share) == (15092, "api_server", 0.97)
    assert next(iter(agg.holder_share)) == "MainThread (15092)"
    ns = bundled_nsys().summary
    assert ns is not None
    assert ns.top_kernels[0].name.startswith("void flash_fwd_kernel")
    assert ns.top_kernels[0].time_share == 0.625


def shown(app) -> str:
    return " ".join(str(w.render()) for w in app.screen.query("Static"))



async def start(pilot, app, ticks=3):
    while app.ticks < 1:
        await pilot.pause(0.01)
    for _ in range(ticks):
        await app._poll()
    await pilot.pause()


async def test_P_and_G_on_gil_contention_show_the_bundled_summaries():
    app = demo_app("sch-gil-contention")
    async with app.run_test(size=(140, 40)) as pilot:
        await start(pilot, app)
        await pilot.press("P")
        screen = app.screen
        assert isinstance(screen, CaptureScreen)
        await wait_until(pilot, lambda: not screen.capture_running)
        assert isinstance(screen.result, RecordResult)
        text = shown(app)
        assert "bundled" in text and "not of this simulated server" in text, text[:2000]
        assert "GIL held 97% (api_server 15092)" in text, text[:2000]
        table = screen.query_one("#capture-threads", DataTable)
        assert list(map(str, table.get_row_at(0))) == ["api_server/MainThread (15092)",
                                                       "97%", "97%"]
        ticks = app.ticks
        await app._poll()                 # the demo plays on under the capture screen
        assert app.ticks == ticks + 1
        await pilot.press("escape")
        sched = app.query_one("#pane-scheduling", LayerPane)
        pane = lambda: str(sched.last_renderable or "")   # noqa: E731
        await wait_until(pilot, lambda: "bundled py-spy: GIL held 97%" in pane())

        await pilot.press("G")
        await wait_until(pilot, lambda: "GIL held 97% by MainThread (15092)" in pane())
        # this scenario's mix is staged (real stacks, the scenario's GIL share): said so
        assert "bundled: the scenario's GIL mix on real stacks" in pane()
        await pilot.press("G")
        await wait_until(pilot, lambda: "GIL held 97% by" not in pane())
        await pilot.press("G")
        await wait_until(pilot, lambda: "GIL held 97% by" in pane())
        await pilot.press("greater_than_sign")       # another scenario: not its captures
        await app._poll()
        await app._poll()
        await wait_until(pilot, lambda: "bundled" not in pane())


async def test_n_shows_a_bundled_nsys_example_on_a_kernels_scenario_only():
    app = demo_app("sch-gil-contention")
    async with app.run_test(size=(140, 40)) as pilot:
        await start(pilot, app, 1)
        await pilot.press("n")
        await pilot.pause()
        assert app.screen.__class__.__name__ != "CaptureScreen"   # not a kernels scenario
    app = demo_app("krn-launch-bound")
    async with app.run_test(size=(140, 40)) as pilot:
        await start(pilot, app)
        await pilot.press("n")
        screen = app.screen
        assert isinstance(screen, CaptureScreen)
        await wait_until(pilot, lambda: not screen.capture_running)
        assert isinstance(screen.result, NsysResult)
        assert "not from this machine" in shown(app)
        table = screen.query_one("#capture-threads", DataTable)
        assert str(table.get_row_at(0)[0]).startswith("void flash_fwd_kernel")
        await pilot.press("escape")
        kern = app.query_one("#pane-kernels", LayerPane)
        await wait_until(pilot, lambda: "bundled example, not from this machine"
                       in str(kern.last_renderable or ""))
