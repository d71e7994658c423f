"""Where the live screen's event loop spends its CPU, per callback, counted in place.

Put this folder on PYTHONPATH instead of ``fakenvml`` (it loads the fake NVML driver's
sitecustomize from there too, so FAKE_NVML_SPEC works as usual) and start any program
that runs an asyncio loop (infertop in tmux, as overhead_together.sh does).  After
LOOPCOUNT_WARM seconds (default 12) it counts, over LOOPCOUNT_SECONDS (default 40):
each asyncio callback's runs and thread CPU time (a task by its coroutine's name),
each Textual timer's firings and CPU time, the garbage collector's runs and CPU
time (in any thread; also inside the callbacks' times), and the loop's selects (its wake-ups and
ready passes), and writes them to LOOPCOUNT_OUT (default /tmp/loopcount.PID.txt) as
"runs/s  ms of CPU/s  name", largest first, with the process's CPU % over the window.
A measuring aid: it adds a little CPU of its own (two clock reads a callback).
"""

from __future__ import annotations

import asyncio.events
import collections
import gc
import importlib.util
import os
import selectors
import threading
import time
import traceback

_FAKE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                     "fakenvml", "sitecustomize.py")
_spec = importlib.util.spec_from_file_location("_fakenvml_site", _FAKE)
if _spec is not None and _spec.loader is not None and os.path.exists(_FAKE):
    _spec.loader.exec_module(importlib.util.module_from_spec(_spec))

RUNS: collections.Counter = collections.Counter()
CPU: collections.Counter = collections.Counter()

_run = asyncio.events.Handle._run


def _counted_run(self) -> None:
    cb = self._callback
    name = getattr(cb, "__qualname__", None) or type(cb).__name__
    if name in ("Task.task_wakeup", "Task.__step"):
        try:
            name = "task:" + cb.__self__.get_coro().__qualname__
        except Exception:
            pass
    t = time.thread_time()
    _run(self)
    CPU[name] += time.thread_time() - t
    RUNS[name] += 1


asyncio.events.Handle._run = _counted_run
_gc_start: dict[int, float] = {}


def _gc_timed(phase: str, info: dict) -> None:
    """Collections by generation and their thread CPU (any thread's)."""
    me = threading.get_ident()
    if phase == "start":
        _gc_start[me] = time.thread_time()
        return
    key = f"(gc generation {info.get('generation')})"
    CPU[key] += time.thread_time() - _gc_start.pop(me, time.thread_time())
    RUNS[key] += 1


gc.callbacks.append(_gc_timed)
_select = selectors.EpollSelector.select


def _counted_select(self, timeout=None):
    RUNS["(loop select)"] += 1
    return _select(self, timeout)


selectors.EpollSelector.select = _counted_select


def _count_timers() -> None:
    # imported by now: the app is running
    import textual.timer as tt
    tick = tt.Timer._tick

    async def _counted_tick(self, *, next_timer, count):
        t = time.thread_time()
        await tick(self, next_timer=next_timer, count=count)
        key = f"timer {self.name}: " + getattr(self._callback, "__qualname__",
                                                  repr(self._callback))
        CPU[key] += time.thread_time() - t
        RUNS[key] += 1

    tt.Timer._tick = _counted_tick

    # layout passes (a bar changing its height re-lays out the screen)
    import textual.screen as ts
    layout = ts.Screen._refresh_layout

    def _counted_layout(self, *args, **kwargs):
        t = time.thread_time()
        try:
            return layout(self, *args, **kwargs)
        finally:
            CPU["Screen._refresh_layout"] += time.thread_time() - t
            RUNS["Screen._refresh_layout"] += 1

    ts.Screen._refresh_layout = _counted_layout


def _report() -> None:
    out = os.environ.get("LOOPCOUNT_OUT") or f"/tmp/loopcount.{os.getpid()}.txt"
    try:
        warm = float(os.environ.get("LOOPCOUNT_WARM", "12"))
        secs = float(os.environ.get("LOOPCOUNT_SECONDS", "40"))
        time.sleep(max(0.0, warm - 2))
        _count_timers()
        time.sleep(2)
        runs0, cpu0, p0 = dict(RUNS), dict(CPU), time.process_time()
        time.sleep(secs)
        p1 = time.process_time()
        with open(out, "w") as f:
            f.write(f"process CPU {(p1 - p0) / secs * 100:.2f} % of a core over {secs:g} s\n")
            for k in sorted(RUNS, key=lambda k: -(CPU.get(k, 0) - cpu0.get(k, 0))):
                runs = (RUNS[k] - runs0.get(k, 0)) / secs
                ms = 1000 * (CPU.get(k, 0) - cpu0.get(k, 0)) / secs
                if runs:
                    f.write(f"{runs:8.2f}/s {ms:8.3f} ms/s  {k}\n")
    except Exception:
        with open(out, "w") as f:
            f.write(traceback.format_exc())


threading.Thread(target=_report, name="loopcount", daemon=True).start()
