"""Who runs each GPU process: user, name and command line of the pids NVML lists, as
nvitop shows them, also for processes outside the server's tree (a training job sharing a
GPU, another team's server).

NVML reports host PIDs.  Inside a nested PID namespace (a container without --pid=host)
the same number can be another process here, so owners are only looked up when this
process sees the host's PID namespace; otherwise ``why_not`` says so and nothing is
guessed.  Each is labelled with its container or pod (probes/server/containers.py), so on
a node running several servers the memory pane says whose GPU process it is.  Command lines go through the same cleaning and redaction as the server's
(``clean_cmdline``): secrets never reach a reading, escapes never reach the terminal.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from infertop.model import Reading, make_labels
from infertop.probes.nvml.gpu import mk
from infertop.probes.server.containers import container_of
from infertop.probes.server.discovery import clean_cmdline
from infertop.probes.server.process import truncate
from infertop.textclean import clean

# the kernel's initial PID namespace has this fixed inode (PROC_PID_INIT_INO, Linux 3.8+);
# a container's own PID namespace has another (one run with --pid=host has this one)
INIT_PID_NS = "pid:[4026531836]"


def in_host_pid_namespace(proc: str = "/proc") -> bool:
    """True when this process lives in the host's PID namespace: NVML's pids name the
    same processes here.  (NSpid cannot tell: a container's own /proc shows one entry.)"""
    try:
        return os.readlink(f"{proc}/self/ns/pid") == INIT_PID_NS
    except OSError:
        return False


class GpuProcessOwners:
    """``process.gpu_owner`` readings for NVML's pids, cached per (pid, start time): a
    pid reused by another program is read again."""

    def __init__(self, proc: str = "/proc") -> None:
        self.host_ns = in_host_pid_namespace(proc)
        self.why_not = "" if self.host_ns else \
            "GPU process owners not read: infertop runs in a nested PID namespace (container)"
        self._cache: dict[tuple[int, float], Reading] = {}

    def readings(self, pids: Iterable[int]) -> list[Reading]:
        if not self.host_ns:
            return []
        try:
            import psutil
        except ImportError:
            return []
        out, cache = [], {}
        for pid in dict.fromkeys(pids):
            try:
                p = psutil.Process(pid)
                with p.oneshot():
                    key = (pid, p.create_time())
                    hit = self._cache.get(key)
                    if hit is None:
                        hit = self._read(psutil, p)
            except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
                continue        # gone, or not ours to read: the row says "–"
            cache[key] = hit
            out.append(hit)
        self._cache = cache     # only the pids still on a GPU
        return out

    @staticmethod
    def _read(psutil, p) -> Reading:
        def get(fn):
            try:
                return fn()
            except psutil.AccessDenied:
                return None
        user = get(p.username)
        name = clean(get(p.name) or "")
        argv = clean_cmdline(get(p.cmdline))      # secrets redacted, escapes made visible
        labels = {"pid": p.pid, "name": name}
        if user:
            labels["user"] = clean(str(user))[:32]
        box = container_of(p.pid)   # its container or pod: which server's, on a node
        if box is not None:
            labels["container"] = box.label
        return mk("process.gpu_owner", 1.0, make_labels(labels),
                  text=truncate(" ".join(argv)) if argv else name)
