"""Captures from the live screen against a real Python tree: p dumps, P records while the
screen keeps ticking, Esc cancels and still saves, G toggles the GIL sampler probe."""

from pathlib import Path

import pytest
from conftest import python_workload_tree

from helpers.snapkit import reading
from helpers.tui_demo import wait_until
from infertop.meta import ProcessMeta, ServerInfo
from infertop.model import Sample
from infertop.pipeline import Pipeline
from infertop.probes.base import Probe
from infertop.probes.sources.hub import Hub
from infertop.tui.modes import LiveApp
from infertop.tui.options import AppOptions
from infertop.tui.panes.widget import LayerPane

pytestmark = pytest.mark.slow   # captures driven through the whole app

WORKLOAD = Path(__file__).parent / "helpers" / "py_workload.py"


@pytest.fixture(scope="module")
def tree():
    with python_workload_tree() as pids:
        yield pids


class TreeProbe(Probe):
    """Stands in for the process probe: reports the workload as the server's tree."""

    name = "process"

    def __init__(self, parent: int, child: int):
        self.parent, self.child = parent, child

    async def collect(self):
        rs = (reading("process.info", 1, text=f"python {WORKLOAD}", pid=self.parent, ppid=1,
                      name="python", role="api_server"),
              reading("process.info", 1, text="python child", pid=self.child, ppid=self.parent,
                      name="python", role="engine_core"))
        return Sample("process", 0.0, rs,
                      meta=ProcessMeta(server=ServerInfo(pid=self.parent, kind="vllm")))



async def test_dump_and_cancelled_record_keep_the_screen_live(tree, tmp_path):
    parent, child = tree
    app = LiveApp(Hub([TreeProbe(parent, child)], deadline=1.0), pipeline=Pipeline(),
                  interval=0.1, options=AppOptions(capture_dir=str(tmp_path / "caps")))
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_until(pilot, lambda: app.ticks >= 2)
        await pilot.press("p")
        dump = app.captures.screen
        assert dump is not None
        await wait_until(pilot, lambda: not dump.capture_running)
        result = dump.result
        assert not isinstance(result, Exception), result
        assert {p.pid for p in result.processes} == {parent, child}
        hot = next(t for t in result.threads if t.name == "hot_spin")
        assert hot.frames[0].name == "hot_spin_loop"     # the stacks are there (GIL owner varies)
        assert result.txt_path.exists() and oct(result.txt_path.stat().st_mode & 0o777) == "0o600"
        await pilot.press("escape")                       # close the dump screen

        # a long default, so that the cancel below always lands before the end however
        # slowly this busy machine ticks (10 s was not always enough under load)
        app.options.record_seconds = 300
        await pilot.press("P")
        await pilot.press("enter")                        # the default offered: 300 s
        record = app.captures.screen
        assert record is not None
        await wait_until(pilot, lambda: app.captures.running == "py-spy record")
        ticks = app.ticks
        await wait_until(pilot, lambda: app.ticks >= ticks + 5)   # still ticking while recording
        assert app.captures.running == "py-spy record"          # ...and the record still runs
        await pilot.press("escape")                       # cancel: SIGINT, keep samples
        await wait_until(pilot, lambda: not record.capture_running, n=600)
        rec = record.result
        assert not isinstance(rec, Exception), rec
        assert rec.cancelled and rec.sampled_seconds < 300
        assert rec.speedscope_path.exists() and rec.svg_path.exists()
        assert "hot_spin_loop" in str(app.summaries.pyspy)


async def test_gil_sampler_toggles_a_probe(tree):
    parent, child = tree
    hub = Hub([TreeProbe(parent, child)], deadline=1.0)
    app = LiveApp(hub, pipeline=Pipeline(), interval=0.1)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.ticks >= 2)
        await pilot.press("G")
        await wait_until(pilot, lambda: any(p.name == "gil" for p in hub.probes))
        sched = app.query_one("#pane-scheduling", LayerPane)
        shown = lambda: str(sched.last_renderable or "")   # noqa: E731
        assert "GIL sampler off (press G)" in shown() or "GIL held" in shown()
        await wait_until(pilot, lambda: app.frame is not None and any(
            r.ok for r in app.frame.by_key("python.gil_held_ratio")))
        # the scheduling pane shows the share, the holder's pid and the sampler's own cost
        await wait_until(pilot, lambda: "GIL held" in shown() and "% of a core" in shown())
        lines = shown().splitlines()    # a narrow pane puts the cost on the next line
        at = next(i for i, ln in enumerate(lines) if ln.startswith("GIL held"))
        line = " ".join(lines[at:at + 2])
        assert f"pid {child}" in line and "ms/dump" in line, line
        await pilot.press("G")
        await wait_until(pilot, lambda: not any(p.name == "gil" for p in hub.probes))
        await wait_until(pilot, lambda: "GIL sampler off (press G)" in shown())
