"""Nsight Systems captures of a server that runs under ``nsys launch`` (the `n` key).

nsys cannot attach to a running process (docs/reference/metrics.md section 8): a live server can only be
profiled on demand if it was started under ``nsys launch`` (or ``nsys profile`` with a
capture range).  So the `n` key has three outcomes, chosen by ``plan_gpu_capture``:

1. the server runs under nsys -> ``nsys start``/``stop`` on its session for N seconds,
   then ``nsys stats`` -> top kernels, host<->device copy share, launch-overhead signs;
2. else the server has a profiler endpoint (vLLM with --profiler-config, SGLang) ->
   offer it behind a confirmation (probes/profiler_endpoint.py);
3. else -> the exact command line to restart this server under nsys.

Children run via ``asyncio.create_subprocess_exec`` only; arguments are the validated
session name, paths we built and numbers.
"""

from __future__ import annotations

import asyncio
import csv
import glob
import io
import os
import re
import shlex
import shutil
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infertop.probes.capture.files import CaptureError
from infertop.probes.capture.window import hold_window
from infertop.safefile import narrow_mode
from infertop.servers import registry

__all__ = [
    "Session", "KernelStat", "NsysSummary", "NsysResult", "GpuCapturePlan", "find_nsys",
    "nsys_sessions", "parse_sessions", "detect_nsys_launch", "launch_session_name",
    "nsys_capture", "parse_stats_csv", "summarize_stats", "restart_under_nsys_command",
    "plan_gpu_capture", "STATS_REPORTS",
]

STATS_REPORTS = ("cuda_gpu_kern_sum", "cuda_api_sum", "cuda_gpu_mem_time_sum")
NSYS_INSTALL_FIX = ("install the Nsight Systems CLI (apt install nsight-systems-cli from NVIDIA's "
                    "CUDA repository, or the CUDA toolkit's nsys) and put nsys on PATH")
_SESSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
SESSION_NAME = "infertop"


def find_nsys() -> str | None:
    """nsys on PATH, else the usual install places (CUDA toolkit, /opt/nvidia)."""
    found = shutil.which("nsys")
    if found:
        return found
    candidates = ["/usr/local/cuda/bin/nsys"] + sorted(
        glob.glob("/opt/nvidia/nsight-systems/*/bin/nsys")
        + glob.glob("/usr/local/cuda-*/bin/nsys"), reverse=True)
    return next((c for c in candidates if os.path.isfile(c) and os.access(c, os.X_OK)), None)


def _require_nsys(nsys: str | None) -> str:
    exe = nsys or find_nsys()
    if not exe:
        raise CaptureError("nsys (Nsight Systems) is not installed", NSYS_INSTALL_FIX)
    return exe


async def _run(argv: Sequence[str], timeout: float) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except (asyncio.TimeoutError, asyncio.CancelledError):
        if proc.returncode is None:
            try:
                proc.send_signal(signal.SIGKILL)
            except ProcessLookupError:
                pass
            else:
                # reap it (a transport left to the GC after its loop closed warns): SIGKILL
                # ends it at once, so this wait is short; a cancel still goes through
                try:
                    await asyncio.wait_for(proc.wait(), 5)
                except (asyncio.TimeoutError, asyncio.CancelledError):
                    pass
        raise
    return (proc.returncode if proc.returncode is not None else -1,
            out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))


# ---------------------------------------------------------------------------------------
# Sessions
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Session:
    name: str
    id: str = ""
    state: str = ""
    raw: str = ""


def parse_sessions(text: str) -> list[Session]:
    """Parse ``nsys sessions list``.

    The table's exact columns vary between nsys versions (we have seen ``ID TIME STATE
    LAUNCH NAME``); we key on the header names when there is a header and otherwise take
    the last column as the session name, which is where every version puts it.
    """
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    header: list[str] | None = None
    sessions: list[Session] = []
    for ln in lines:
        cols = ln.split()
        upper = [c.upper() for c in cols]
        if "NAME" in upper and header is None:
            header = upper
            continue
        if ln.lower().startswith(("no active", "there are no", "no sessions")):
            continue
        if header and len(cols) >= len(header):
            row = dict(zip(header, cols[:len(header) - 1] + [" ".join(cols[len(header) - 1:])]))
            name = row.get("NAME", cols[-1])
            sessions.append(Session(name, row.get("ID", ""), row.get("STATE", ""), ln))
        elif not header and cols and _SESSION_RE.match(cols[-1]):
            sessions.append(Session(cols[-1], cols[0] if len(cols) > 1 else "", "", ln))
    return [s for s in sessions if _SESSION_RE.match(s.name)]


