"""``P``: py-spy record for N seconds (nonblocking by default), one merged speedscope
JSON and an SVG flame graph, and the summary shown in the scheduling pane.  The design
notes are in pyspy.py's docstring."""

from __future__ import annotations

import asyncio
import collections
import json
import re
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infertop.probes.capture.files import CaptureError
from infertop.probes.capture.flamegraph import _save_record, _short
from infertop.probes.capture.pyspy_dump import (
    ProcessDump,
    StackFrame,
    _require_pyspy,
    dump_tree,
)
from infertop.probes.capture.pyspy_run import (
    _child_env,
    _kill,
    _PySpyError,
    _python_before_311,
    classify_error,
)


@dataclass(slots=True)
class ThreadProfile:
    """Per-thread counts over one recording."""

    pid: int
    role: str
    key: str            # py-spy's thread id text ('4990' or '0x7F...')
    name: str
    active: int = 0     # on-CPU samples
    gil: int = 0        # samples holding the GIL

    @property
    def label(self) -> str:
        return f"{self.role or self.pid}/{self.name or 'thread'} ({self.key})"


@dataclass(slots=True)
class ProfileSummary:
    top_functions: list[tuple[str, float]]            # (function (file), share of on-CPU samples)
    gil_share: float | None                            # busiest process: share of time GIL held
    idle_share: float | None                           # share of thread-samples off CPU
    per_thread: list[tuple[str, float, float]]         # (thread, active share, GIL share)
    per_process: list[tuple[str, float]] = field(default_factory=list)  # (process, GIL share)
    samples: int = 0      # on-CPU samples, as the SVG and speedscope count them (top_functions:
    #                       the ones with a Python frame)


@dataclass(slots=True)
class RecordResult:
    pids: list[tuple[int, str]]
    seconds: float                 # requested
    sampled_seconds: float         # actually covered (less when cancelled / target exited)
    rate: int
    speedscope_path: Path | None = None
    svg_path: Path | None = None
    cancelled: bool = False
    exited_pids: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    errors: dict[int, str] = field(default_factory=dict)
    threads: list[ThreadProfile] = field(default_factory=list)
    intervals: dict[int, int] = field(default_factory=dict)     # pid -> sampling intervals
    frames: list[StackFrame] = field(default_factory=list)           # shared frame table
    stacks: dict[tuple[int, str], collections.Counter] = field(default_factory=dict)
    summary: ProfileSummary | None = None
    # per thread, the on-CPU stacks in the order py-spy took them (for speedscope)
    ordered: dict[tuple[int, str], list[tuple[int, ...]]] = field(default_factory=dict, repr=False)

    @property
    def paths(self) -> list[Path]:
        return [p for p in (self.speedscope_path, self.svg_path) if p]


class _Run:
    """One py-spy record child and what its stdout told us."""

    def __init__(self, pid: int, role: str, kind: str, out: Path, argv: list[str]) -> None:
        self.pid, self.role, self.kind, self.out, self.argv = pid, role, kind, out, argv
        self.proc: asyncio.subprocess.Process | None = None
        self.started_at: float | None = None   # monotonic time py-spy began sampling
        self.ended_at: float | None = None
        self.target_exited = False
        self.sigint_at: float | None = None
        self.stderr = b""
        self.stdout_lines: list[str] = []
        self._reader: asyncio.Task | None = None

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=_child_env(),
            start_new_session=True)  # a Ctrl-C in the terminal is ours, not py-spy's
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.proc and self.proc.stdout and self.proc.stderr
        err_task = asyncio.ensure_future(self.proc.stderr.read())
        async for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            self.stdout_lines.append(line)
            if "Sampling process" in line and self.started_at is None:
                self.started_at = time.monotonic()
            elif "process exited" in line or "process ended" in line:
                self.target_exited = True
        self.stderr = await err_task
        await self.proc.wait()
        self.ended_at = time.monotonic()

    @property
    def done(self) -> bool:
        return self._reader is not None and self._reader.done()

    def interrupt(self) -> None:
        """SIGINT: py-spy stops and writes what it has (SIGTERM would lose the profile)."""
        if self.proc and self.proc.returncode is None and self.sigint_at is None:
            self.sigint_at = time.monotonic()
            _kill(self.proc, signal.SIGINT)

    def kill(self) -> None:
        if self.proc:
            _kill(self.proc)


def _validate_record_args(seconds: Any, rate: Any) -> tuple[int, int]:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
            or not 1 <= seconds <= 3600:
        raise CaptureError(f"record duration must be 1..3600 s, got {seconds!r}",
                           "set the py-spy record duration in the options (default 10 s)")
    if isinstance(rate, bool) or not isinstance(rate, int) or not 1 <= rate <= 1000:
        raise CaptureError(f"sampling rate must be 1..1000 per second, got {rate!r}",
                           "use the default rate (100)")
    return int(round(seconds)), rate


