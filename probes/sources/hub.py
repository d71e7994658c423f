"""The hub: runs every probe concurrently, each under its own deadline; one Snapshot a tick.

A probe that misses its deadline leaves its last good readings marked STALE (the screen
keeps showing them, dimmed, with the age); one that raises becomes an ERROR sample whose
reason is the exception's message.  The hub itself never raises from ``next``.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Sequence
from typing import Any

from infertop.meta import empty_meta
from infertop.model import Capability, Sample, Snapshot, Status
from infertop.probes.base import Probe, StillRunning
from infertop.source import SnapshotSource


def deadline_for(interval: float) -> float:
    """A probe's deadline for a tick of ``interval`` seconds: below the interval, so one
    slow /metrics (10 s) never holds the tick, within [0.2 s, 5 s]."""
    return max(0.2, min(interval * 0.8, 5.0))


class Hub(SnapshotSource):
    kind = "live"

    def __init__(self, probes: Sequence[Probe], *, deadline: float = 0.8,
                 label: str = "", disabled: dict[str, str] | None = None) -> None:
        self.probes = list(probes)
        self.deadline: float = deadline
        self.label = label or ", ".join(p.name for p in self.probes)
        # sources the user switched off (--no-gpu): shown as n/a with the reason
        self.disabled = {n: Capability(n, False, why) for n, why in (disabled or {}).items()}
        self.capabilities: dict[str, Capability] = dict(self.disabled)
        self._last: dict[str, Sample] = {}
        self._inflight: dict[str, asyncio.Future] = {}   # one collection per probe at a time
        self._used: set[asyncio.Future] = set()          # finished ones already handed out
        self._tick = 0
        self.overruns = 0  # ticks where some probe was late

    async def start(self) -> dict[str, Capability]:
        results = await asyncio.gather(*(self._open(p) for p in self.probes))
        self.capabilities = {**self.disabled, **{c.source: c for c in results}}
        return self.capabilities

    async def _open(self, p: Probe) -> Capability:
        try:
            return await asyncio.wait_for(p.open(), timeout=max(5.0, self.deadline * 4))
        except asyncio.TimeoutError:
            return Capability(p.name, False, "did not answer within 5 s when opened")
        except Exception as e:  # a probe's open must not take the app down
            return Capability(p.name, False, f"{type(e).__name__}: {e}")

    async def add_probe(self, p: Probe) -> Capability:
        """Start a probe while running (the GIL sampler toggled on from the screen)."""
        cap = await self._open(p)
        self.capabilities[p.name] = cap
        self.probes = [q for q in self.probes if q.name != p.name] + [p]
        return cap

    async def remove_probe(self, name: str) -> None:
        for p in [q for q in self.probes if q.name == name]:
            self.probes.remove(p)
            await p.close()
        self.capabilities.pop(name, None)
        self._last.pop(name, None)
        task = self._inflight.pop(name, None)
        if task is not None:
            task.cancel()

    def active_probes(self) -> list[Probe]:
        return [p for p in self.probes
                if self.capabilities.get(p.name, Capability(p.name, True)).available]

    async def next(self) -> Snapshot:
        self._tick += 1
        probes = self.active_probes()
        samples = await asyncio.gather(*(self._collect(p) for p in probes))
        by_name = {s.source: s for s in samples}
        if any(s.status is Status.STALE for s in samples):
            self.overruns += 1
        return Snapshot(time=time.time(), samples=by_name, tick=self._tick,
                        capabilities=dict(self.capabilities))

    async def _collect(self, p: Probe) -> Sample:
        """One probe's sample within the deadline.

        Not ``wait_for``: on timeout it cancels and then *waits for the cancellation*, and a
        scrape of a CPU-starved server can take many seconds to unwind (seen with vLLM's
        CPU build saturating the host: the whole tick hung for 30 s).  The collection is
        left running instead, one per probe, and its answer is used by a later tick."""
        started = time.perf_counter()
        task = self._inflight.get(p.name)
        if task is None or task.done() and task in self._used:
            task = asyncio.ensure_future(p.collect())
            self._inflight[p.name] = task
        done, _ = await asyncio.wait({task}, timeout=self.deadline)
        if not done:
            return self._stale(p.name, f"no answer within {self.deadline:.1f} s")
        self._used.add(task)
        self._used = {t for t in self._used if t in self._inflight.values()}
        try:
            s = task.result()
        except StillRunning:
            return self._stale(p.name, f"no answer within {self.deadline:.1f} s")
        except Exception as e:
            msg = str(e) or type(e).__name__
            return Sample(p.name, time.time(), (), Status.ERROR, msg,
                          self._last[p.name].meta if p.name in self._last
                          else empty_meta(p.name),
                          time.perf_counter() - started)
        self._last[p.name] = s
        return s

    def _stale(self, name: str, reason: str) -> Sample:
        last = self._last.get(name)
        if last is None:
            return Sample(name, time.time(), (), Status.STALE, reason)
        age = time.time() - last.time
        readings = tuple(r.with_status(Status.STALE, f"{reason}; value {age:.0f} s old")
                         if r.status is Status.OK else r for r in last.readings)
        return Sample(name, time.time(), readings, Status.STALE, reason, last.meta)

    async def stop(self) -> None:
        for task in self._inflight.values():
            task.cancel()
        await asyncio.gather(*(p.close() for p in self.probes), return_exceptions=True)

    def describe(self) -> dict[str, Any]:
        return {"source": "live", "label": self.label, "host": socket.gethostname(),
                "probes": [p.name for p in self.probes],
                "capabilities": {n: c.to_dict() for n, c in self.capabilities.items()}}
