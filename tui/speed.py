"""How fast a demo or a replay really plays: the requested factor is a wish (`--speed`,
then `+`/`-` change the tick interval); a busy machine skips late ticks.  The banner shows
what was achieved, measured from the source's own clock against the wall clock."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable


class SpeedMeter:
    """The last ``window`` ticks as (wall time, source time) pairs."""

    def __init__(self, window: int = 10, clock: Callable[[], float] = time.monotonic,
                 enabled: bool = True) -> None:
        self.clock = clock
        self.enabled = enabled   # off when no timer paces the ticks (tests, screenshots)
        self.marks: collections.deque[tuple[float, float]] = collections.deque(maxlen=window)

    def tick(self, source_time: float) -> None:
        if self.enabled:
            self.marks.append((self.clock(), source_time))

    def reset(self) -> None:
        """After a pause, a seek, a new interval: the old ticks say nothing of the new pace."""
        self.marks.clear()

    def achieved(self) -> tuple[float, float] | None:
        """(source seconds per wall second, ticks per wall second) over the window; None
        until three ticks were seen (two intervals) or when no wall time passed."""
        if len(self.marks) < 3:
            return None
        (w0, s0), (w1, s1) = self.marks[0], self.marks[-1]
        wall = w1 - w0
        if wall <= 0 or s1 < s0:
            return None
        return (s1 - s0) / wall, (len(self.marks) - 1) / wall


def speed_text(requested: float, meter: SpeedMeter | None, tolerance: float = 0.1) -> str:
    """'speed 2x' while it keeps up; 'speed 2x asked, 1.3x achieved (1.3 ticks/s)' when
    it does not (or plays faster than asked).  No meter (paused): the speed asked."""
    got = meter.achieved() if meter is not None else None
    if got is None or abs(got[0] - requested) <= tolerance * requested:
        return f"speed {requested:g}x"
    return f"speed {requested:g}x asked, {_num(got[0])}x achieved ({_num(got[1])} ticks/s)"


def _num(x: float) -> str:
    return f"{x:.2f}" if x < 1 else f"{x:.1f}" if x < 10 else f"{x:.0f}"