async def record(pids: Iterable[tuple[int, str]], seconds: float = 10, *, rate: int = 100,
                 out_dir: Path | str, server: str,
                 progress: Callable[[float], None] | None = None,
                 cancel: asyncio.Event | None = None, pyspy: str | None = None,
                 blocking: bool = False, grace: float = 20.0) -> RecordResult:
    """Record every Python process of the tree for ``seconds``; write speedscope + SVG.

    ``progress(fraction)`` is called about ten times a second; setting ``cancel`` stops
    early (SIGINT, so the samples so far are kept).  Raises CaptureError when nothing can
    be recorded (py-spy missing, no ptrace rights, no Python process).
    """
    exe = _require_pyspy(pyspy)
    secs, rate = _validate_record_args(seconds, rate)
    out_dir = Path(out_dir)
    # A quick dump first: it fails fast with the right message (permissions, not Python)
    # before any recorder starts, and lists every thread, idle ones included.
    pre = await dump_tree(pids, pyspy=exe)
    python_procs = [p for p in pre.processes if p.ok]
    result = RecordResult([(p.pid, p.role) for p in pre.processes], secs, 0.0, rate)
    for p in pre.processes:
        if not p.ok:
            result.errors[p.pid] = p.error or "failed"
            result.notes.append(f"skipped PID {p.pid} ({p.role}): {p.error}"
                                + (f" - {p.fix}" if p.fix else ""))
    if not python_procs:
        first = pre.processes[0]
        raise CaptureError(f"nothing to record: {first.error}", first.fix)
    if cancel is not None and cancel.is_set():
        result.cancelled = True
        result.notes.append("cancelled before sampling started; nothing saved")
        return result

    try:
        tmp = Path(tempfile.mkdtemp(prefix=".pyspy-record-", dir=out_dir))
    except OSError as e:
        raise CaptureError(f"cannot write in capture directory {out_dir}: {e.strerror or e}",
                           "pass a writable directory with --capture-dir DIR") from e
    runs: list[_Run] = []
    old_python = {p.pid: _python_before_311(p.pid) for p in python_procs}
    for p in python_procs:
        if old_python[p.pid] and not blocking:
            result.notes.append(f"PID {p.pid} runs Python < 3.11: on-CPU samples taken in "
                                "blocking mode (py-spy pauses it briefly per sample) so idle "
                                "threads are not counted as busy")
    try:
        for p in python_procs:
            for kind in ("active", "gil"):
                argv = [exe, "record", "--pid", str(p.pid), "--format", "speedscope",
                        "--output", str(tmp / f"{p.pid}.{kind}.json"), "--duration", str(secs),
                        "--rate", str(rate), "--hideprogress"]
                # Python < 3.11: nonblocking py-spy cannot tell idle threads (it would rank a
                # thread blocked in read() as hot), so the on-CPU run pauses the target; the
                # GIL run stays nonblocking (one ptrace tracer per process at a time).
                pause = blocking or (kind == "active" and old_python.get(p.pid, False))
                if not pause:
                    argv.append("--nonblocking")
                if kind == "gil":
                    argv.append("--gil")
                runs.append(_Run(p.pid, p.role, kind, tmp / f"{p.pid}.{kind}.json", argv))
        for r in runs:
            await r.start()
        await _supervise(runs, secs, progress, cancel, grace)
        result.cancelled = bool(cancel is not None and cancel.is_set())
        _collect(result, runs, python_procs, secs, rate)
        if not result.threads and not any(r.out.exists() for r in runs):
            err = next((r.stderr.decode("utf-8", "replace") for r in runs if r.stderr.strip()), "")
            if result.cancelled:
                result.notes.append("cancelled before sampling started; nothing saved")
                return result
            why = classify_error(err, runs[0].pid, exe) if err else _PySpyError(
                "other", "py-spy wrote no profile")
            raise CaptureError(why.message, why.fix)
        result.summary = summarize(result)
        # speedscope JSON and SVG can be MBs: build and write them off the event loop
        await asyncio.to_thread(_save_record, result, out_dir, server)
        if progress:
            progress(1.0)
        return result
    finally:
        for r in runs:
            r.kill()
        shutil.rmtree(tmp, ignore_errors=True)


