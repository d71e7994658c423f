"""What the app and the headless commands read from: live, demo or replay, all alike.

A SnapshotSource hands out one Snapshot per call of ``next``.  Live sources sample the
probes now; demo and replay produce the next tick of their own timeline.  ``tick_seconds``
is the source's clock step per tick (virtual for demo/replay), and ``wall_interval`` how
long the app waits between ticks in real time (interval / speed).
"""

from __future__ import annotations

from typing import Any

from infertop.model import Capability, Snapshot


class SnapshotSource:
    kind: str = "live"          # "live" | "demo" | "replay"
    label: str = ""             # shown in the header: URL, scenario name or file

    async def start(self) -> dict[str, Capability]:
        """Open every probe; returns what each one can do (never raises for a probe)."""
        return {}

    async def next(self) -> Snapshot | None:
        """The next tick; None when a finite source (a replay) has ended."""
        raise NotImplementedError

    async def stop(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        """Facts for a recording's header and the screen's header."""
        return {"source": self.kind, "label": self.label}

    @property
    def realtime(self) -> bool:
        """True when ticks must be paced by the wall clock (live); False when the next
        tick can be computed at once (demo, replay), so headless commands run fast."""
        return self.kind == "live"


def pace(realtime: bool, step: float, speed: float | None, *, floor: float = 0.0) -> float:
    """Real seconds between two ticks: the one pacing rule of the screen (``wall_interval``)
    and the headless commands (``pace_of``).

    Live: ``step``, the interval (the source's clock is the wall clock).  Demo and replay:
    ``step`` seconds of their own clock per tick over ``speed``, no shorter than ``floor``
    (the screen's timer: 20 ms); with no speed given, 0: computed as fast as they go.
    """
    if realtime:
        return step
    if not speed:
        return 0.0
    return max(floor, step / speed)
