#!/usr/bin/env python3
"""Regenerate the README's screenshots: one demo scenario per layer, as SVG (Textual's own
export), into docs/screenshots/.  Deterministic: fixed demo clock and seed, frames driven
by hand.  Usage: .venv/bin/python scripts/screenshots.py"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from infertop.cli.main import build_parser, make_pipeline
from infertop.probes.sources.demo import DemoSource
from infertop.tui.modes import DemoApp
from infertop.tui.options import AppOptions

OUT = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
# (scenario, ticks, zoom key or None): a moment where the scenario's signature is on screen
SHOTS = [
    ("mem-kv-pressure", 90, None),
    ("hw-busy-not-working", 60, "1"),
    ("krn-launch-bound", 60, "2"),
    ("mem-kv-leak", 105, "3"),
    ("sch-gil-contention", 60, "4"),
    ("par-tp-straggler", 70, "5"),
    ("dec-spec-collapse", 70, "6"),
]


async def shoot(name: str, ticks: int, zoom: str | None) -> Path:
    app = DemoApp(DemoSource(name), interval=1.0, options=AppOptions(manual_ticks=True),
                  pipeline=make_pipeline(build_parser().parse_args([])))
    async with app.run_test(size=(160, 48)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        for _ in range(ticks - app.ticks):
            await app._poll()
        if zoom:
            await pilot.press(zoom)
        await pilot.pause()
        OUT.mkdir(parents=True, exist_ok=True)
        return Path(app.save_screenshot(f"{name}.svg", str(OUT)))


def main() -> None:
    socket.gethostname = lambda: "gpu-box"  # no real host name in published pictures
    for name, ticks, zoom in SHOTS:
        print(asyncio.run(shoot(name, ticks, zoom)))


if __name__ == "__main__":
    main()
