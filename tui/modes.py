"""The three ways to run the same panes: live (with captures), demo (banner, scenario keys)
and replay (position bar, stepping and seeking).  Each adds only its keys and banner."""

from __future__ import annotations

import asyncio
from typing import Any

from rich.text import Text
from textual.binding import Binding

from .app import InfertopApp


class LiveApp(InfertopApp):
    BINDINGS = InfertopApp.BINDINGS + [
        Binding("p", "pyspy_dump", "py-spy dump"),
        Binding("P", "pyspy_record", "py-spy record"),
        Binding("n", "nsys", "nsys"),
        Binding("G", "gil_sampler", "GIL sampler"),
    ]

    async def on_mount(self) -> None:
        await super().on_mount()
        from .captures import CaptureController
        self.captures = CaptureController(self)
        if self.options.record_now:
            await self.action_record()
        if self.options.gil_sampler:
            self.set_timer(1.5, self.captures.toggle_gil_sampler)  # after the tree is known

    def action_pyspy_dump(self) -> None:
        self.captures.start_dump()

    def action_pyspy_record(self) -> None:
        self.captures.ask_record()

    def action_nsys(self) -> None:
        self.captures.start_nsys()

    def action_gil_sampler(self) -> None:
        self.captures.toggle_gil_sampler()


class DemoApp(InfertopApp):
    BINDINGS = InfertopApp.BINDINGS + [
        Binding("n", "next_scenario", "next scenario"),
        Binding("p", "prev_scenario", "prev scenario"),
        Binding("r", "restart", "restart"),
    ]

    async def on_mount(self) -> None:
        await super().on_mount()
        if self.options.record_now:
            await self.action_record()

    def _switched(self, what: str) -> None:
        self.notify(what, timeout=3)   # the epoch change resets the pipeline on the next tick

    def action_next_scenario(self) -> None:
        self.source.next_scenario()
        self._switched(f"scenario: {self.source.scenario.name}")

    def action_prev_scenario(self) -> None:
        self.source.prev_scenario()
        self._switched(f"scenario: {self.source.scenario.name}")

    def action_restart(self) -> None:
        self.source.restart()
        self._switched(f"restarted {self.source.scenario.name}")

    def banner_text(self) -> Text | None:
        sc = self.source.scenario
        ph = self.source.phase
        t = Text()
        t.append(" DEMO ", style="bold reverse")
        t.append(f" {sc.title}", style="bold")
        t.append(f"  [{ph.layer}]  phase {ph.index + 1}/{ph.count}: {ph.name}")
        t.append(f"  speed {self.options.speed:g}x   n/p scenario · r restart\n")
        t.append(" ".join(ph.narration.split()))
        if ph.remedy and ph.index == ph.count - 1:
            t.append("\nremedy: " + " ".join(ph.remedy.split()),
                     style=self.role_styles.get("accent", "bold"))
        return t


REBUILD_TICKS = 600


class ReplayApp(InfertopApp):
    BINDINGS = InfertopApp.BINDINGS + [
        Binding("right_square_bracket", "step(1)", "step", key_display="]"),
        Binding("left_square_bracket", "step(-1)", "back", key_display="["),
        Binding("right_curly_bracket", "jump(0.1)", "+10%", key_display="}"),
        Binding("left_curly_bracket", "jump(-0.1)", "-10%", key_display="{"),
        Binding("g", "goto", "go to time"),
    ]

    def banner_text(self) -> Text | None:
        src = self.source
        t = Text()
        t.append(" REPLAY ", style="bold reverse")
        pos = src.elapsed
        frac = (src.position / max(1, src.length)) if src.length else 0.0
        width = 30
        filled = int(frac * width)
        t.append(f" {src.label}  ")
        t.append("━" * filled + "╸" + "─" * (width - filled))
        t.append(f"  {_hms(pos)} / {_hms(src.duration)}  tick {src.position}/{src.length}")
        if src.header.get("host"):
            t.append(f"  recorded on {src.header['host']}")
        t.append("   [ ] step · { } ±10% · g go to")
        return t

    def _rebuild(self) -> None:
        """After a seek, recompute History, derived values and findings from raw data, in a
        thread: decoding and re-diagnosing hundreds of ticks takes seconds, and the screen
        must stay live meanwhile."""
        self.run_worker(self._rebuild_async(), exclusive=True, group="rebuild")

    async def _rebuild_async(self) -> None:
        self.polling = True   # no tick may feed the pipeline while it is rebuilt
        try:
            frame = await asyncio.to_thread(self._replay_until, self.source.position)
        finally:
            self.polling = False
        if frame is not None:
            self._apply(frame)
        else:
            self.update_banner()

    def _replay_until(self, position: int):
        # the longest rule window is 300 s: twice that also covers raise/clear hysteresis
        snaps = self.source.snapshots_until(position, limit=REBUILD_TICKS)
        self.pipeline.reset()
        frame = None
        for s in snaps:
            frame = self.pipeline.feed(s)
        return frame

    def action_step(self, n: int) -> None:
        self.paused = True
        if n == 1:   # forward by one: just the next tick, nothing to recompute
            self.run_worker(self._poll(), group="poll")
        else:
            self.source.step(n)
            self._rebuild()
        self._update_status()

    def action_jump(self, fraction: float) -> None:
        src = self.source
        target = (src.position / max(1, src.length)) + fraction
        src.seek_fraction(min(1.0, max(0.0, target)))
        self._rebuild()

    def action_goto(self) -> None:
        from .screens.goto import GotoScreen

        def done(seconds: float | None) -> None:
            if seconds is not None:
                self.source.goto(seconds)
                self._rebuild()
        self.push_screen(GotoScreen(self.source.duration), done)


def _hms(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def app_for_source(source: Any, **kwargs: Any) -> InfertopApp:
    kind = getattr(source, "kind", "live")
    cls = {"live": LiveApp, "demo": DemoApp, "replay": ReplayApp}.get(kind, InfertopApp)
    return cls(source, **kwargs)
