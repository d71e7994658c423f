"""The demo app as the screen tests drive it: manual ticks, the CLI's own pipeline."""

from __future__ import annotations

from infertop.cli.main import build_parser, make_pipeline
from infertop.probes.sources.demo import DemoSource
from infertop.tui.modes import DemoApp
from infertop.tui.options import AppOptions


def demo_app(name: str) -> DemoApp:
    return DemoApp(DemoSource(name), interval=1.0, options=AppOptions(manual_ticks=True),
                   pipeline=make_pipeline(build_parser().parse_args([])))


def screen_lines(app, strip_right: bool = False) -> list[str]:
    """The app's screen as plain lines, as the terminal would show them."""
    lines = ["".join(seg.text for seg in strip)
             for strip in app.screen._compositor.render_strips()]
    return [ln.rstrip() for ln in lines] if strip_right else lines


async def open_first_node(app, pilot) -> None:
    """A fleet app polled three times, its first engine row opened with Enter (the node's
    own screen)."""
    from infertop.tui.screens.fleet import NodeScreen
    for _ in range(3):
        await app._poll()
    await pilot.pause()
    engines = app.query_one("#fleet-engines")
    engines.focus()
    engines.move_cursor(row=0)
    await pilot.press("enter")
    await pilot.pause()
    assert isinstance(app.screen, NodeScreen)


async def wait_until(pilot, cond, n: int = 400) -> None:
    """Let the app run (0.05 s steps, at most ``n``) until ``cond()`` holds; fail if never."""
    for _ in range(n):
        if cond():
            return
        await pilot.pause(0.05)
    raise AssertionError("condition not met in time")


async def open_capture(app, pilot, key: str):
    """Press ``key`` (p, P, n, G) and wait until its capture screen has its result (a
    bundled or real capture is read in a thread); returns that screen."""
    await pilot.press(key)
    screen = app.screen
    assert screen.__class__.__name__ == "CaptureScreen"
    await wait_until(pilot, lambda: not screen.capture_running)
    await pilot.pause()
    return screen
