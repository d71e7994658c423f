"""The screen at scale (issue 9 and 11): 20,000 engine series, 64 GPUs, 200 processes.

No timing is asserted here (the box may be busy); benchmarks/bench_panes.py prints the
times.  What is asserted: the frame is drawn, every pane caps what it shows and says how
much it left out, rows only for what fits."""

from __future__ import annotations

import pytest
from rich.text import Text

from helpers.big_source import BigSource
from infertop.pipeline import Pipeline
from infertop.tui.app import InfertopApp
from infertop.tui.options import AppOptions

pytestmark = pytest.mark.slow   # 20,000 engine series and 64 GPUs through the whole app


def shown(app, layer: str) -> str:
    return app.query_one(f"#pane-{layer}").last_renderable.plain


async def drive(app, pilot, ticks: int) -> None:
    while app.ticks < 1:
        await pilot.pause(0.05)
    for _ in range(ticks - app.ticks):
        await app._poll()
    await pilot.pause()


async def test_twenty_thousand_engine_series_draw_a_capped_frame():
    app = InfertopApp(BigSource(gpus=8, engines=20_000, procs=4), pipeline=Pipeline(),
                      options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(160, 48)) as pilot:
        await drive(app, pilot, 2)
        assert app.frame is not None and len(app.frame.by_key("kv.usage_ratio")) == 20_000
        for layer in ("parallelism", "memory", "decoding"):
            text = shown(app, layer)
            assert "more (press" in text, (layer, text)
            assert len(text.splitlines()) <= app.query_one(f"#pane-{layer}").size.height
        par = shown(app, "parallelism")
        # the rows shown are the busiest engines: engine 7 (40 running) is among them
        assert ":8000 e7 " in par


async def test_64_gpus_200_processes_at_80x24_keep_a_count_of_what_is_hidden():
    app = InfertopApp(BigSource(gpus=64, engines=16, procs=200), pipeline=Pipeline(),
                      options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(80, 24)) as pilot:
        await drive(app, pilot, 3)
        for layer, key in (("hardware", 1), ("scheduling", 4), ("parallelism", 5)):
            assert f"more (press {key} to zoom)" in shown(app, layer), layer
        await pilot.press("4")      # zoomed: more rows, and the count shrinks accordingly
        await app._poll()
        await pilot.pause()
        zoomed = shown(app, "scheduling")
        assert len([ln for ln in zoomed.splitlines() if ln[:1].isdigit()]) > 10


async def test_64_gpus_16_engines_200_processes_every_pane_cut_and_q_ends_it_mid_tick():
    """Issue 11 item 4 at 160x48 with all the rules: each of the six panes shows what fits
    and counts the rest ("+N more (press K to zoom)"), and `q` pressed while a tick is in
    the pipeline's thread ends the app (no time is asserted: bench_scale.py prints it)."""
    import asyncio
    import re

    from textual import events

    from infertop.cli.main import build_parser, make_pipeline

    app = InfertopApp(BigSource(gpus=64, engines=16, procs=200),
                      pipeline=make_pipeline(build_parser().parse_args([])),
                      options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(160, 48)) as pilot:
        await drive(app, pilot, 3)
        for pane in app.panes:
            assert isinstance(pane.last_renderable, Text)
            text = pane.last_renderable.plain
            key = pane.pane_layer.position + 1
            assert re.search(rf"\+\d+ more \(press {key} to zoom\)", text), (pane.id, text)
            assert len(text.splitlines()) <= pane.size.height
        poll = asyncio.ensure_future(app._poll())      # a tick in flight ...
        while not app.polling:
            await asyncio.sleep(0)
        app.post_message(events.Key("q", "q"))         # ... as the terminal sends `q`
        for _ in range(2000):                          # a bound on waits, not on time
            if app.return_code is not None:
                break
            await asyncio.sleep(0.01)
        assert app.return_code == 0
        poll.cancel()
