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
    """One interface for every source.  Besides the methods, the optional facts a source
    may have are declared here with the value of a source that lacks them, so the app and
    the headless commands read them as attributes (never ``getattr`` with a default): a
    source that has one sets the attribute or overrides the property."""

    kind: str = "live"          # "live" | "demo" | "replay"
    label: str = ""             # shown in the header: URL, scenario name or file
    # -- clock --
    # the source's own clock step per tick (demo: 1 scenario second, replay: the recorded
    # interval); None: the wall clock (live), paced by the interval asked for
    tick_seconds: float | None = None
    # counts restarts of a timeline (a demo scenario switched or replayed from the start):
    # the pipeline starts a fresh history when it changes; None: one timeline only
    epoch: int | None = None
    # how long each probe may take a tick (a source that waits on probes: Hub, FleetHub);
    # the screen sets it when the interval changes.  None: the source waits on no probe
    deadline: float | None = None
    # -- fleet --
    # nodes to read whole on the next refresh (the fleet's open node); None: the source
    # reads every node whole anyway.  Replaced, never changed in place (a poll reads it).
    pinned: set[str] | None = None
    refresh_interval: float = 0.0   # seconds between the source's own reads; 0: every tick
    # -- errors --
    last_error: str = ""        # why the last read failed ("": it did not)
    skipped: int = 0            # recorded lines passed over as unreadable (replay)

    @property
    def fleet(self) -> bool:
        """The source is a fleet: the screen shows the fleet view (a fleet source sets
        ``fleet = True``; a replay answers from its recording)."""
        return False

    # -- position on a recorded timeline (a replay); None for live and demo sources --
    @property
    def current_time(self) -> float | None:
        """The recorded unix time of the tick last read."""
        return None

    @property
    def elapsed(self) -> float | None:
        """Seconds from the first recorded tick to the one last read."""
        return None

    @property
    def recorded_length(self) -> float | None:
        """Seconds from a recording's first snapshot to its last (a replay); None for a
        source that is not a recording (live, demo): doctor judges a recording whole."""
        return None

    @property
    def lines_total(self) -> int:
        """Recorded lines read or passed over (a replay's file); else ``skipped``."""
        return self.skipped

    @property
    def notes(self) -> list[str]:
        """What the source left out, one line each (a replay: unreadable snapshot lines,
        counted); none for a live or demo source."""
        return []

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
