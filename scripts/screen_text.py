"""Print the demo screen as plain text at a terminal size, after N ticks: a quick look at
what a pane shows at 80x24 without a terminal (``python scripts/screen_text.py NAME 80 24 60``).
A fifth argument is keys to press after the ticks, one character each: ``3h`` zooms the
memory pane and shows its history plot."""

from __future__ import annotations

import asyncio
import sys

from infertop.cli.main import build_parser, make_pipeline
from infertop.probes.sources.demo import DemoSource
from infertop.tui.modes import DemoApp
from infertop.tui.options import AppOptions


async def main(name: str, w: int, h: int, n: int, keys: str = "") -> None:
    app = DemoApp(DemoSource(name), interval=1.0, options=AppOptions(manual_ticks=True),
                  pipeline=make_pipeline(build_parser().parse_args([])))
    async with app.run_test(size=(w, h)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        for _ in range(n - app.ticks):
            await app._poll()
        await pilot.pause()
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        # the compositor's lines, as a terminal would show them
        for strip in app.screen._compositor.render_strips():
            print("".join(seg.text for seg in strip).rstrip())


if __name__ == "__main__":
    a = sys.argv[1:]
    asyncio.run(main(a[0], int(a[1]), int(a[2]), int(a[3]) if len(a) > 3 else 30,
                     a[4] if len(a) > 4 else ""))