async def _supervise(runs: list[_Run], secs: int, progress: Callable[[float], None] | None,
                     cancel: asyncio.Event | None, grace: float) -> None:
    """Wait for the children, report progress, turn a cancel into SIGINTs."""
    t0 = time.monotonic()
    deadline = t0 + secs + grace
    interrupted_at: float | None = None
    cancel_wait = asyncio.ensure_future(cancel.wait()) if cancel is not None else None
    while not all(r.done for r in runs):
        now = time.monotonic()
        if progress:
            started = [r.started_at for r in runs if r.started_at is not None]
            frac = min(0.99, (now - min(started)) / secs) if started else 0.0
            progress(frac)
        want_stop = (cancel is not None and cancel.is_set()) or now > deadline
        if want_stop and interrupted_at is None:
            interrupted_at = now
            for r in runs:
                if r.started_at is None:
                    # SIGINT before py-spy installs its Ctrl-C handler would kill it silently;
                    # a run that has not started sampling has nothing to save anyway.
                    r.kill()
                else:
                    # give py-spy a moment past its 'Sampling' line to arm the handler
                    await asyncio.sleep(max(0.0, r.started_at + 0.2 - time.monotonic()))
                    r.interrupt()
        if interrupted_at is not None and now > interrupted_at + 10:
            for r in runs:  # py-spy did not finish writing within 10 s of SIGINT
                r.kill()
        # wait on the reader tasks themselves: asyncio.wait never cancels what it waits on
        waiters: list[asyncio.Future] = [r._reader for r in runs if r._reader and not r.done]
        if cancel_wait is not None and not cancel_wait.done():
            waiters.append(cancel_wait)
        await asyncio.wait(waiters, timeout=0.1, return_when=asyncio.FIRST_COMPLETED)
    if cancel_wait is not None:
        cancel_wait.cancel()


def _parse_pyspy_speedscope(path: Path
                            ) -> tuple[list[StackFrame], list[tuple[str, str, list[list[int]]]]]:
    """py-spy speedscope file -> (frames, [(thread key, thread name, samples root-first)])."""
    data = json.loads(path.read_text())
    frames = [StackFrame(str(f.get("name", "?")), str(f.get("file") or ""), int(f.get("line") or 0))
              for f in data["shared"]["frames"]]
    profiles = []
    for prof in data.get("profiles", ()):
        m = re.match(r'(?:Process \d+ )?Thread (\S+) "(.*)"$', prof.get("name", ""))
        key, name = (m.group(1), m.group(2)) if m else (prof.get("name", "?"), "")
        profiles.append((key, name, [list(s) for s in prof.get("samples", ())]))
    return frames, profiles


def _collect(result: RecordResult, runs: list[_Run], procs: list[ProcessDump],
             secs: int, rate: int) -> None:
    """Merge the children's files into one frame table, per-thread counts and stacks."""
    frame_index: dict[StackFrame, int] = {}
    threads: dict[tuple[int, str], ThreadProfile] = {}
    ordered: dict[tuple[int, str], list[tuple[int, ...]]] = {}
    roles = {p.pid: p.role for p in procs}
    alias: dict[tuple[int, str], tuple[int, str]] = {}
    for p in procs:  # every thread the pre-dump saw, so fully idle threads count too
        for t in p.threads:
            threads[(p.pid, t.tid_text)] = ThreadProfile(p.pid, p.role, t.tid_text, t.name or "")
            # nonblocking py-spy on Python < 3.11 cannot see OS thread ids and names
            # threads by their Python id instead: map that spelling to the same thread
            alias[(p.pid, f"0x{t.tid:X}")] = (p.pid, t.tid_text)
    for r in runs:
        if r.target_exited and r.pid not in result.exited_pids:
            result.exited_pids.append(r.pid)
        if not r.out.exists():
            if r.stderr.strip():
                e = classify_error(r.stderr.decode("utf-8", "replace"), r.pid)
                result.errors.setdefault(r.pid, e.message)
            continue
        try:
            frames, profiles = _parse_pyspy_speedscope(r.out)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            result.notes.append(f"unreadable py-spy output for PID {r.pid}: {exc}")
            continue
        remap = [frame_index.setdefault(f, len(frame_index)) for f in frames]
        for key, name, samples in profiles:
            key = alias.get((r.pid, key), (r.pid, key))[1]
            tp = threads.get((r.pid, key))
            if tp is None:
                tp = threads[(r.pid, key)] = ThreadProfile(r.pid, roles.get(r.pid, ""), key, name)
            if name and not tp.name:
                tp.name = name
            if r.kind == "active":
                tp.active += len(samples)
                seq = ordered.setdefault((r.pid, key), [])
                seq.extend(tuple(remap[i] for i in s) for s in samples)
            else:
                tp.gil += len(samples)
    result.frames = list(frame_index)
    result.threads = list(threads.values())
    result.stacks = {k: collections.Counter(v) for k, v in ordered.items()}
    result.ordered = ordered
    # Sampling intervals per process: exact when py-spy ran its full duration (it stops one
    # short of duration x rate), else from the wall clock between its start and stop.
    spans = []
    for pid in {r.pid for r in runs}:
        mine = [r for r in runs if r.pid == pid and r.kind == "active"]
        if not mine:
            continue
        r = mine[0]
        if r.started_at is None:
            continue
        full = r.sigint_at is None and not r.target_exited and r.proc is not None \
            and r.proc.returncode == 0
        if full:
            n, span = max(1, secs * rate - 1), float(secs)
        else:
            end = r.sigint_at or r.ended_at or time.monotonic()
            span = max(0.0, end - r.started_at)
            n = max(1, min(secs * rate, round(span * rate)))
        result.intervals[pid] = n
        spans.append(span)
    result.sampled_seconds = max(spans) if spans else 0.0
    if any("behind in sampling" in ln for r in runs for ln in r.stdout_lines):
        result.notes.append(f"py-spy fell behind at {rate}/s (busy host): samples are fewer "
                            f"than planned; a lower rate is more accurate")
    for pid in result.exited_pids:
        result.notes.append(f"PID {pid} ({roles.get(pid, '?')}) exited during the capture; "
                            f"its profile covers the time before it exited")
    if result.cancelled:
        result.notes.append(f"cancelled after {result.sampled_seconds:.1f} s of {secs} s; "
                            f"samples so far were kept")


