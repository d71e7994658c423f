"""py-spy captures of a server's Python processes: dump (`p`), record (`P`), GIL sampler.

Everything runs py-spy as a child through ``asyncio.create_subprocess_exec`` (never a
shell); arguments are PIDs (validated ints) and validated numbers only.  Failures become a
``CaptureError`` with the exact fix (permissions), or a per-process error (not Python,
exited), never a traceback and never a half-written file.

Decisions (see the reference, metrics.md section 7):

* ``dump`` runs in py-spy's default *blocking* mode: one short pause gives a consistent
  stack and exact thread ids / activity, which is what a one-shot look wants.
* ``record`` runs **--nonblocking** by default: it never pauses the engine's hot loop
  (100 pauses a second would perturb the latencies we are trying to explain).  The cost
  is occasional sampling errors (counted) and, on Python < 3.11 only, idle detection by
  py-spy's stack heuristic instead of the OS thread state.  ``blocking=True`` switches.
* py-spy's output formats carry no per-sample active/GIL flag, and ``--gil`` keeps only
  GIL-holding samples.  So ``record`` runs **two** py-spy children per process, side by
  side (safe in nonblocking mode: no ptrace stops): one records on-CPU ("active")
  samples in speedscope format, the other ``--gil`` samples.  Own time and the flame
  graph come from the first, GIL share from the second; the denominator is the number
  of sampling intervals (duration x rate, exact when the run completes, from the wall
  clock when cancelled or when the target exits).  We then write one merged speedscope
  JSON and draw the SVG flame graph ourselves from the same stacks, so one recording
  gives both files (no second py-spy run, no flamegraph.pl).  Those writers live in
  flamegraph.py and are re-exported here.
* Cancel sends **SIGINT**: py-spy's Ctrl-C handler stops sampling and still writes the
  profile; SIGTERM would kill it without writing anything.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import re
import resource
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from infertop.model import Kind, Reading, Status, make_labels

from .capture_dir import CaptureError, capture_path, write_all_atomic
# The record output writers live in flamegraph.py; imported back so record() calls them
# and `from infertop.probes.pyspy import speedscope_document, ...` keeps working.
from .flamegraph import _save_record, _short, flamegraph_svg, speedscope_document

__all__ = [
    "CaptureError", "Frame", "ThreadDump", "ProcessDump", "DumpResult", "RecordResult",
    "ProfileSummary", "ThreadProfile", "GilSample", "GilAggregate", "GilSampler",
    "find_pyspy", "dump_tree", "save_dump", "record", "summarize", "summary_lines",
    "open_hints", "native_tools_hint", "ptrace_fix",
]

# ---------------------------------------------------------------------------------------
# Finding py-spy, running it, reading its errors
# ---------------------------------------------------------------------------------------

PYSPY_INSTALL_FIX = ("install it into infertop's environment: pip install py-spy "
                     "(or pipx install py-spy; it ships a static binary)")


def find_pyspy() -> str | None:
    """py-spy on PATH, else the one next to this interpreter (a venv's bin/ is often not on
    PATH when infertop is started by its full path)."""
    found = shutil.which("py-spy")
    if found:
        return found
    beside = Path(sys.executable).parent / "py-spy"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return None


def _child_env() -> dict[str, str]:
    # A RUST_BACKTRACE=1 in the user's shell makes py-spy append Rust backtraces to every
    # error; we show the message, not the backtrace.
    env = dict(os.environ)
    env["RUST_BACKTRACE"] = "0"
    env["RUST_LIB_BACKTRACE"] = "0"
    return env


def _check_pid(pid: Any) -> int:
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        raise ValueError(f"not a PID: {pid!r}")
    return pid


def _in_container() -> bool:
    if os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv"):
        return True
    try:
        cg = Path("/proc/1/cgroup").read_text()
    except OSError:
        return False
    return any(w in cg for w in ("docker", "kubepods", "containerd", "libpod"))


def ptrace_fix(pyspy: str | None = None) -> str:
    """The exact ways to get ptrace rights here, most likely first."""
    exe = pyspy or "$(which py-spy)"
    try:
        scope = Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip()
    except OSError:
        scope = ""
    steps: list[str] = []
    if os.geteuid() != 0:
        steps.append('run infertop as root: sudo env "PATH=$PATH" infertop ...')
        steps.append("or give py-spy the CAP_SYS_PTRACE capability: "
                     f"sudo setcap cap_sys_ptrace+ep {exe}")
    else:
        steps.append("root without CAP_SYS_PTRACE (a container?): add the capability")
    if scope == "3":
        steps.append("kernel.yama.ptrace_scope is 3 (ptrace disabled until reboot): set "
                     "kernel.yama.ptrace_scope=0 in /etc/sysctl.d and reboot")
    else:
        steps.append("or allow ptrace of non-child processes: "
                     "sudo sysctl kernel.yama.ptrace_scope=0"
                     + (f" (now {scope})" if scope else ""))
    container = ("in a container: start it with --cap-add SYS_PTRACE (docker/podman), "
                 "Kubernetes: securityContext.capabilities.add: [SYS_PTRACE]")
    if _in_container():
        steps.insert(0, container)
    else:
        steps.append(container)
    return "; ".join(steps)


def native_tools_hint(pid: int) -> str:
    return (f"use native tools: gdb -p {pid} -batch -ex 'thread apply all bt'  |  "
            f"perf top -p {pid}  |  perf record -g -p {pid} -- sleep 10")


@dataclass(frozen=True, slots=True)
class _PySpyError:
    kind: str  # permission | not_python | exited | other
    message: str
    fix: str = ""


_PERM_RE = re.compile(r"permission denied|operation not permitted|os error 1\)|os error 13\)",
                      re.IGNORECASE)


def classify_error(stderr: str, pid: int, pyspy: str | None = None) -> _PySpyError:
    """Turn py-spy's stderr into a kind, a one-line message and a fix."""
    text = stderr.strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    first = next((ln[len("Error:"):].strip() for ln in lines if ln.startswith("Error:")),
                 lines[0] if lines else "py-spy failed with no message")
    if _PERM_RE.search(text):
        said = lines[0] if lines else text
        return _PySpyError("permission", f"py-spy has no ptrace rights on PID {pid}: {said}",
                           ptrace_fix(pyspy))
    low = text.lower()
    if "failed to find python version" in low or "failed to find a python interpreter" in low \
            or "doesn't look like a python" in low:
        return _PySpyError("not_python", f"PID {pid} is not a Python process",
                           native_tools_hint(pid))
    if "check that the process is running" in low or "no such process" in low \
            or "os error 3)" in low or "process exited" in low:
        return _PySpyError("exited", f"PID {pid} exited before it could be sampled")
    return _PySpyError("other", f"py-spy on PID {pid}: {first}")


