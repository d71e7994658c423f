"""The Probe interface every live source implements, and a helper for blocking libraries."""

from __future__ import annotations

import asyncio
import concurrent.futures
import signal
import time
from typing import Any, Mapping

from infertop.model import Capability, Reading, Sample, Status


class Probe:
    """A source of Samples.

    ``open`` says what this source can do here (never raises); ``collect`` returns one
    Sample (may raise: the hub turns an exception into an ERROR sample with its message);
    ``close`` releases handles.  ``slow_every``: ticks between slow-cadence reads.
    """

    name: str = "probe"

    async def open(self) -> Capability:
        return Capability(self.name, True)

    async def collect(self) -> Sample:
        raise NotImplementedError

    async def close(self) -> None:
        return None


class BlockingProbe(Probe):
    """For libraries with blocking calls (pynvml, psutil): run them in one dedicated thread.

    One thread per probe, so a hung NVML call blocks only this probe; while a previous
    collection is still running, ``collect`` does not queue another (threads would pile up
    behind a hung driver) but raises ``StillRunning`` and the hub marks the source STALE.
    """

    def __init__(self) -> None:
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"infertop-{self.name}")
        self._inflight: asyncio.Future | None = None

    def open_blocking(self) -> Capability:
        return Capability(self.name, True)

    def collect_blocking(self) -> Sample:
        raise NotImplementedError

    def close_blocking(self) -> None:
        return None

    async def open(self) -> Capability:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.open_blocking)

    async def collect(self) -> Sample:
        if self._inflight is not None and not self._inflight.done():
            raise StillRunning(f"{self.name}: previous collection still running")
        loop = asyncio.get_running_loop()
        self._inflight = loop.run_in_executor(self._executor, self.collect_blocking)
        # shield: a hub deadline cancels our wait, not the thread's work
        return await asyncio.shield(self._inflight)

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        if self._inflight is None or self._inflight.done():
            try:
                await loop.run_in_executor(self._executor, self.close_blocking)
            except Exception:
                pass
        self._executor.shutdown(wait=False, cancel_futures=True)


class StillRunning(RuntimeError):
    """The previous collection of a blocking probe has not returned yet."""


def sample(source: str, readings: list[Reading] | tuple[Reading, ...], *,
           status: Status = Status.OK, reason: str = "",
           meta: Mapping[str, Any] | None = None, started: float | None = None,
           now: float | None = None) -> Sample:
    """Build a Sample stamped with wall time (and the collection's duration)."""
    t = time.time() if now is None else now
    dur = (time.perf_counter() - started) if started is not None else 0.0
    return Sample(source, t, tuple(readings), status, reason, dict(meta or {}), dur)


def stop_on_signals() -> asyncio.Event:
    """An Event that SIGINT, SIGTERM and SIGHUP set (Ctrl-C, kill, the SSH session that
    started it dropping), so a headless command ends its loop and closes its files
    instead of dying mid-write.  Call inside the running loop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError, ValueError):
            pass  # not the main thread, or no signals on this platform
    return stop