def _func_key(f: StackFrame) -> str:
    return f"{f.name} ({_short(f.filename)})"


def summarize(result: RecordResult, top: int = 10) -> ProfileSummary:
    """Top functions by own (leaf) time, GIL-held share, idle share, per thread."""
    own: collections.Counter = collections.Counter()
    total = 0
    every = 0    # every on-CPU sample, with or without a Python frame: what the SVG and
    #              the speedscope file count, so the three say the same number
    for counter in result.stacks.values():
        for stack, n in counter.items():
            every += n
            if stack:
                own[_func_key(result.frames[stack[-1]])] += n
                total += n
    top_functions = [(name, n / total) for name, n in own.most_common(top)] if total else []
    per_thread: list[tuple[str, float, float]] = []
    per_process: list[tuple[str, float]] = []
    active_sum = denom_sum = 0
    for pid, n in result.intervals.items():
        mine = [t for t in result.threads if t.pid == pid]
        gil = min(1.0, sum(t.gil for t in mine) / n)
        role = mine[0].role if mine else ""
        per_process.append((f"{role or 'pid'} {pid}", gil))
        for t in mine:
            per_thread.append((t.label, min(1.0, t.active / n), min(1.0, t.gil / n)))
            active_sum += min(t.active, n)
            denom_sum += n
    per_thread.sort(key=lambda x: (-x[1], -x[2], x[0]))
    per_process.sort(key=lambda x: -x[1])
    return ProfileSummary(
        top_functions=top_functions,
        gil_share=per_process[0][1] if per_process else None,
        idle_share=(1.0 - active_sum / denom_sum) if denom_sum else None,
        per_thread=per_thread, per_process=per_process, samples=every)


def summary_lines(s: ProfileSummary, width: int = 60, threads: int = 5,
                  funcs: int = 5) -> list[str]:
    """Plain lines for the scheduling pane (the pane styles them)."""
    pct = lambda x: "n/a" if x is None else f"{x * 100:.0f}%"  # noqa: E731
    lines = [f"py-spy: GIL held {pct(s.gil_share)}"
             + (f" ({s.per_process[0][0]})" if s.per_process else "")
             + f", threads idle {pct(s.idle_share)}, {s.samples} on-CPU samples"]
    for name, share in s.top_functions[:funcs]:
        lines.append(f"  {share * 100:5.1f}%  {name[:width]}")
    for name, act, gil in s.per_thread[:threads]:
        lines.append(f"  {name[:width - 20]:<{width - 20}} cpu {act * 100:3.0f}%  "
                     f"gil {gil * 100:3.0f}%")
    spin = spin_share(s)
    if spin >= 0.2:
        lines.append(f"  note: {spin * 100:.0f}% of on-CPU samples are spin-waits (sched_yield, "
                     "SpinCondition): the thread polls for work, which py-spy counts as idle")
    return lines


SPIN_WAITS = ("sched_yield", "SpinCondition.wait", "memory_fence", "acquire_read")


def spin_share(s: ProfileSummary) -> float:
    """Share of own time in busy-wait frames (vLLM's shm_broadcast ring polls with
    sched_yield): CPU that top shows as busy but that does no work."""
    return sum(share for name, share in s.top_functions
               if any(w in name for w in SPIN_WAITS))


def open_hints(result: RecordResult) -> list[str]:
    """One line each to open the files."""
    opener = "open" if sys.platform == "darwin" else "xdg-open"
    hints = []
    if result.speedscope_path:
        hints.append(f"npx speedscope {_q(result.speedscope_path)}   "
                     f"(or drop it on https://www.speedscope.app)")
    if result.svg_path:
        hints.append(f"{opener} {_q(result.svg_path)}")
    return hints


def _q(p: Path) -> str:
    import shlex
    return shlex.quote(str(p))


