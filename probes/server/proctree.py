"""Who descends from the server's root, kept current without reading every process each tick.

psutil's ``children(recursive=True)`` reads ``/proc/PID/stat`` of every process on the host
(its ppid_map) to find one tree: on a GPU box with hundreds of processes that was the
process probe's biggest cost, so it ran only every few seconds and a new child could take
that long to show.  ``ProcTree`` keeps a table pid -> (ppid, start time) instead and
updates it only as the host changes:

- ``/proc/stat``'s ``processes`` line counts every task the kernel ever created.  When it
  has not moved since the last look, no process can have joined any tree: nothing to do.
- When it moved, ``/proc`` is listed (one directory read) and only the new pids' stat
  files are read; pids that left are dropped, and the pids they were parent to are read
  again (an orphan is re-parented, to init or a subreaper).
- A full re-read when asked (a member exited or turned zombie: whom its children now
  belong to is read anew), when more tasks were created than could leave a pid unused
  (``REUSE_SAFE``: a pid can be reused only after the kernel's cyclic allocator came
  around), and every ``FULL_EVERY`` seconds as a guard.

So a new child shows the tick after it was created, an exiting one the tick its read
fails.  Descendants are walked as psutil walks them (same order; a "child" that started
before the root is a reused pid, left out).  Also here: the lean reads of ``/proc/stat``
(host CPU times and the task counter in one read) and ``/proc/meminfo``.
"""

from __future__ import annotations

import os
from collections import defaultdict

FULL_EVERY = 60.0      # seconds between full re-reads (a guard; nothing is known to need it)
REUSE_SAFE = 1000      # tasks created since the last look above which pids may be reused