async def nsys_sessions(*, nsys: str | None = None, timeout: float = 10.0) -> list[Session]:
    """The active nsys sessions on this machine (``nsys sessions list``)."""
    exe = _require_nsys(nsys)
    try:
        rc, out, err = await _run([exe, "sessions", "list"], timeout)
    except asyncio.TimeoutError as e:
        raise CaptureError(f"nsys sessions list did not answer in {timeout:g} s",
                           "check that the nsys daemon is healthy: nsys status") from e
    if rc != 0:
        raise CaptureError(f"nsys sessions list failed: {(err or out).strip()[:300]}",
                           "run `nsys sessions list` yourself to see why")
    return parse_sessions(out)


def _is_nsys(argv0: str) -> bool:
    return os.path.basename(argv0) in ("nsys", "nsys.exe")


def detect_nsys_launch(process_cmdlines: Iterable[Sequence[str]]) -> bool:
    """True if any command line (the server's tree and its ancestors) is ``nsys launch``
    or ``nsys profile``: then the server's CUDA calls are already instrumented."""
    for argv in process_cmdlines:
        if argv and _is_nsys(argv[0]) and any(a in ("launch", "profile") for a in argv[1:3]):
            return True
    return False


def launch_session_name(process_cmdlines: Iterable[Sequence[str]]) -> str | None:
    """The session named by ``nsys launch --session-new=NAME`` (or --session NAME)."""
    for argv in process_cmdlines:
        if not argv or not _is_nsys(argv[0]):
            continue
        for i, a in enumerate(argv):
            for flag in ("--session-new", "--session"):
                if a.startswith(flag + "="):
                    return a.split("=", 1)[1]
                if a == flag and i + 1 < len(argv):
                    return argv[i + 1]
    return None


# ---------------------------------------------------------------------------------------
# Stats
# ---------------------------------------------------------------------------------------

def _norm(h: str) -> str:
    """'Avg (ns)' -> 'avgns', 'Time (%)' -> 'time%', 'Num Calls' -> 'numcalls'."""
    return re.sub(r"[^a-z%]", "", h.lower())


_ALIASES = {"averagens": "avgns", "calls": "instances", "count": "instances",
            "numcalls": "instances", "operation": "name", "timepercent": "time%"}


def parse_stats_csv(text: str) -> list[dict[str, Any]]:
    """Rows of an ``nsys stats --format csv`` report, keyed by normalised header names
    (``time%``, ``totaltimens``, ``instances``, ``avgns``, ``medns``, ``name``...).

    Finds the header line itself (stdout may carry 'Processing [...]' lines and report
    titles first), accepts both "Avg (ns)" and the older "Average (ns)".
    """
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines)
                  if "Total Time" in ln and ("Name" in ln or "Operation" in ln)), None)
    if start is None:
        return []
    rows: list[dict[str, Any]] = []
    reader = csv.reader(io.StringIO("\n".join(lines[start:])))
    header = [_ALIASES.get(_norm(h), _norm(h)) for h in next(reader)]
    for cols in reader:
        if not cols or len(cols) < len(header):
            if rows:
                break  # a blank line ends the table (the next report may follow)
            continue
        row: dict[str, Any] = {}
        for h, v in zip(header, cols):
            if h == "name":
                row[h] = v
            else:
                try:
                    row[h] = float(v.replace(",", ""))
                except ValueError:
                    row[h] = v
        rows.append(row)
    return rows


@dataclass(frozen=True, slots=True)
class KernelStat:
    name: str
    time_share: float     # of all GPU kernel time
    total_ns: float
    instances: int
    avg_ns: float


