"""SVG snapshots at 80x24 of what a capture shows (issue 23: every fact readable over a
default SSH terminal): `p` the py-spy dump screen, `P` the py-spy record summary, `n` the
nsys result screen, and `G`'s GIL line in the scheduling pane; the demo's bundled captures
(tui/demo_captures.py) make them the same every run.  Each screen is also checked for a
value cut in two: no digit right before a cut mark ("58.5…")."""

from __future__ import annotations

import re
import socket

import pytest

from helpers.tui_demo import demo_app, screen_lines, wait_until

pytestmark = pytest.mark.slow   # SVG snapshots of the whole app, each a Textual run

CUT_NUMBER = re.compile(r"\d…")


@pytest.fixture(autouse=True)
def fixed_host(monkeypatch):
    monkeypatch.setattr(socket, "gethostname", lambda: "gpu-box")




def no_value_cut(app) -> None:
    lines = screen_lines(app)
    cut = [ln for ln in lines if CUT_NUMBER.search(ln)]
    assert not cut, "\n".join(lines)



def capture(key: str, ticks: int, expect: str):
    """Play ``ticks`` ticks, press ``key``, wait for its bundled capture to be drawn."""
    async def run_before(pilot):
        app = pilot.app
        while app.ticks < 1:
            await pilot.pause(0.01)
        for _ in range(ticks - app.ticks):
            await app._poll()
        await pilot.pause()
        await pilot.press(key)
        screen = app.screen
        assert screen.__class__.__name__ == "CaptureScreen", screen
        await wait_until(pilot, lambda: not screen.capture_running)
        await pilot.pause()
        assert expect in " ".join(screen_lines(app)), "\n".join(screen_lines(app))
        no_value_cut(app)
    return run_before


def test_pyspy_dump_screen_80x24(snap_compare):
    assert snap_compare(demo_app("sch-gil-contention"), terminal_size=(80, 24),
                        run_before=capture("p", 20, "bundled"))


def test_pyspy_record_screen_80x24(snap_compare):
    assert snap_compare(demo_app("sch-gil-contention"), terminal_size=(80, 24),
                        run_before=capture("P", 20, "GIL"))


def test_nsys_screen_80x24(snap_compare):
    assert snap_compare(demo_app("krn-launch-bound"), terminal_size=(80, 24),
                        run_before=capture("n", 20, "flash_fwd"))


def test_gil_sampler_line_80x24(snap_compare):
    async def run_before(pilot):
        app = pilot.app
        while app.ticks < 1:
            await pilot.pause(0.01)
        for _ in range(20 - app.ticks):
            await app._poll()
        await pilot.press("G")
        sched = app.query_one("#pane-scheduling")
        await wait_until(pilot, lambda: "GIL held" in str(sched.last_renderable or ""))
        await pilot.pause()
        assert "GIL held" in " ".join(screen_lines(app)), "\n".join(screen_lines(app))
        no_value_cut(app)
    assert snap_compare(demo_app("sch-gil-contention"), terminal_size=(80, 24),
                        run_before=run_before)
