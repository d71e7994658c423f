"""The app's ticks (tui/app.py _serve_ticks): the timer wakes one long-lived worker that
polls, instead of a new Textual worker per tick; a poll that raises still ends the app
with an error, as a worker's crash did."""

from __future__ import annotations

import pytest
from textual.worker import WorkerFailed

from helpers.synthetic_source import SyntheticSource
from infertop.pipeline import Pipeline
from infertop.tui.app import InfertopApp


async def test_ticks_run_in_one_worker_that_lives_as_long_as_the_app():
    app = InfertopApp(SyntheticSource(gpus=1), pipeline=Pipeline(), interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        while app.ticks < 3:
            await pilot.pause(0.05)
        workers = {id(w) for w in app.workers}
        start = app.ticks
        while app.ticks < start + 5:
            await pilot.pause(0.05)
        assert {id(w) for w in app.workers} == workers, "a worker per tick again"
        assert len(workers) == 1
        assert app.frame is not None and app.frame.snapshot.time > 0


class Breaks(SyntheticSource):
    async def next(self):
        if self.n >= 3:
            raise RuntimeError("a source bug on tick 4")
        return await super().next()


async def test_a_poll_that_raises_ends_the_app_with_an_error():
    app = InfertopApp(Breaks(gpus=1), pipeline=Pipeline(), interval=0.05)
    with pytest.raises(WorkerFailed, match="a source bug on tick 4"):
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(200):
                if app.return_code is not None:
                    break
                await pilot.pause(0.05)
    assert app.return_code == 1 and app.ticks == 3