@dataclass(slots=True)
class NsysSummary:
    top_kernels: list[KernelStat]
    memcpy_share: float | None           # host<->device copy time / (kernels + memory ops)
    launch_overhead_signs: list[str]
    kernel_time_ns: float = 0.0
    kernel_instances: int = 0
    memcpy_time_ns: float = 0.0


_LAUNCH_API = re.compile(r"^(cuda|cu)LaunchKernel(ExC|Ex)?(_v\d+)?$|^cudaLaunchCooperativeKernel")
_GRAPH_API = re.compile(r"^(cuda|cu)GraphLaunch")
_HD = re.compile(r"host-to-device|device-to-host|htod|dtoh", re.IGNORECASE)


def _num(row: dict[str, Any], key: str) -> float:
    try:
        return float(row.get(key) or 0)
    except (TypeError, ValueError):
        return 0.0


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.1f} ms"


def summarize_stats(kern: list[dict[str, Any]], api: list[dict[str, Any]],
                    mem: list[dict[str, Any]], top: int = 10) -> NsysSummary:
    k_total = sum(float(r.get("totaltimens") or 0) for r in kern)
    k_count = int(sum(float(r.get("instances") or 0) for r in kern))
    kernels = sorted(kern, key=lambda r: -float(r.get("totaltimens") or 0))
    top_k = [KernelStat(str(r.get("name", "?")),
                        float(r.get("totaltimens") or 0) / k_total if k_total else 0.0,
                        float(r.get("totaltimens") or 0), int(float(r.get("instances") or 0)),
                        float(r.get("avgns") or 0)) for r in kernels[:top]]
    mem_total = sum(float(r.get("totaltimens") or 0) for r in mem)
    hd = sum(float(r.get("totaltimens") or 0) for r in mem if _HD.search(str(r.get("name", ""))))
    denom = k_total + mem_total
    memcpy_share = hd / denom if denom else None

    signs: list[str] = []
    if k_count >= 1000 and k_total / k_count < 10_000:
        signs.append(f"kernels are short: {k_count} launches averaging "
                     f"{k_total / k_count / 1000:.1f} µs; the GPU likely idles between "
                     f"launches (CUDA graphs help)")
    short = sum(_num(r, "instances") for r in kern if _num(r, "avgns") < 5_000)
    if k_count >= 1000 and short / k_count >= 0.5:
        signs.append(f"{short / k_count:.0%} of kernel launches are kernels under 5 µs")
    launches = [r for r in api if _LAUNCH_API.match(str(r.get("name", "")))]
    launch_ns = sum(_num(r, "totaltimens") for r in launches)
    launch_n = int(sum(_num(r, "instances") for r in launches))
    graphs = int(sum(_num(r, "instances") for r in api if _GRAPH_API.match(str(r.get("name", "")))))
    if k_total and launch_ns >= 0.5 * k_total:
        signs.append(f"host time in kernel-launch calls ({_ms(launch_ns)}, {launch_n} calls) is "
                     f"{launch_ns / k_total:.0%} of GPU kernel time: the GPU waits on the CPU")
    if launch_n >= 1000 and graphs == 0:
        signs.append(f"no cudaGraphLaunch among {launch_n} kernel launches: CUDA graphs are off "
                     f"(eager mode, e.g. vLLM --enforce-eager)")
    elif graphs:
        signs.append(f"CUDA graphs in use: {graphs} graph launches")
    if memcpy_share is not None and memcpy_share >= 0.2:
        signs.append(f"host<->device copies take {memcpy_share:.0%} of GPU busy time")
    return NsysSummary(top_k, memcpy_share, signs, k_total, k_count, hd)


# ---------------------------------------------------------------------------------------
# Capture
# ---------------------------------------------------------------------------------------

@dataclass(slots=True)
class NsysResult:
    session: str
    report_path: Path | None = None
    csv_paths: dict[str, Path] = field(default_factory=dict)
    summary: NsysSummary | None = None
    error: str | None = None
    fix: str = ""
    cancelled: bool = False
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def _check_session(session: str | Session) -> str:
    name = session.name if isinstance(session, Session) else str(session)
    if not _SESSION_RE.match(name):
        raise CaptureError(f"not a valid nsys session name: {name!r}",
                           "pick the session from `nsys sessions list`")
    return name