async def _run(argv: Sequence[str], timeout: float) -> tuple[int, bytes, bytes]:
    """Run a child without a shell; kill it on timeout or when our task is cancelled."""
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=_child_env())
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except (asyncio.TimeoutError, asyncio.CancelledError):
        _kill(proc)
        try:
            await asyncio.wait_for(proc.wait(), 2.0)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            pass
        raise
    return proc.returncode if proc.returncode is not None else -1, out, err


def _kill(proc: asyncio.subprocess.Process, sig: int = signal.SIGKILL) -> None:
    if proc.returncode is None:
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass


_PYVER = re.compile(rb"python(\d)\.(\d+)")


def _python_before_311(pid: int, proc: str = "/proc") -> bool:
    """Whether the target runs CPython older than 3.11, from its executable's or its
    libpython's name (``python3.10``, ``libpython3.10.so``); unknown counts as not older."""
    names = []
    try:
        names.append(os.fsencode(os.readlink(f"{proc}/{pid}/exe")))
    except OSError:
        pass
    try:
        with open(f"{proc}/{pid}/maps", "rb") as f:
            names += [line for line in f.read().splitlines() if b"libpython" in line][:1]
    except OSError:
        pass
    for name in names:
        m = _PYVER.search(name)
        if m:
            return (int(m.group(1)), int(m.group(2))) < (3, 11)
    return False


def _read_cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    # setproctitle pads the title with spaces / NULs (vLLM's 'VLLM::EngineCore   ...')
    return " ".join(p.decode("utf-8", "replace") for p in raw.split(b"\0") if p).strip()


# ---------------------------------------------------------------------------------------
# Dump
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Frame:
    name: str
    filename: str
    line: int
    short_filename: str | None = None

    @property
    def where(self) -> str:
        return f"{self.short_filename or self.filename}:{self.line}"

    def text(self) -> str:
        return f"{self.name} ({self.where})"


@dataclass(slots=True)
class ThreadDump:
    pid: int
    tid: int              # Python thread id (pthread_t)
    os_tid: int | None    # kernel thread id, when py-spy could find it
    name: str | None
    active: bool
    owns_gil: bool
    frames: list[Frame]   # innermost first, as py-spy prints them

    @property
    def state(self) -> str:
        """py-spy's words: 'active+gil', 'active' or 'idle' (a GIL holder counts as active)."""
        if self.owns_gil:
            return "active+gil"
        return "active" if self.active else "idle"

    @property
    def tid_text(self) -> str:
        """The id py-spy prints: the OS thread id if known, else 0x<python id>."""
        return str(self.os_tid) if self.os_tid is not None else f"0x{self.tid:X}"

    @property
    def label(self) -> str:
        return f"{self.name or 'thread'} ({self.tid_text})"