def read_proc_file(path: str, size: int = 4096) -> bytes:
    """A /proc file's bytes in three system calls (open, read, close; more reads only for
    a file longer than ``size``).  Python's open() adds fstat, ioctl and lseek calls, and
    each call lets go of the GIL: with the screen's thread busy, every one may cost this
    thread a wait and a switch.  OSError as open() raises it."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.read(fd, size)
        if len(data) < size:
            return data   # a short read: /proc's seq files give all they have at once
        chunks = [data]
        while True:
            more = os.read(fd, size)
            if not more:
                return b"".join(chunks)
            chunks.append(more)
    finally:
        os.close(fd)


def stat_fields(data: bytes) -> list[bytes]:
    """The fields of a /proc/PID/stat line after the comm (state first): the comm sits in
    parentheses and may itself hold ')' and spaces, so split after the last ')'."""
    return data[data.rfind(b")") + 2:].split()


def read_stat_start(pid: int, proc: str = "/proc") -> tuple[int, int] | None:
    """(ppid, start time in clock ticks since boot) from /proc/PID/stat; None if gone."""
    try:
        data = read_proc_file(f"{proc}/{pid}/stat", 1024)
    except OSError:
        return None
    rest = stat_fields(data)
    try:
        return int(rest[1]), int(rest[19])
    except (IndexError, ValueError):
        return None


# clock ticks a second: /proc/PID/stat's CPU times are counted in them
CLOCK_TICKS = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0


def read_thread_times(pid: int, proc: str = "/proc") -> list[tuple[int, float]]:
    """(tid, user + system CPU seconds) of each of pid's threads, as psutil's threads()
    gives them (tids in order) in a third of its system calls: a vLLM tree has hundreds
    of threads, read every tick.  A thread that exits meanwhile is left out;
    FileNotFoundError when the process is gone, PermissionError when it may not be read."""
    out = []
    for tid in sorted(os.listdir(f"{proc}/{pid}/task"), key=lambda t: (len(t), t)):
        try:
            data = read_proc_file(f"{proc}/{pid}/task/{tid}/stat", 1024)
        except (FileNotFoundError, ProcessLookupError):
            continue   # the thread exited after the listing
        rest = stat_fields(data)
        try:
            out.append((int(tid), (int(rest[11]) + int(rest[12])) / CLOCK_TICKS))
        except (IndexError, ValueError):
            continue
    return out


# /proc/PID/stat's state letter -> psutil's status words (psutil.STATUS_*)
_STATES = {"R": "running", "S": "sleeping", "D": "disk-sleep", "T": "stopped",
           "t": "tracing-stop", "Z": "zombie", "X": "dead", "x": "dead", "K": "wake-kill",
           "W": "waking", "I": "idle", "P": "parked"}
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def read_member(pid: int, proc: str = "/proc") -> dict[str, object]:
    """What the process probe reads of a tree member every tick, as psutil's oneshot gives
    it (status word, user+system CPU seconds, threads, RSS bytes, (voluntary, involuntary)
    context switches), from stat, statm and status in 9 system calls instead of ~27.
    A file we may not read leaves its keys out and names itself under "denied";
    FileNotFoundError/ProcessLookupError when the process is gone."""
    out: dict[str, object] = {}
    denied: list[str] = []
    try:
        stat = read_proc_file(f"{proc}/{pid}/stat", 1024)
        rest = stat_fields(stat)
        letter = rest[0].decode("ascii", "replace")
        out["status"] = _STATES.get(letter, "?")
        out["cpu"] = (int(rest[11]) + int(rest[12])) / CLOCK_TICKS
        out["threads"] = int(rest[17])
    except (PermissionError, IndexError, ValueError):
        denied.append("stat")
    try:
        out["rss"] = int(read_proc_file(f"{proc}/{pid}/statm", 256).split()[1]) * _PAGE
    except (PermissionError, IndexError, ValueError):
        denied.append("statm")
    try:
        status = read_proc_file(f"{proc}/{pid}/status")
        vol = status.split(b"\nvoluntary_ctxt_switches:", 1)[1].split(None, 1)[0]
        invol = status.split(b"\nnonvoluntary_ctxt_switches:", 1)[1].split(None, 1)[0]
        out["ctx"] = (int(vol), int(invol))
    except PermissionError:
        denied.append("status")
    except (IndexError, ValueError):
        denied.append("status")   # a kernel without the counters: said as unreadable
    out["denied"] = denied
    return out


def read_cpu_and_tasks(proc: str = "/proc") -> tuple[list[int], int | None] | None:
    """The host's aggregate ``cpu`` line (clock ticks: user nice system idle iowait irq
    softirq steal guest guest_nice, as many as the kernel has) and the ``processes``
    counter (tasks created since boot), from one read of /proc/stat; None if unreadable."""
    try:
        data = read_proc_file(f"{proc}/stat", 65536)
    except OSError:
        return None
    first, _, _ = data.partition(b"\n")
    if not first.startswith(b"cpu "):
        return None
    try:
        fields = [int(x) for x in first.split()[1:11]]
    except ValueError:
        return None
    tasks = None
    at = data.find(b"\nprocesses ")
    if at >= 0:
        end = data.find(b"\n", at + 1)
        try:
            tasks = int(data[at + 11:end if end > 0 else None])
        except ValueError:
            tasks = None
    return fields, tasks


def read_meminfo(proc: str = "/proc") -> tuple[int, int] | None:
    """(MemTotal, MemAvailable) in bytes from /proc/meminfo; None when unreadable or an
    old kernel without MemAvailable (the caller asks psutil, which estimates it)."""
    try:
        data = read_proc_file(f"{proc}/meminfo")
    except OSError:
        return None
    got: dict[bytes, int] = {}
    for line in data.split(b"\n"):
        if line.startswith(b"MemTotal:") or line.startswith(b"MemAvailable:"):
            parts = line.split()
            try:
                got[parts[0]] = int(parts[1]) * 1024   # kB
            except (IndexError, ValueError):
                return None
            if len(got) == 2:
                return got[b"MemTotal:"], got[b"MemAvailable:"]
    return None


def listed_pids(proc: str = "/proc") -> set[int] | None:
    try:
        return {int(n) for n in os.listdir(proc) if n.isdigit()}
    except OSError:
        return None


class ProcTree:
    """pid -> (ppid, start ticks) of every process on the host, updated as it changes."""

    def __init__(self, proc: str = "/proc") -> None:
        self.proc = proc
        self._table: dict[int, tuple[int, int]] = {}
        self._children: dict[int, list[int]] | None = None   # built from _table on demand
        self._tasks: int | None = None    # /proc/stat processes at the last look
        self._full_at: float | None = None
        self.full_reads = 0               # for tests and benchmarks
        self.listings = 0

    def update(self, tasks: int | None, now: float, full: bool = False) -> bool:
        """Bring the table up to date; ``tasks`` is /proc/stat's counter read this tick
        (None: unknown, list every time).  False when /proc cannot be listed."""
        if self._full_at is None or now - self._full_at >= FULL_EVERY:
            full = True
        if not full and tasks is not None and tasks == self._tasks:
            return True   # no task was created on the host since the last look
        listed = listed_pids(self.proc)
        if listed is None:
            return False
        self.listings += 1
        table = self._table
        if full or self._tasks is None or tasks is None or tasks - self._tasks >= REUSE_SAFE:
            table = {}
            to_read = listed
            self.full_reads += 1
            self._full_at = now
        else:
            gone = table.keys() - listed
            for pid in gone:
                del table[pid]
            to_read = listed - table.keys()
            if gone:   # their orphans have another parent now
                to_read |= {pid for pid, (ppid, _) in table.items() if ppid in gone}
        for pid in to_read:
            got = read_stat_start(pid, self.proc)
            if got is None:
                table.pop(pid, None)   # exited while we listed
            else:
                table[pid] = got
        self._table = table
        self._children = None
        self._tasks = tasks
        return True

    def start_of(self, pid: int) -> int | None:
        """pid's start time (clock ticks since boot) as the table has it."""
        got = self._table.get(pid)
        return got[1] if got is not None else None

    def descendants(self, root: int) -> list[int]:
        """The root's descendants, in psutil's order (children(recursive=True)); a
        process that started before the root is a reused pid, not a child."""
        children = self._children
        if children is None:
            children = defaultdict(list)
            for pid in sorted(self._table):
                children[self._table[pid][0]].append(pid)
            self._children = children
        start = self._table.get(root, (0, 0))[1]
        out: list[int] = []
        seen: set[int] = set()
        stack = [root]
        while stack:
            pid = stack.pop()
            if pid in seen:
                continue   # a cycle can only come from reused pids: walk each once
            seen.add(pid)
            for kid in children.get(pid, ()):
                if self._table[kid][1] >= start:
                    out.append(kid)
                    stack.append(kid)
        return out