async def nsys_capture(session: str | Session, seconds: float, out_base: Path | str,
                       cancel: asyncio.Event | None = None, *, nsys: str | None = None,
                       progress: Callable[[float], None] | None = None,
                       report_timeout: float = 300.0, stats_timeout: float = 600.0,
                       stop_timeout: float = 60.0) -> NsysResult:
    """Open a collection window on ``session`` for ``seconds``, wait for the report, run
    ``nsys stats`` and summarise it.  Setting ``cancel`` closes the window early (the
    report still covers the time so far).  Errors land in ``result.error`` with a fix."""
    exe = _require_nsys(nsys)
    name = _check_session(session)
    if not 1 <= float(seconds) <= 3600:
        raise CaptureError(f"nsys window must be 1..3600 s, got {seconds!r}",
                           "use the default 10 s")
    base = Path(out_base)
    rep = base.with_name(base.name + ".nsys-rep")
    res = NsysResult(name)
    stale = _stat_key(rep)  # a report already there (same name) must not pass for ours
    rc, out, err = await _run([exe, "start", f"--session={name}", f"--output={base}",
                               "--force-overwrite=true", "--sample=none", "--cpuctxsw=none"], 30)
    if rc != 0:
        res.error = f"nsys start failed: {(err or out).strip()[:400]}"
        res.fix = (f"check the session with `nsys sessions list`; nsys older than 2025.x has no "
                   f"--session on start: restart the server with {SESSION_NAME!r} as described, or "
                   f"run `nsys stop --session={name}` if a collection is already open")
        return res
    t0 = time.monotonic()
    try:
        await hold_window(seconds, cancel, progress)
    finally:
        res.cancelled = bool(cancel is not None and cancel.is_set())
        res.seconds = time.monotonic() - t0
        # its own bound: the stop only asks the daemon to close the window (the report is
        # waited for below); sharing report_timeout let a slow start of `nsys stop` on a
        # busy box escape as a TimeoutError
        try:
            rc, out, err = await _run([exe, "stop", f"--session={name}"], stop_timeout)
        except asyncio.TimeoutError:
            rc, out, err = -1, "", f"no answer within {stop_timeout:g} s"
    if rc != 0:
        res.error = f"nsys stop failed: {(err or out).strip()[:400]}"
        res.fix = f"run `nsys stop --session={name}` by hand; the report goes to {rep}"
        return res
    if not await _wait_for_file(rep, report_timeout, stale=stale):
        res.error = f"nsys wrote no report at {rep} within {report_timeout:g} s"
        res.fix = ("if the server runs as another user it cannot write into the capture "
                   "directory (0700): use --capture-dir with a directory it can write")
        return res
    res.report_path = rep
    _private(rep)
    rc, out, err = await _run([exe, "stats", "--report", ",".join(STATS_REPORTS),
                               "--format", "csv", "--output", str(base), "--force-export=true",
                               str(rep)], stats_timeout)
    rows: dict[str, list[dict[str, Any]]] = {}
    for r in STATS_REPORTS:
        p = base.with_name(f"{base.name}_{r}.csv")
        if p.exists():
            _private(p)
            res.csv_paths[r] = p
            rows[r] = parse_stats_csv(p.read_text(errors="replace"))
        else:
            res.notes.append(f"nsys stats wrote no {r} table (no such activity, or an nsys "
                             f"older than 2021.x that names it differently)")
    sqlite = base.with_name(base.name + ".sqlite")
    if sqlite.exists():
        _private(sqlite)
    if rc != 0 and not rows:
        res.error = f"nsys stats failed: {(err or out).strip()[:400]}"
        res.fix = f"run: nsys stats {shlex.quote(str(rep))}"
        return res
    res.summary = summarize_stats(rows.get("cuda_gpu_kern_sum", []), rows.get("cuda_api_sum", []),
                                  rows.get("cuda_gpu_mem_time_sum", []))
    if progress:
        progress(1.0)
    return res


def _private(p: Path) -> None:
    """nsys wrote it: narrow it to 0600 (no link followed, never a file not ours)."""
    narrow_mode(p)


