"""``G``: a low-rate GIL sampler (a py-spy dump of the engine every few seconds), off by
default; its own cost is measured and shown."""

from __future__ import annotations

import asyncio
import collections
import json
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass

from infertop.model import Kind, Reading, Status, make_labels
from infertop.probes.capture.files import CaptureError
from infertop.probes.capture.pyspy_dump import _require_pyspy, parse_dump_json
from infertop.probes.capture.pyspy_run import (
    _check_pid,
    _python_before_311,
    _run,
    classify_error,
)


@dataclass(slots=True)
class GilSample:
    time: float
    pid: int
    holder_thread: str | None          # label of the GIL holder, None if nobody held it
    active_by_thread: dict[str, bool]  # thread label -> on CPU at this instant
    cost_seconds: float = 0.0          # wall time of this py-spy dump
    cpu_seconds: float = 0.0           # CPU py-spy used for it (approximate, see GilSampler)
    error: str | None = None


@dataclass(slots=True)
class GilAggregate:
    samples: int
    gil_held_share: float | None                 # share of samples where some thread held it
    holder_share: dict[str, float]               # thread -> share of samples it held the GIL
    active_share: dict[str, float]               # thread -> share of samples it was on CPU
    cost_mean_seconds: float                     # wall seconds per sample
    cost_max_seconds: float
    cpu_mean_seconds: float                      # py-spy CPU seconds per sample
    errors: int = 0
    cpu_ratio: float = 0.0                       # py-spy CPU seconds per wall second


class GilSampler:
    """Periodic `py-spy dump --json --nonblocking` of one process (the engine core).

    Nonblocking, so the sampled process is never paused; each sample costs one py-spy
    start (tens of ms of CPU on the host), which is why the rate is low and the cost is
    measured and shown.  CPU cost is read from RUSAGE_CHILDREN deltas, so it is
    approximate if infertop reaps other children at the same moment.
    """

    def __init__(self, *, pyspy: str | None = None, window: int = 60, timeout: float = 5.0,
                 nonblocking: bool = True) -> None:
        self.pyspy = pyspy
        self.timeout = timeout
        self.nonblocking = nonblocking
        self.history: dict[int, collections.deque[GilSample]] = {}
        self.window = window
        self.interval = 2.0     # seconds between samples (run() sets it)

    async def sample_once(self, pid: int) -> GilSample:
        exe = _require_pyspy(self.pyspy)
        pid = _check_pid(pid)
        argv = [exe, "dump", "--json", "--pid", str(pid)]
        if self.nonblocking and not _python_before_311(pid):  # < 3.11: only a pause tells idle
            argv.append("--nonblocking")
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        error = None
        holder, active = None, {}
        try:
            rc, out, err = await _run(argv, self.timeout)
            if rc != 0:
                e = classify_error(err.decode("utf-8", "replace"), pid, exe)
                if e.kind == "permission":
                    raise CaptureError(e.message, e.fix)
                error = e.message
            else:
                for t in parse_dump_json(pid, json.loads(out)):
                    active[t.label] = t.active or t.owns_gil
                    if t.owns_gil:
                        holder = t.label
        except asyncio.TimeoutError:
            error = f"py-spy dump timed out after {self.timeout:g} s"
        except (ValueError, TypeError) as exc:
            error = f"unreadable py-spy output: {exc}"
        cost = time.perf_counter() - t0
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = max(0.0, (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime))
        s = GilSample(time.time(), pid, holder, active, cost, cpu, error)
        self.history.setdefault(pid, collections.deque(maxlen=self.window)).append(s)
        return s

    def aggregate(self, pid: int) -> GilAggregate:
        hist = list(self.history.get(pid, ()))
        good = [s for s in hist if s.error is None]
        n = len(good)
        holders = collections.Counter(s.holder_thread for s in good if s.holder_thread)
        act: collections.Counter = collections.Counter()
        for s in good:
            act.update(k for k, v in s.active_by_thread.items() if v)
        costs = [s.cost_seconds for s in hist]
        # its own cost as a share of a core: py-spy's CPU over the wall time the window
        # covers (n samples, one every `interval`: the first sample's period included)
        span = (hist[-1].time - hist[0].time) + self.interval if hist else 0.0
        return GilAggregate(
            samples=n,
            gil_held_share=(sum(holders.values()) / n) if n else None,
            holder_share={k: v / n for k, v in holders.most_common()},
            active_share={k: v / n for k, v in act.most_common()},
            cost_mean_seconds=sum(costs) / len(costs) if costs else 0.0,
            cost_max_seconds=max(costs) if costs else 0.0,
            cpu_mean_seconds=sum(s.cpu_seconds for s in hist) / len(hist) if hist else 0.0,
            errors=len(hist) - n,
            cpu_ratio=sum(s.cpu_seconds for s in hist) / span if span > 0 else 0.0)

    async def run(self, pid: int, interval: float = 2.0, cancel: asyncio.Event | None = None,
                  on_sample: Callable[[GilSample], None] | None = None) -> None:
        """Sample every ``interval`` seconds until ``cancel`` is set or the process is gone."""
        cancel = cancel or asyncio.Event()
        self.interval = max(0.05, interval)
        while not cancel.is_set():
            s = await self.sample_once(pid)
            if on_sample:
                on_sample(s)
            if s.error and "exited" in s.error:
                return
            try:
                await asyncio.wait_for(cancel.wait(), max(0.05, interval - s.cost_seconds))
            except asyncio.TimeoutError:
                pass

    def readings(self, pid: int, role: str = "") -> list[Reading]:
        """The rolling aggregate as Readings (python.* keys) for the scheduling pane."""
        agg = self.aggregate(pid)
        base = {"pid": pid, "role": role} if role else {"pid": pid}
        if agg.samples == 0:
            why = "GIL sampler has no sample yet" if not agg.errors else "GIL sampler failed"
            return [Reading("python.gil_held_ratio", None, "ratio", make_labels(base),
                            Status.NODATA, why)]
        out = [Reading("python.gil_held_ratio", agg.gil_held_share, "ratio", make_labels(base)),
               Reading("python.gil_sampler_cost_seconds", agg.cost_mean_seconds, "s",
                       make_labels(base)),
               Reading("python.gil_sampler_cpu_ratio", agg.cpu_ratio, "cores",
                       make_labels(base))]
        if agg.holder_share:
            top = next(iter(agg.holder_share))
            out.append(Reading("python.gil_holder", 1.0, "", make_labels(base), kind=Kind.INFO,
                               text=top))
        for thread, share in agg.active_share.items():
            out.append(Reading("python.thread_active_ratio", share, "ratio",
                               make_labels(base, thread=thread)))
        return out
