"""The optional low-rate GIL sampler as a probe, so its readings are recorded and replayed
like any other source.  Off by default: ``G`` in the live screen or ``--gil-sampler``.

A background task runs ``py-spy dump --json --nonblocking`` of the engine process every
``interval`` seconds (GilSampler); ``collect`` only hands over the rolling aggregate, so a
slow py-spy never holds up the tick.
"""

from __future__ import annotations

import asyncio
import time

from infertop.meta import GilMeta
from infertop.model import Capability, Sample, Status
from infertop.probes.base import Probe
from infertop.probes.capture.files import CaptureError
from infertop.probes.capture.gil_sampler import GilSampler
from infertop.probes.capture.pyspy_run import find_pyspy
from infertop.probes.registry import ProbeSpec, register


class GilProbe(Probe):
    name = "gil"

    def __init__(self, pid: int, role: str = "", *, interval: float = 2.0) -> None:
        self.pid, self.role, self.interval = pid, role, interval
        self.sampler = GilSampler()
        self._task: asyncio.Task | None = None
        self._stop = asyncio.Event()
        self.error: str | None = None

    async def open(self) -> Capability:
        if find_pyspy() is None:
            return Capability(self.name, False, "py-spy is not installed (pip install py-spy)")
        self._task = asyncio.create_task(self._run())
        return Capability(self.name, True)

    async def _run(self) -> None:
        try:
            await self.sampler.run(self.pid, self.interval, self._stop)
        except CaptureError as e:
            self.error = f"{e}"
        except Exception as e:  # keep the reason for the screen; never crash the hub
            self.error = f"{type(e).__name__}: {e}"

    async def collect(self) -> Sample:
        if self.error:
            return Sample(self.name, time.time(), (), Status.ERROR, self.error)
        readings = self.sampler.readings(self.pid, self.role)
        return Sample(self.name, time.time(), tuple(readings),
                      meta=GilMeta(gil_pid=self.pid))

    async def close(self) -> None:
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass


SPEC = register(ProbeSpec(
    name="gil", order=50,
    keys=("python.gil_held_ratio", "python.gil_holder", "python.thread_active_ratio",
          "python.gil_sampler_cost_seconds", "python.gil_sampler_cpu_ratio"),
    needs="py-spy, and permission to read the engine process (ptrace)",
    build=None,   # started on demand by the live screen (key G), not by a flag
))
