"""The demo for workshops (issue 35, item 6): `demo --gpus N` shows N GPUs without a fake
driver; the narration reads at 80x24; a looping scenario starts each loop clean."""

from __future__ import annotations

import pytest

from helpers.panes import frames_of
from helpers.snapkit import must
from infertop.cli.main import build_parser, make_pipeline
from infertop.demo.scenario import ScenarioError, load_scenario, with_gpus
from infertop.probes.sources.demo import DemoSource


def test_demo_gpus_shows_n_gpus_and_stays_healthy():
    frame = frames_of(DemoSource("healthy", gpus=8), 30,
                      make_pipeline(build_parser().parse_args([])))
    gpus = {r.label("gpu") for r in frame.by_key("gpu.util_ratio")}
    assert gpus == {str(i) for i in range(8)}
    assert not frame.findings, [f.code for f in frame.findings]


def test_demo_gpus_refuses_what_the_scenario_cannot_play():
    with pytest.raises(ScenarioError, match="plays on GPU 2: --gpus 3 or more"):
        with_gpus(load_scenario("par-tp-straggler"), 2)
    eight = with_gpus(load_scenario("healthy"), 8)
    assert eight.setup["gpus"] == 8 and eight.setup["tp"] == 8
    from helpers.inproc import run_main
    r = run_main("demo", "par-tp-straggler", "--gpus", "2")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--gpus 3" in r.stderr, r


@pytest.mark.slow   # the demo app driven
async def test_the_narration_reads_at_80x24():
    # the banner's 2 rows held the title, the phase and the keys: the narration that
    # tells the audience what to look at was never on an 80x24 screen.  Now it shows a
    # line at a time (the panes keep their rows: eight GPUs still have theirs)
    from helpers.tui_demo import demo_app, screen_lines
    app = demo_app("hw-busy-not-working")
    shown: list[str] = []
    async with app.run_test(size=(80, 24)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        narration = " ".join(app.source.phase.narration.split())
        for _ in range(2):
            await app._poll()
        await pilot.pause()
        while app.source.phase.index == 0:     # the whole of phase 1 ("light load")
            lines = screen_lines(app)
            assert "phase 1/3: light load" in lines[1], lines[1]
            assert lines[3].startswith("─1 hardware"), lines[:4]   # still 2 rows
            shown.append(lines[2].strip().rstrip("›").strip())
            await app._poll()
            await pilot.pause()
    assert narration.startswith("Light load")
    assert " ".join(dict.fromkeys(shown)) == narration, shown


def test_a_looping_scenario_starts_each_loop_without_the_last_loops_findings():
    # mem-kv-pressure ends under KV pressure; when it loops to its light-load start the
    # findings of the end (MEM-001, DEC-001) stayed on screen into the healthy phase
    import asyncio

    from infertop.pipeline import Pipeline
    source = DemoSource("mem-kv-pressure")     # loops, as the screen plays it
    pipeline = make_pipeline(build_parser().parse_args([]))
    assert isinstance(pipeline, Pipeline)
    duration = int(source.scenario.duration)

    async def run() -> tuple[list[str], list[str]]:
        await source.start()
        before = after = []
        for _ in range(duration + 3):
            snap = must(await source.next(), "a demo tick (the demo loops)")
            frame = pipeline.feed(snap, source.epoch)
            if source.run.loop == 0:
                before = [f.code for f in frame.findings]
            else:
                after = [f.code for f in frame.findings]
        return before, after

    before, after = asyncio.run(run())
    assert "MEM-001" in before, before        # the end of the first loop
    assert after == [], after                 # the start of the second: clean
