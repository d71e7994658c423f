"""SVG snapshots of demo frames (Textual is pinned in pyproject for these).

Frames are driven by hand (the app's own timer is set far out), so the same ticks land on
screen every run; the demo's clock and seed are fixed.  `make snapshots` re-records them
after an intended change of the screen.
"""

import socket
from pathlib import Path

import pytest

from helpers.tui_demo import demo_app
from infertop.tui.options import AppOptions

pytestmark = pytest.mark.slow   # SVG snapshots of the whole app, each a Textual run


@pytest.fixture(autouse=True)
def fixed_host(monkeypatch):
    monkeypatch.setattr(socket, "gethostname", lambda: "gpu-box")




def ticks(n: int):
    async def run_before(pilot):
        app = pilot.app
        while app.ticks < 1:
            await pilot.pause(0.01)
        for _ in range(n - app.ticks):
            await app._poll()
        await pilot.pause()
    return run_before


def test_healthy_wide(snap_compare):
    assert snap_compare(demo_app("healthy"), terminal_size=(160, 48), run_before=ticks(40))


def test_kv_pressure_small_terminal(snap_compare):
    assert snap_compare(demo_app("mem-kv-pressure"), terminal_size=(80, 24),
                        run_before=ticks(90))


def test_tp_straggler_zoomed_parallelism(snap_compare):
    async def run_before(pilot):
        await ticks(70)(pilot)
        await pilot.press("5")
        await pilot.pause()
    assert snap_compare(demo_app("par-tp-straggler"), terminal_size=(120, 36),
                        run_before=run_before)


def test_dp_unbalanced_two_engines_two_gpus_160x48(snap_compare):
    assert snap_compare(demo_app("par-dp-unbalanced"), terminal_size=(160, 48),
                        run_before=ticks(60))


def test_dp_unbalanced_two_engines_two_gpus_80x24(snap_compare):
    assert snap_compare(demo_app("par-dp-unbalanced"), terminal_size=(80, 24),
                        run_before=ticks(60))


def test_tp_straggler_four_gpus_80x24(snap_compare):
    assert snap_compare(demo_app("par-tp-straggler"), terminal_size=(80, 24),
                        run_before=ticks(70))


def test_terminal_too_small_notice(snap_compare):
    assert snap_compare(demo_app("healthy"), terminal_size=(70, 20), run_before=ticks(3))


def test_kv_pressure_zoomed_memory_with_history_plot_160x48(snap_compare):
    """`3` then `h`: the memory pane over its history plot (KV usage climbing to 100 %)."""
    async def run_before(pilot):
        await ticks(120)(pilot)
        await pilot.press("3")
        await pilot.press("h")
        await pilot.pause()
    assert snap_compare(demo_app("mem-kv-pressure"), terminal_size=(160, 48),
                        run_before=run_before)


EIGHT_GPUS = str(Path(__file__).parent / "fixtures" / "scenarios" / "eight-gpus-straggler.toml")


def test_eight_gpus_80x24(snap_compare):
    """issue 23: one compact line per GPU, all eight in view at 80x24 (nvitop's compact)."""
    assert snap_compare(demo_app(EIGHT_GPUS), terminal_size=(80, 24), run_before=ticks(60))


def test_fleet_80x24(snap_compare):
    """issue 23: the node, its worst finding and its TTFT p99 first at 80 columns."""
    from helpers.fleet_source import DemoFleetSource
    from infertop.fleet import FleetPipeline, diagnoser_factory
    from infertop.tui.modes import app_for_source
    app = app_for_source(DemoFleetSource(4, {2: ("dec-ttft-burst", 35)}),
                         pipeline=FleetPipeline(diagnoser_factory()), interval=1.0,
                         options=AppOptions(manual_ticks=True))

    async def run_before(pilot):
        while app.ticks < 1:
            await pilot.pause(0.01)
        for _ in range(12):
            await app._poll()
        await pilot.pause()
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
