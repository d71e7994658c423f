"""The GIL sampler in the scheduling pane (issue 11, item 2): the share of dumps with the
GIL held, the thread that held it, and the sampler's own cost (py-spy CPU per wall
second, wall time per dump); off, the pane says which key turns it on."""

from __future__ import annotations

from helpers.panes import painted_text, pane_text
from helpers.snapkit import reading, sample, snap, value_of
from helpers.synthetic_source import SyntheticSource
from infertop.keys import SPECS
from infertop.pipeline import Pipeline
from infertop.probes.capture.gil_sampler import GilSample, GilSampler
from infertop.probes.sources.demo import DemoSource
from infertop.tui.modes import DemoApp, LiveApp
from infertop.tui.options import AppOptions, CaptureSummaries


def test_sampler_cost_is_pyspy_cpu_per_wall_second():
    g = GilSampler()
    g.interval = 2.0
    for n, holder in enumerate(["MainThread", "MainThread", None]):   # one dump every 2 s
        g.history.setdefault(42, __import__("collections").deque(maxlen=60)).append(
            GilSample(1000.0 + 2 * n, 42, holder, {"MainThread": True}, cost_seconds=0.05,
                      cpu_seconds=0.03))
    agg = g.aggregate(42)
    assert agg.cpu_ratio is not None and agg.gil_held_share is not None
    # 0.09 CPU seconds over the 6 s the three dumps cover (their periods, not their gaps)
    assert abs(agg.cpu_ratio - 0.09 / 6) < 1e-9
    assert abs(agg.gil_held_share - 2 / 3) < 1e-9
    reads = {r.key: r for r in g.readings(42, "engine_core")}
    assert abs(value_of(reads["python.gil_sampler_cpu_ratio"]) - 0.015) < 1e-9
    assert reads["python.gil_sampler_cpu_ratio"].unit == SPECS["python.gil_sampler_cpu_ratio"].unit
    assert reads["python.gil_holder"].text == "MainThread"


def gil_frame(holder: str = "MainThread"):
    t = 1_700_000_000.0
    proc = [reading("process.info", 1, text="VLLM::EngineCore", pid=101, ppid=1,
                    name="VLLM::EngineCore", role="engine_core"),
            reading("process.cpu_ratio", 0.95, pid=101)]
    gil = [reading("python.gil_held_ratio", 0.62, pid=101, role="engine_core"),
           reading("python.gil_holder", 1.0, text=holder, pid=101, role="engine_core"),
           reading("python.gil_sampler_cost_seconds", 0.048, pid=101, role="engine_core"),
           reading("python.gil_sampler_cpu_ratio", 0.012, pid=101, role="engine_core")]
    return Pipeline().feed(snap(t, sample("process", t, proc), sample("gil", t, gil)))


def test_scheduling_pane_shows_gil_share_holder_and_the_samplers_cost():
    text = pane_text("scheduling", gil_frame(), width=120, height=20)
    line = next(ln for ln in text.splitlines() if ln.startswith("GIL held"))
    assert "62 %" in line and "by MainThread" in line and "pid 101 engine_core" in line
    assert "sampler cost 1.2 % of a core, 48 ms/dump" in line
    # at 80x24 (a 36x4 pane) the line asked for with G is still there
    small = pane_text("scheduling", gil_frame(), width=36, height=4, wide=False)
    assert "GIL held" in small


def test_holder_name_from_a_hostile_process_is_cleaned():
    text = pane_text("scheduling", gil_frame("evil\x1b[2Jthread"), width=120, height=20)
    assert "\x1b" not in text and "evil" in text


def test_sampler_off_says_press_G_only_where_G_exists():
    frame = Pipeline().feed(snap(1.0, sample("process", 1.0, [
        reading("process.info", 1, text="vllm", pid=7, ppid=1, name="vllm", role="server")])))
    live = pane_text("scheduling", frame, width=120, height=20,
                     summaries=CaptureSummaries(gil_hint="G"))
    assert "GIL sampler off (press G)" in live
    other = pane_text("scheduling", frame, width=120, height=20)   # demo, replay: no key
    assert "GIL sampler" not in other


async def test_live_screen_says_how_to_turn_the_sampler_on():
    app = LiveApp(SyntheticSource(), pipeline=Pipeline(), options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(160, 48)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.05)
        await app._poll()
        await pilot.pause()
        assert "GIL sampler off (press G)" in painted_text(app, "scheduling")
    demo = DemoApp(DemoSource("healthy"), pipeline=Pipeline(),
                   options=AppOptions(manual_ticks=True))
    async with demo.run_test(size=(160, 48)) as pilot:
        while demo.ticks < 1:
            await pilot.pause(0.05)
        await pilot.pause()
        assert "GIL sampler" not in painted_text(demo, "scheduling")