@dataclass(slots=True)
class ProcessDump:
    pid: int
    role: str
    command: str
    threads: list[ThreadDump] = field(default_factory=list)
    error: str | None = None
    fix: str = ""

    @property
    def gil_holder(self) -> ThreadDump | None:
        return next((t for t in self.threads if t.owns_gil), None)

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(slots=True)
class DumpResult:
    processes: list[ProcessDump]
    time: float
    duration: float  # seconds the whole dump took (all processes, concurrently)
    txt_path: Path | None = None
    json_path: Path | None = None

    @property
    def threads(self) -> list[ThreadDump]:
        return [t for p in self.processes for t in p.threads]

    def to_dict(self) -> dict[str, Any]:
        return {"tool": "py-spy dump", "time": self.time, "duration": round(self.duration, 4),
                "processes": [{
                    "pid": p.pid, "role": p.role, "command": p.command, "error": p.error,
                    "fix": p.fix or None,
                    "threads": [{"tid": t.tid, "os_tid": t.os_tid, "name": t.name,
                                 "active": t.active, "owns_gil": t.owns_gil, "state": t.state,
                                 "frames": [{"name": f.name, "filename": f.filename,
                                             "line": f.line} for f in t.frames]}
                                for t in p.threads]} for p in self.processes]}

    def to_text(self) -> str:
        """py-spy's own text layout, one block per process, so it reads like `py-spy dump`."""
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.time))
        out: list[str] = [f"# infertop py-spy dump  {when}  ({self.duration * 1000:.0f} ms)"]
        for p in self.processes:
            out.append("")
            out.append(f"Process {p.pid} [{p.role or '?'}]: {p.command}")
            if p.error:
                out.append(f"  {p.error}")
                if p.fix:
                    out.append(f"  fix: {p.fix}")
                continue
            for t in p.threads:
                out.append(f'Thread {t.tid_text} ({t.state}): "{t.name or ""}"')
                out.extend(f"    {f.text()}" for f in t.frames)
        return "\n".join(out) + "\n"


def parse_dump_json(pid: int, data: Any) -> list[ThreadDump]:
    """Parse `py-spy dump --json` (an array of StackTrace, schema in metrics.md section 7)."""
    if not isinstance(data, list):
        raise ValueError("py-spy dump --json did not return a list")
    threads = []
    for tr in data:
        frames = [Frame(str(f.get("name", "?")), str(f.get("filename", "")),
                        int(f.get("line") or 0), f.get("short_filename"))
                  for f in tr.get("frames") or ()]
        threads.append(ThreadDump(
            pid=int(tr.get("pid") or pid), tid=int(tr.get("thread_id") or 0),
            os_tid=tr.get("os_thread_id"), name=tr.get("thread_name"),
            active=bool(tr.get("active")), owns_gil=bool(tr.get("owns_gil")), frames=frames))
    return threads


async def _dump_one(pyspy: str, pid: int, role: str, timeout: float,
                    nonblocking: bool) -> tuple[ProcessDump, _PySpyError | None]:
    command = _read_cmdline(pid)
    argv = [pyspy, "dump", "--json", "--pid", str(pid)]
    if nonblocking:
        argv.append("--nonblocking")
    try:
        rc, out, err = await _run(argv, timeout)
    except asyncio.TimeoutError:
        e = _PySpyError("other", f"py-spy dump of PID {pid} timed out after {timeout:g} s")
        return ProcessDump(pid, role, command, error=e.message), e
    except OSError as exc:  # py-spy vanished between find and exec, or is not executable
        raise CaptureError(f"cannot run py-spy ({pyspy}): {exc.strerror or exc}",
                           PYSPY_INSTALL_FIX) from exc
    if rc != 0:
        e = classify_error(err.decode("utf-8", "replace"), pid, pyspy)
        return ProcessDump(pid, role, command, error=e.message, fix=e.fix), e
    try:
        threads = parse_dump_json(pid, json.loads(out))
    except (ValueError, TypeError, AttributeError) as exc:
        e = _PySpyError("other", f"py-spy dump of PID {pid} gave unreadable output: {exc}")
        return ProcessDump(pid, role, command, error=e.message), e
    return ProcessDump(pid, role, command, threads), None


