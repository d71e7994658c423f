"""``p``: a py-spy dump of every Python process of the server tree (blocking mode: one
short pause gives consistent stacks and exact thread activity)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infertop.probes.capture.files import CaptureError, capture_path, write_all_atomic
from infertop.probes.capture.pyspy_run import (
    PYSPY_INSTALL_FIX,
    _check_pid,
    _PySpyError,
    _read_cmdline,
    _run,
    classify_error,
    find_pyspy,
)


@dataclass(frozen=True, slots=True)
class StackFrame:
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
    frames: list[StackFrame]   # innermost first, as py-spy prints them

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
    """Parse `py-spy dump --json` (an array of StackTrace, schema in docs/reference/metrics.md section 7)."""
    if not isinstance(data, list):
        raise ValueError("py-spy dump --json did not return a list")
    threads = []
    for tr in data:
        frames = [StackFrame(str(f.get("name", "?")), str(f.get("filename", "")),
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


