"""The Probe interface every live source implements, and a helper for blocking libraries."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import signal
import sys
import threading
import time
from typing import Any

from infertop.meta import NO_META, SampleMeta
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
           meta: SampleMeta | None = None, started: float | None = None,
           now: float | None = None) -> Sample:
    """Build a Sample stamped with wall time (and the collection's duration)."""
    t = time.time() if now is None else now
    dur = (time.perf_counter() - started) if started is not None else 0.0
    return Sample(source, t, tuple(readings), status, reason, meta or NO_META, dur)


# After a headless command was asked to stop, the process ends within this however its
# shutdown goes (a worker thread stuck in a read, a file system that hangs): a recording
# is written line by line, so a forced end keeps every tick already on disk.
STOP_GRACE = 5.0


def exit_deadline(code: int, seconds: float, restore: Any = None, fd: int = -1
                  ) -> threading.Timer:
    """Arm a daemon timer that ends the process with ``code`` after ``seconds`` unless it
    has exited by then.  ``restore`` (termios attributes) is put back on ``fd`` first, so
    a live terminal is not left in raw mode.  For a process about to exit: the timer is
    not cancelled by anything but the process ending."""
    def force() -> None:
        if restore is not None and fd >= 0:
            import termios
            try:
                termios.tcsetattr(fd, termios.TCSANOW, restore)
            except (termios.error, OSError):
                pass   # the terminal is gone
        for stream in (sys.stdout, sys.stderr):
            try:
                if stream is not None:
                    stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)

    timer = threading.Timer(seconds, force)
    timer.daemon = True
    timer.start()
    return timer


def stop_on_signals(grace: float = STOP_GRACE) -> asyncio.Event:
    """An Event that SIGINT, SIGTERM and SIGHUP set (Ctrl-C, kill, the SSH session that
    started it dropping), so a headless command ends its loop and closes its files
    instead of dying mid-write.  The first signal also arms ``exit_deadline`` (``grace``
    seconds), and a second one ends the process at once: a signal always ends it, even
    when something blocks.  Call inside the running loop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(sig: int) -> None:
        if stop.is_set():
            os._exit(128 + sig)   # asked twice: the user means it
        stop.set()
        exit_deadline(128 + sig, grace)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            loop.add_signal_handler(sig, on_signal, sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass  # not the main thread, or no signals on this platform
    return stop
