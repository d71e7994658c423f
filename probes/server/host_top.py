"""The host's top CPU consumers, for SCH-004 ("host CPU saturated": by whom?).

The process probe reads the server's own tree every tick; who else fills the host's CPUs
needs every process's ``/proc/PID/stat``: a few milliseconds on a busy box.  So it is
read only while the host is near saturation (``thresholds.host_top_scan_at``, default
``SCAN_AT``, below SCH-004's 0.9 so the readings are there when the rule raises) and at most every ``SCAN_EVERY`` seconds; the
readings are slow-cadence facts (rules.base.SLOW_KEYS) between scans.  CPU is a rate of
utime+stime between two scans (the first scan only takes the baseline).  It runs in the
process probe's thread, never on the event loop.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from infertop.probes.server.proctree import CLOCK_TICKS, read_proc_file

SCAN_AT = 0.8        # the default of thresholds.host_top_scan_at (SCH-004 raises at 0.9)
SCAN_EVERY = 5.0     # seconds between scans while it lasts
TOP_N = 5
NAME_MAX = 32


def parse_stat(text: str) -> tuple[str, int, float, int] | None:
    """(comm, ppid, utime+stime in clock ticks, starttime) from /proc/PID/stat; the comm
    sits in parentheses and may itself hold ')' and spaces: split at the last ')'."""
    lo, hi = text.find("("), text.rfind(")")
    if lo < 0 or hi < lo:
        return None
    rest = text[hi + 2:].split()
    try:
        return text[lo + 1:hi], int(rest[1]), float(rest[11]) + float(rest[12]), int(rest[19])
    except (IndexError, ValueError):
        return None


class HostTopCpu:
    """``scan(host_ratio, tree)`` -> [(pid, name, cores, in_tree)] of the top consumers,
    or None when it did not scan this tick (not near saturation, or too soon)."""

    def __init__(self, proc: str = "/proc", clock: Callable[[], float] = time.monotonic,
                 every: float = SCAN_EVERY, at: float = SCAN_AT) -> None:
        self.proc, self._clock, self.every, self.at = proc, clock, every, at
        self._prev: dict[tuple[int, int], float] = {}
        self._prev_t: float | None = None
        self._next = 0.0
        self._hz = CLOCK_TICKS   # clock ticks a second (stat's CPU times are in them)

    def scan(self, host_ratio: float | None, tree: set[int]
             ) -> list[tuple[int, str, float, bool]] | None:
        now = self._clock()
        if host_ratio is None or host_ratio < self.at:
            self._prev, self._prev_t = {}, None   # a later episode starts a new baseline
            return None
        if now < self._next:
            return None
        self._next = now + self.every
        cur, names, parents = self._read_all()
        prev, prev_t = self._prev, self._prev_t
        self._prev, self._prev_t = cur, now
        if prev_t is None or now <= prev_t:
            return None
        dt = now - prev_t
        rates = []
        for key, ticks in cur.items():
            before = prev.get(key)
            if before is None:
                continue
            cores = max(0.0, ticks - before) / self._hz / dt
            if cores > 0:
                rates.append((cores, key[0]))
        rates.sort(reverse=True)
        out = []
        for cores, pid in rates[:TOP_N]:
            out.append((pid, names.get(pid, "?"), cores, _in_tree(pid, tree, parents)))
        return out

    def _read_all(self) -> tuple[dict[tuple[int, int], float], dict[int, str], dict[int, int]]:
        cur: dict[tuple[int, int], float] = {}
        names: dict[int, str] = {}
        parents: dict[int, int] = {}
        try:
            entries = os.listdir(self.proc)
        except OSError:
            return cur, names, parents
        for e in entries:
            if not e.isdigit():
                continue
            try:   # three system calls a file (a scan reads every process's)
                raw = read_proc_file(f"{self.proc}/{e}/stat", 1024)
            except OSError:     # exited while we looked, or not ours to read
                continue
            got = parse_stat(raw.decode("utf-8", errors="replace"))
            if got is None:
                continue
            comm, ppid, ticks, start = got
            pid = int(e)
            cur[(pid, start)] = ticks
            names[pid] = comm
            parents[pid] = ppid
        return cur, names, parents


def _in_tree(pid: int, tree: set[int], parents: dict[int, int]) -> bool:
    """True when ``pid`` is a member of the server's tree or a descendant of one (a
    compile worker the probe has not listed yet)."""
    seen: set[int] = set()
    while pid and pid not in seen:
        if pid in tree:
            return True
        seen.add(pid)
        pid = parents.get(pid, 0)
    return False
