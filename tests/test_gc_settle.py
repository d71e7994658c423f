"""tui/app.py settle_garbage_collector: the CLI's app freezes its startup objects out of
the cyclic GC after the first frame (a full collection walked them all, 41-56 ms on the
event loop twice a minute) and collects the youngest generation every 10,000 allocations,
not 700; tests' apps do neither (a test process holds every test's objects)."""

from __future__ import annotations

import argparse
import gc

import pytest

import infertop.tui.app as app_module
from helpers.synthetic_source import SyntheticSource
from infertop.pipeline import Pipeline
from infertop.tui.app import InfertopApp
from infertop.tui.options import AppOptions


@pytest.fixture
def unfrozen(monkeypatch):
    monkeypatch.setattr(app_module, "_gc_settled", False)
    thresholds = gc.get_threshold()
    gc.unfreeze()
    yield
    gc.unfreeze()     # the frozen objects go back to the oldest generation
    gc.set_threshold(*thresholds)


async def ticks_with(options: AppOptions, n: int = 3) -> list[int]:
    app = InfertopApp(SyntheticSource(gpus=1), pipeline=Pipeline(), interval=0.05,
                      options=options)
    frozen = []
    async with app.run_test(size=(100, 30)) as pilot:
        while app.ticks < n:
            await pilot.pause(0.05)
            frozen.append(gc.get_freeze_count())
    return frozen


async def test_the_cli_app_freezes_its_startup_objects_once(unfrozen, monkeypatch):
    calls = []
    real = gc.freeze

    def counted_freeze() -> None:
        calls.append(1)
        real()
    monkeypatch.setattr(gc, "freeze", counted_freeze)
    before = gc.get_threshold()
    frozen = await ticks_with(AppOptions(settle_gc=True))
    assert frozen[-1] > 10_000      # the imports and widget tree (~300k in a real run)
    # the youngest generation is collected less often; the older ones as before
    assert gc.get_threshold() == (app_module.GEN0_THRESHOLD, *before[1:])
    # once: a second app in the same process does not freeze again
    await ticks_with(AppOptions(settle_gc=True))
    assert len(calls) == 1


async def test_an_app_that_does_not_ask_freezes_nothing(unfrozen):
    before = gc.get_threshold()
    assert max(await ticks_with(AppOptions())) == 0
    assert gc.get_threshold() == before


def test_the_command_line_asks_for_it(monkeypatch):
    seen = {}

    class Stop(Exception):
        pass

    def capture(source, **kw):
        seen.update(kw)
        raise Stop

    import infertop.tui.modes as modes
    from infertop.cli import interactive
    monkeypatch.setattr(modes, "app_for_source", capture)
    # no terminal under pytest: the screen's own check (before Textual is imported) passes
    monkeypatch.setattr(interactive, "require_terminal", lambda: None)
    monkeypatch.setattr(interactive.splash, "show", lambda: None)
    args = argparse.Namespace(interval=1.0, theme=None, demo=None, replay=None)
    with pytest.raises(Stop):
        interactive.run_tui(SyntheticSource(gpus=1), args)
    assert seen["options"].settle_gc is True


async def test_the_collection_waits_for_the_first_paint(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Not in the first tick's poll (whose draw Textual paints only once the poll has
    returned): a full collection there held the first full frame up by 20-50 ms
    (issue 35); it runs once the screen has refreshed."""
    import inspect
    calls: list[bool] = []

    def record() -> None:
        calls.append(any(f.function == "_poll" for f in inspect.stack()))

    monkeypatch.setattr(app_module, "settle_garbage_collector", record)
    app = InfertopApp(SyntheticSource(gpus=1), pipeline=Pipeline(), interval=0.05,
                      options=AppOptions(settle_gc=True))
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(400):     # a generous deadline on a loaded box (20 s)
            if calls and app.ticks >= 3:
                break
            await pilot.pause(0.05)
    assert calls == [False]   # once, and not from inside the poll