def _require_pyspy(pyspy: str | None) -> str:
    exe = pyspy or find_pyspy()
    if not exe:
        raise CaptureError("py-spy is not installed (not on PATH, not next to Python)",
                           PYSPY_INSTALL_FIX)
    return exe


async def dump_tree(pids: Iterable[tuple[int, str]], *, pyspy: str | None = None,
                    timeout: float = 10.0, nonblocking: bool = False) -> DumpResult:
    """`py-spy dump --json` of every (pid, role), concurrently.

    Non-Python processes and processes that exited get a per-process ``error`` (with the
    native-tools suggestion); if *every* attempt failed for lack of ptrace rights, raises
    CaptureError with the fix, since nothing useful can be shown.
    """
    exe = _require_pyspy(pyspy)
    first_role: dict[int, str] = {}
    for pid, role in pids:
        first_role.setdefault(_check_pid(pid), str(role))
    targets = list(first_role.items())
    if not targets:
        raise CaptureError("no server process to dump",
                           "start infertop with --pid PID, or a server URL whose port belongs "
                           "to a local process")
    t0, wall = time.perf_counter(), time.time()
    results = await asyncio.gather(*(_dump_one(exe, p, r, timeout, nonblocking)
                                     for p, r in targets))
    errors = [e for _, e in results if e is not None]
    if errors and len(errors) == len(results) and all(e.kind == "permission" for e in errors):
        raise CaptureError(errors[0].message, errors[0].fix)
    return DumpResult([d for d, _ in results], wall, time.perf_counter() - t0)


def save_dump(result: DumpResult, directory: Path | str, server: str) -> tuple[Path, Path]:
    """Write the dump as text and JSON (0600, atomically, both or neither)."""
    txt = capture_path(directory, server, "pyspy-dump", "txt", now=result.time)
    js = txt.with_suffix(".json")
    write_all_atomic({txt: result.to_text(), js: json.dumps(result.to_dict(), indent=1)})
    result.txt_path, result.json_path = txt, js
    return txt, js


# ---------------------------------------------------------------------------------------
# Record
# ---------------------------------------------------------------------------------------

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
    samples: int = 0                                   # on-CPU samples behind top_functions


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
    frames: list[Frame] = field(default_factory=list)           # shared frame table
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
            e = classify_error(err, runs[0].pid, exe) if err else _PySpyError(
                "other", "py-spy wrote no profile")
            raise CaptureError(e.message, e.fix)
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
                            ) -> tuple[list[Frame], list[tuple[str, str, list[list[int]]]]]:
    """py-spy speedscope file -> (frames, [(thread key, thread name, samples root-first)])."""
    data = json.loads(path.read_text())
    frames = [Frame(str(f.get("name", "?")), str(f.get("file") or ""), int(f.get("line") or 0))
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
    frame_index: dict[Frame, int] = {}
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
        r = mine[0] if mine else None
        if r is None or r.started_at is None:
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


def _func_key(f: Frame) -> str:
    return f"{f.name} ({_short(f.filename)})"


def summarize(result: RecordResult, top: int = 10) -> ProfileSummary:
    """Top functions by own (leaf) time, GIL-held share, idle share, per thread."""
    own: collections.Counter = collections.Counter()
    total = 0
    for counter in result.stacks.values():
        for stack, n in counter.items():
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
        per_thread=per_thread, per_process=per_process, samples=total)


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


# ---------------------------------------------------------------------------------------
# Low-rate GIL sampler (off by default)
# ---------------------------------------------------------------------------------------

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
        return GilAggregate(
            samples=n,
            gil_held_share=(sum(holders.values()) / n) if n else None,
            holder_share={k: v / n for k, v in holders.most_common()},
            active_share={k: v / n for k, v in act.most_common()},
            cost_mean_seconds=sum(costs) / len(costs) if costs else 0.0,
            cost_max_seconds=max(costs) if costs else 0.0,
            cpu_mean_seconds=sum(s.cpu_seconds for s in hist) / len(hist) if hist else 0.0,
            errors=len(hist) - n)

    async def run(self, pid: int, interval: float = 2.0, cancel: asyncio.Event | None = None,
                  on_sample: Callable[[GilSample], None] | None = None) -> None:
        """Sample every ``interval`` seconds until ``cancel`` is set or the process is gone."""
        cancel = cancel or asyncio.Event()
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
                       make_labels(base))]
        if agg.holder_share:
            top = next(iter(agg.holder_share))
            out.append(Reading("python.gil_holder", 1.0, "", make_labels(base), kind=Kind.INFO,
                               text=top))
        for thread, share in agg.active_share.items():
            out.append(Reading("python.thread_active_ratio", share, "ratio",
                               make_labels(base, thread=thread)))
        return out
