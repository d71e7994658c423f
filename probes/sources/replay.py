"""Replaying a recording: the same Snapshots again, with a position you can move.

The file is streamed once to index its lines (gzip or plain; a cut-short last line is
dropped; recording_file.py), never held whole: lines are indexed by their time without
parsing, read back from the file and decoded when asked for.
Nothing derived was recorded: the app feeds the raw Snapshots to a fresh History, so rates,
quantiles and findings come from today's code.  After a seek, ``snapshots_until`` gives the
Snapshots the app needs to rebuild its History up to the new position.
"""

from __future__ import annotations

import bisect
import os
import statistics
from pathlib import Path
from typing import Any

from infertop.model import Capability, Snapshot
from infertop.probes.sources.recording_file import RecordingFile
from infertop.recording import RecordingError, decode_snapshot
from infertop.source import SnapshotSource, pace


class ReplaySource(SnapshotSource):
    """A finite source over a recording.  ``position`` is the index of the Snapshot last
    handed out (-1 before the first); ``next`` moves one forward, None at the end.
    ``start_time``/``current_time`` are recorded unix times, ``elapsed``/``duration`` seconds
    from the first snapshot; ``goto`` takes seconds from the first snapshot."""

    kind = "replay"

    def __init__(self, path: str | os.PathLike, *, speed: float = 1.0) -> None:
        if speed <= 0:
            raise ValueError("speed must be > 0")
        self.speed = float(speed)
        self.path = Path(path)
        # streamed and indexed, never held whole (recording_file.py): days-long files and
        # gzip bombs cost the index, not the file
        self._dec = RecordingFile(self.path)
        if not len(self._dec):
            self._dec.close()
            if self._dec.skipped:
                raise RecordingError(unreadable_message(self.path.name, self._dec.skipped,
                                                        self._dec.skipped))
            raise RecordingError(f"{self.path.name}: the recording holds no snapshot")
        self.header: dict = self._dec.header
        self.truncated = self._dec.truncated
        # unreadable lines: those the index could not place, then those that fail to
        # decode; counted, with the first one's reason (50,000 bad lines are one note)
        self.skipped = self._dec.skipped
        self.first_bad = ""
        self._notes = list(self._dec.notes)
        self.label = self.path.name
        self.tick_seconds: float = float(self.header.get("interval") or self._median_step())
        self._pos = -1
        self._cache: dict[int, Snapshot] = {}

    @property
    def lines_total(self) -> int:
        """Snapshot lines in the file, readable or not."""
        return len(self._dec) + self._dec.skipped

    @property
    def notes(self) -> list[str]:
        out = list(self._notes)
        if self.skipped:
            first = f" (first: {self.first_bad})" if self.first_bad else ""
            out.append(f"{self.skipped} of {self.lines_total} snapshot lines unreadable, "
                       f"left out{first}")
        return out

    def _bad_line(self, e: RecordingError) -> None:
        self.skipped += 1
        if not self.first_bad:
            self.first_bad = str(e)

    def _median_step(self) -> float:
        t = self._dec.times
        steps = [b - a for a, b in zip(t, t[1:]) if b > a]
        return statistics.median(steps) if steps else 1.0

    # ---- where we are --------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._dec)

    @property
    def length(self) -> int:
        """Snapshots in the recording."""
        return len(self._dec)

    @property
    def wall_interval(self) -> float:
        """Real seconds between ticks when played at ``speed``."""
        return pace(False, self.tick_seconds, self.speed)

    @property
    def position(self) -> int:
        return self._pos

    @property
    def start_time(self) -> float:
        return self._dec.times[0]

    @property
    def duration(self) -> float:
        """Seconds from the first to the last snapshot."""
        return self._dec.times[-1] - self._dec.times[0]

    @property
    def recorded_length(self) -> float:
        return self.duration

    @property
    def current_time(self) -> float | None:
        """The recorded (unix) time of the snapshot at ``position``; None before the first."""
        return self._dec.times[self._pos] if self._pos >= 0 else None

    @property
    def elapsed(self) -> float:
        """Seconds from the first snapshot to the one at ``position`` (0 before the first)."""
        return self._dec.times[max(0, self._pos)] - self._dec.times[0]

    def index_at(self, t: float) -> int:
        """The index of the snapshot recorded at unix time ``t`` (the last one at or before
        it): where the frame on screen is, whatever the position moved to since."""
        i = bisect.bisect_right(self._dec.times, t + 1e-9) - 1
        return max(0, min(len(self) - 1, i))

    @property
    def fraction(self) -> float:
        return max(0, self._pos) / max(1, len(self) - 1)

    @property
    def at_end(self) -> bool:
        return self._pos >= len(self) - 1

    @property
    def realtime(self) -> bool:
        return False

    # ---- reading -------------------------------------------------------------------------
    def snapshot_at(self, index: int) -> Snapshot:
        snap = self._cache.get(index)
        if snap is None:
            snap = self._decode(index)
            if len(self._cache) > 64:
                self._cache.clear()
            self._cache[index] = snap
        return snap

    def _decode(self, index: int) -> Snapshot:
        try:
            return decode_snapshot(self._dec.line(index))
        except RecordingError as e:
            raise RecordingError(f"{self.path.name}: line {self._dec.line_number(index)}: "
                                 f"{e}") from None

    async def start(self) -> dict[str, Capability]:
        caps = self.header.get("source", {}).get("capabilities")
        if isinstance(caps, dict):
            try:
                return {n: Capability.from_dict(c) for n, c in caps.items()}
            except (KeyError, TypeError, ValueError):
                pass
        return dict(self.snapshot_at(0).capabilities)

    async def next(self) -> Snapshot | None:
        while self._pos < len(self) - 1:
            self._pos += 1
            try:
                return self.snapshot_at(self._pos)
            except RecordingError as e:
                self._bad_line(e)   # a corrupt line in the middle: go on with the next
        return None

    def iter_snapshots(self):
        """Every snapshot from the first, streamed (compare and report read a recording
        once); corrupt lines are skipped and counted, as ``next`` does."""
        for i in range(len(self)):
            try:
                yield self._decode(i)   # one pass: no use for the seek cache
            except RecordingError as e:
                self._bad_line(e)

    # ---- moving --------------------------------------------------------------------------
    def _move(self, index: int) -> Snapshot:
        self._pos = max(0, min(len(self) - 1, index))
        return self.snapshot_at(self._pos)

    def step(self, n: int = 1) -> Snapshot:
        """Move ``n`` snapshots (negative: back) and return the one there."""
        return self._move(max(0, self._pos) + n if self._pos >= 0 or n <= 0 else n - 1)

    def seek_fraction(self, f: float) -> Snapshot:
        """Go to a share of the recording (0: first snapshot, 1: last)."""
        f = max(0.0, min(1.0, f))
        return self._move(round(f * (len(self) - 1)))

    def jump(self, delta_fraction: float) -> Snapshot:
        """Jump by a share of the recording (``+0.1``: 10 % forward)."""
        return self.seek_fraction(self.fraction + delta_fraction)

    def goto(self, seconds_from_start: float) -> Snapshot:
        """The first snapshot at or after ``seconds_from_start`` (clamped to the ends)."""
        t = self._dec.times[0] + seconds_from_start
        return self._move(bisect.bisect_left(self._dec.times, t - 1e-9))

    def snapshots_until(self, index: int | None = None, limit: int | None = None
                        ) -> list[Snapshot]:
        """Snapshots from the start (or the last ``limit``) up to ``index`` inclusive
        (default: the current position): what rebuilds History after a seek."""
        end = self._pos if index is None else index
        end = min(end, len(self) - 1)
        start = 0 if limit is None else max(0, end - limit + 1)
        out = []
        for i in range(start, end + 1):
            try:
                out.append(self.snapshot_at(i))
            except RecordingError:
                continue
        return out

    @property
    def fleet(self) -> bool:
        """A recording of a fleet (--prometheus, several nodes): replayed per node."""
        src = self.header.get("source")
        return bool(src.get("fleet")) if isinstance(src, dict) else False

    def describe(self) -> dict[str, Any]:
        h = self.header
        return {"source": "replay", "label": self.label, "file": str(self.path),
                "recorded_by": h.get("infertop"), "schema": h.get("schema"),
                "host": h.get("host"), "started": h.get("started"), "gpus": h.get("gpus"),
                "server": h.get("server"), "recorded_source": h.get("source"),
                "snapshots": len(self), "duration": self.duration,
                "truncated": self.truncated, "skipped": self.skipped}


def unreadable_message(name: str, bad: int, total: int) -> str:
    """The one line for a recording none of whose snapshot lines could be read."""
    return (f"{name}: no snapshot could be read: {bad} of {total} snapshot lines "
            "unreadable (corrupt, or not an infertop recording)")


def open_replay(path: str | os.PathLike) -> ReplaySource:
    """For the CLI: a ReplaySource, or RecordingError with one line (exit code 2)."""
    return ReplaySource(path)