def _stat_key(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


async def _wait_for_file(path: Path, timeout: float,
                         stale: tuple[int, int, int] | None = None) -> bool:
    """nsys writes the report after `stop` returns on some versions: wait until the file
    exists (and is not the ``stale`` one that was there before) and its size holds still
    for one poll."""
    end = time.monotonic() + timeout
    last = -1
    while time.monotonic() < end:
        key = _stat_key(path)
        size = key[2] if key is not None and key != stale else -1
        if size > 0 and size == last:
            return True
        last = size
        await asyncio.sleep(0.25)
    return False


# ---------------------------------------------------------------------------------------
# Restart advice and the `n` decision
# ---------------------------------------------------------------------------------------

def restart_under_nsys_command(cmdline: Sequence[str], server_kind: str | None = None,
                               cwd: str | None = None) -> str:
    """The server's own command line, wrapped in ``nsys launch`` (shell-quoted); run in
    the server's own directory (``cwd``) when known: its argv may be relative to it
    ("./serve.sh", "models/llama"), and the user pastes it wherever their shell is.

    The launch only instruments; nothing is collected until infertop's `n` runs
    ``nsys start``/``stop`` on the session, so the server runs at full speed meanwhile.
    """
    argv = [str(a) for a in cmdline if str(a) != ""]
    if not argv:
        raise ValueError("empty command line")
    wrapped = ["nsys", "launch", f"--session-new={SESSION_NAME}", "--trace=cuda,nvtx",
               "--cuda-graph-trace=node", "--trace-fork-before-exec=true", "--wait=all", *argv]
    cmd = shlex.join(wrapped)
    k = registry.kind(server_kind)
    if k is not None and k.nsys_env:
        # what the kind needs for nsys to follow its workers (vLLM: spawn them)
        cmd = f"{k.nsys_env} {cmd}"
    if cwd and cwd.isprintable():     # a path with control characters is not pasted
        cmd = f"cd {shlex.quote(cwd)} && {cmd}"
    return cmd


@dataclass(slots=True)
class GpuCapturePlan:
    mode: str                    # "nsys" | "endpoint" | "restart"
    message: str
    session: str | None = None
    command: str | None = None   # restart command line (mode "restart")
    fix: str = ""


def _has_profiler_endpoint(kind: str, cmdlines: Iterable[Sequence[str]]) -> bool:
    """Whether the kind serves /start_profile for these command lines (SGLang always,
    vLLM with --profiler-config: each kind's ``profiler``)."""
    k = registry.kind(kind)
    return k is not None and k.profiler is not None and k.profiler.served(list(cmdlines))


async def plan_gpu_capture(process_cmdlines: Sequence[Sequence[str]], root_cmdline: Sequence[str],
                           server_kind: str = "", *, nsys: str | None = None,
                           cwd: str | None = None) -> GpuCapturePlan:
    """Decide what `n` does for this server (see the module docstring)."""
    exe = nsys or find_nsys()
    launched = detect_nsys_launch(process_cmdlines)
    if exe:
        name = launch_session_name(process_cmdlines)
        try:
            sessions = await nsys_sessions(nsys=exe)
        except CaptureError:
            sessions = []
        if name is None and sessions and launched:
            name = sessions[0].name
        elif name is None and len(sessions) == 1:
            name = sessions[0].name  # a lone session on this machine: most likely ours
        if name and (launched or any(s.name == name for s in sessions)):
            return GpuCapturePlan("nsys", f"server runs under nsys session {name!r}", session=name)
    if _has_profiler_endpoint(server_kind, process_cmdlines):
        return GpuCapturePlan("endpoint", f"{server_kind} offers /start_profile and /stop_profile")
    try:
        cmd = restart_under_nsys_command(root_cmdline, server_kind, cwd)
    except ValueError:
        cmd = None
    why = "nsys is not installed" if not exe else "this server was not started under nsys"
    fix = "" if exe else NSYS_INSTALL_FIX
    return GpuCapturePlan("restart", f"{why}; nsys cannot attach to a running process. "
                          f"Restart the server under nsys, then press n again",
                          command=cmd, fix=fix)
