"""The demo app as the screen tests drive it: manual ticks, the CLI's own pipeline."""

from __future__ import annotations

from infertop.cli.main import build_parser, make_pipeline
from infertop.probes.sources.demo import DemoSource
from infertop.tui.modes import DemoApp
from infertop.tui.options import AppOptions


def demo_app(name: str) -> DemoApp:
    return DemoApp(DemoSource(name), interval=1.0, options=AppOptions(manual_ticks=True),
                   pipeline=make_pipeline(build_parser().parse_args([])))
