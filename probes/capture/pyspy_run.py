"""Finding py-spy, running it as a child (never a shell), and turning its errors into
the exact fix (permissions, containers, not a Python process).  Shared by dump, record and
the GIL sampler."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    # setproctitle pads the title with spaces / NULs (vLLM's 'VLLM::EngineCore   ...');
    # clean_cmdline redacts secrets (--api-key ...) before the dump files keep them
    from infertop.probes.server.discovery import clean_cmdline
    return " ".join(clean_cmdline(p.decode("utf-8", "replace") for p in raw.split(b"\0"))).strip()


