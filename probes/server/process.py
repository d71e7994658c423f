"""The server's process tree: CPU per process and per thread, memory, context switches.

One psutil pass per tick over the server's root and its descendants.  CPU is a rate of
``cpu_times()`` between ticks (psutil's ``cpu_percent(interval)`` would block the probe's
thread for the interval), so the first tick of a process has no CPU rate (NODATA).
Thread names come from ``/proc/PID/task/TID/comm`` (psutil's ``threads()`` has only times);
Python-level thread names are invisible here (py-spy shows them).

A process or thread that exits while we read it is skipped, never reported as an error:
in a live tree that is normal (compile workers, tokenizer pools come and go).  A process we
may not read (another user's) keeps what we could read; the rest are ERROR readings that say
how to fix it.

Also here: the /proc side of matching NVML's process list to the tree (``read_nspids``,
``ns_pid_aliases``, ``visible_pids``), with the matching itself pure (``map_gpu_pids``).
"""

from __future__ import annotations

import functools
import math
import os
import pwd
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from infertop.meta import ProcessMeta
from infertop.model import Capability, Reading, Sample, Status
from infertop.pidmap import map_gpu_pids  # noqa: F401  (re-exported)
from infertop.probes.base import BlockingProbe, sample
from infertop.probes.registry import ProbeSpec, register
from infertop.probes.server import discovery
from infertop.probes.server.discovery import (
    ROOT_ROLES,
    ServerProcess,
    classify,
    clean_cmdline,
    is_server_kind,
    looked_for,
    server_settings,
)
from infertop.probes.server.host_top import NAME_MAX, SCAN_AT, HostTopCpu
from infertop.probes.server.model_config import ModelConfigReader
from infertop.probes.server.proctree import (
    ProcTree,
    read_cpu_and_tasks,
    read_member,
    read_meminfo,
    read_stat_start,
    read_thread_times,
)
from infertop.textclean import clean

CMDLINE_MAX = 300


_reading = Reading.of   # the unit and kind its key is declared with


def _denied_reason(pid: int) -> str:
    return f"permission denied reading {pid} (run as the server's user or root)"


def read_comm(pid: int, tid: int, proc: str = "/proc") -> str | None:
    """A thread's OS name (prctl/pthread_setname_np), or None if the thread is gone."""
    try:
        with open(f"{proc}/{pid}/task/{tid}/comm", "rb") as f:
            return clean(f.read(64).decode("utf-8", "replace").rstrip("\n"))
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
        return None
    except PermissionError:
        return "?"


def truncate(text: str, limit: int = CMDLINE_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---- containers and PID namespaces --------------------------------------------------------

_CGROUP_HINTS = ("docker", "kubepods", "containerd", "libpod", "lxc", "crio")


def detect_container(proc: str = "/proc", root: str = "/",
                     environ: Mapping[str, str] | None = None) -> tuple[bool, str]:
    """(in a container?, why).  Any one hint is enough; none readable means "no"."""
    env = os.environ if environ is None else environ
    try:
        mine, init = os.readlink(f"{proc}/self/ns/pid"), os.readlink(f"{proc}/1/ns/pid")
        if mine != init:
            return True, "PID namespace differs from init's"
    except OSError:
        pass
    for marker in (".dockerenv", "run/.containerenv"):
        if os.path.exists(os.path.join(root, marker)):
            return True, f"/{marker} exists"
    if env.get("container"):
        return True, f"container={env['container']} in the environment"
    try:
        cg = Path(proc, "1", "cgroup").read_text()
        for hint in _CGROUP_HINTS:
            if hint in cg:
                return True, f"init's cgroup mentions {hint}"
    except OSError:
        pass
    ns = read_nspids("self", proc)
    if ns and len(ns) > 1:
        return True, "nested PID namespace (NSpid has several entries)"
    return False, ""


def read_nspids(pid: int | str, proc: str = "/proc") -> list[int] | None:
    """The ``NSpid:`` line of /proc/PID/status: this pid in each PID namespace, from the
    namespace of this /proc (first) down to the process's own (last).  None if unreadable."""
    try:
        with open(f"{proc}/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return [int(x) for x in line.split()[1:]]
    except (OSError, ValueError):
        return None
    return None


def ns_pid_aliases(pids: Iterable[int], proc: str = "/proc",
                   cache: dict[int, list[int] | None] | None = None) -> dict[int, int]:
    """Every other pid a tree process is known by (in nested namespaces) -> its pid here.
    ``cache``: pid -> its NSpid line, read once (a process keeps its pids for its life)."""
    out: dict[int, int] = {}
    for pid in pids:
        if cache is None:
            nspids = read_nspids(pid, proc)
        else:
            if pid not in cache:
                cache[pid] = read_nspids(pid, proc)
            nspids = cache[pid]
        for alias in nspids or ():
            if alias != pid:
                out.setdefault(alias, pid)
    return out


def visible_pids(proc: str = "/proc") -> set[int]:
    try:
        return {int(n) for n in os.listdir(proc) if n.isdigit()}
    except OSError:
        return set()


# ---- the probe ----------------------------------------------------------------------------


@functools.lru_cache(maxsize=512)
def user_name(uid: int) -> str:
    """A uid's login name, as psutil's username() gives it, looked up once per uid:
    getpwuid is an NSS call (sssd, LDAP: milliseconds) and this runs every tick for every
    process of the server."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)

class ProcessProbe(BlockingProbe):
    """Readings for the inference server's process tree, plus host CPU and memory.

    ``pid``/``url`` choose the server as ``discovery.find_server`` does; with neither, the
    probe looks for one by name, again every ``rediscover_every`` seconds while none is
    found.  ``locate`` and ``clock`` are for tests.
    """

    name = "process"

    def __init__(self, *, pid: int | None = None, url: str | None = None,
                 max_threads_per_process: int = 20, rediscover_every: float = 5.0,
                 locate: Callable[..., tuple[ServerProcess | None, str]] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 host_top_at: float = SCAN_AT) -> None:
        super().__init__()
        self.pid, self.url = pid, url
        self.max_threads = max(0, max_threads_per_process)
        self.rediscover_every = rediscover_every
        self._locate = locate or discovery.locate
        self._clock = clock
        self.server: ServerProcess | None = None
        self._server_ctime: float | None = None
        self._why = ""                 # why discovery found no server
        self._exited = ""              # "server pid N exited", until another server is found
        self._pid_gone = False         # --pid exited: never follow a reused pid
        self._next_discovery = -math.inf
        self._prev_cpu: dict[tuple[int, float], tuple[float, float]] = {}
        self._prev_thr: dict[tuple[int, float], dict[int, float]] = {}
        self._prev_host: tuple[float, float] | None = None
        self._container: tuple[bool, str] | None = None
        self.tree: list[int] = []
        # The tree's members, every tick, from a pid table that follows the host's process
        # creations (proctree.py: a new child shows the tick after it started) instead of
        # psutil's children(recursive=True), which reads every process's /proc/PID/stat.
        # Where /proc cannot be read that way (not Linux), children() it is, every
        # ``rediscover_every`` seconds (or when a member exits).  The same psutil.Process
        # objects are reused from tick to tick either way.
        self._ptree: ProcTree | None = ProcTree()
        self._tasks: int | None = None      # /proc/stat's task counter, read this tick
        self._tree_dirty = False            # a member exited: re-read whom its kids belong to
        self._procs: dict[int, tuple[int, Any]] = {}   # pid -> (start ticks, psutil.Process)
        self._zombies: set[int] = set()     # members seen exited but not reaped
        self._members: list[Any] = []
        self._members_root: int | None = None
        self._members_at = -math.inf
        self._comm: dict[tuple[int, int], str] = {}   # thread names seldom change
        # what a member is (name, user, parent, cleaned command line, kind, role; the pids
        # it has in nested namespaces): read and cleaned once per ``rediscover_every``
        # seconds, not every tick (a real vLLM tree: 2.2 ms a tick, a third of it
        # cleaning, redacting and classifying the same command lines)
        self._static: dict[tuple[int, float], tuple] = {}
        self._described_at = -math.inf
        self._nspids: dict[int, list[int] | None] = {}
        self._settings: tuple[tuple, dict[str, str]] = ((), {})
        self._model_config = ModelConfigReader()
        self._top = HostTopCpu(clock=clock, at=host_top_at)   # thresholds.host_top_scan_at

    # -- lifecycle
    def open_blocking(self) -> Capability:
        try:
            import psutil  # noqa: F401
        except ImportError:
            return Capability(self.name, False, "psutil is not installed (pip install psutil)")
        return Capability(self.name, True, "", frozenset({"process", "threads", "host"}))

    def collect_blocking(self) -> Sample:
        started = time.perf_counter()
        try:
            import psutil
        except ImportError:
            return sample(self.name, [], status=Status.ERROR, started=started,
                          reason="psutil is not installed (pip install psutil)")
        if self._container is None:
            self._container = detect_container()
        readings = self._host(psutil)
        readings += self._top_consumers(readings)
        server = self._ensure_server(psutil)
        meta = ProcessMeta(in_container=self._container[0],
                           in_container_why=self._container[1] if self._container[0] else "")
        tree = self._tree(psutil, server) if server else None
        if server is None or tree is None:
            self.tree = []
            self._prev_cpu.clear()
            self._prev_thr.clear()
            why = "; ".join(w for w in (self._exited, self._why) if w)
            meta = replace(meta, server=None, tree=(), looked_for=looked_for(), reason=why)
            return sample(self.name, readings, meta=meta, started=started, reason=why)
        seen: set[tuple[int, float]] = set()
        pids = []
        entry_argv: list[str] | None = None
        for proc in tree:
            got = self._read_process(psutil, proc, server, seen)
            if got is None:
                continue
            got_readings, kind, role, argv = got
            readings.extend(got_readings)
            pids.append(proc.pid)
            # settings come from the server's entry point (the root, or under a wrapper
            # script the first api_server/launcher/server of the server's kind)
            if entry_argv is None and kind == server.kind and role in ROOT_ROLES:
                entry_argv = argv
        for key in set(self._prev_cpu) - seen:   # forget processes that left the tree
            self._prev_cpu.pop(key, None)
            self._prev_thr.pop(key, None)
        argv_key = (server.kind, tuple(entry_argv or ()))
        if self._settings[0] != argv_key:     # parsed once per command line
            self._settings = (argv_key, server_settings(server.kind, entry_argv or []))
        settings = self._settings[1]
        for name, value in settings.items():
            readings.append(_reading("server.setting", 1.0, {"name": name}, text=value))
        # the model's shape for the speed-of-light estimate (cached; read once per model)
        readings += self._model_config.readings(settings, pid=server.pid)
        self.tree = pids
        aliases = self._aliases(pids)
        # pid_aliases only when the tree lives in a nested PID namespace
        meta = replace(meta, server=server.to_meta(), tree=tuple(pids),
                       pid_aliases=tuple(sorted(aliases.items())))
        return sample(self.name, readings, meta=meta, started=started)

    def _aliases(self, pids: list[int]) -> dict[int, int]:
        """ns_pid_aliases of the tree, each member's NSpid line read once (kept in
        ``_nspids``, which the description refresh clears)."""
        return ns_pid_aliases(pids, cache=self._nspids)

    # -- server discovery and liveness
    @staticmethod
    def _started(psutil, pid: int) -> float | None:
        """When pid started (clock ticks from /proc/PID/stat; psutil's create_time where
        that cannot be read): the same pid with another start is another process.
        NoSuchProcess when it is gone, None when it exists but may not be read."""
        got = read_stat_start(pid)
        if got is not None:
            return float(got[1])
        try:
            return psutil.Process(pid).create_time() + 1e12   # never equal to a tick count
        except psutil.AccessDenied:
            return None

    def _ensure_server(self, psutil) -> ServerProcess | None:
        now = self._clock()
        if self.server is not None:
            try:
                started = self._started(psutil, self.server.pid)
                # same pid and same start time: not a new process that reused the pid
                alive = started is None or self._server_ctime is None \
                    or started == self._server_ctime
            except psutil.NoSuchProcess:
                alive = False
            if alive:
                return self.server
            self._drop(f"server pid {self.server.pid} exited")
            return None
        if self._pid_gone or now < self._next_discovery:
            return None
        self._next_discovery = now + self.rediscover_every
        try:
            found, why = self._locate(self.pid, self.url)
        except Exception as e:  # a discovery bug must not kill the host readings
            found, why = None, f"server discovery failed: {type(e).__name__}: {e}"
        if found is None:
            self._why = why
            return None
        try:
            self._server_ctime = self._started(psutil, found.pid)
        except psutil.NoSuchProcess:
            self._why = f"server pid {found.pid} exited while being found"
            return None
        self.server, self._why, self._exited = found, "", ""
        return found

    def _drop(self, why: str) -> None:
        """Forget a server that exited; look for another one rediscover_every from now."""
        self.server, self._server_ctime = None, None
        self._exited, self._why = why, ""
        self._next_discovery = self._clock() + self.rediscover_every
        if self.pid is not None:
            self._pid_gone = True

    def _tree(self, psutil, server: ServerProcess):
        now = self._clock()
        if now - self._described_at >= self.rediscover_every:
            self._described_at = now
            self._comm.clear()     # names (and reused thread ids) are at most this old
            self._static.clear()   # so are command lines, names, users and roles
            self._nspids.clear()
        if self._ptree is not None:
            full = self._tree_dirty or self._members_root != server.pid
            if self._ptree.update(self._tasks, now, full=full):
                self._tree_dirty = False
                return self._members_of(psutil, server,
                                        [server.pid, *self._ptree.descendants(server.pid)])
            self._ptree = None   # no /proc to list: psutil's way from now on
        # between refreshes a member that exits is noticed by its read (NoSuchProcess),
        # which asks for a refresh; no is_running() per member per tick (a second read of
        # its stat file)
        fresh = (self._members_root == server.pid and now - self._members_at < self.rediscover_every
                 and self._members)
        if fresh:
            return self._members
        try:
            root = psutil.Process(server.pid)
            kids = root.children(recursive=True)
        except psutil.NoSuchProcess:
            self._drop(f"server pid {server.pid} exited")
            self._members = []
            return None
        except psutil.AccessDenied:
            kids = []
        self._members, self._members_root, self._members_at = [root, *kids], server.pid, now
        return self._members

    def _members_of(self, psutil, server: ServerProcess, pids: list[int]):
        """psutil.Process objects for the tree's pids, reused while a pid keeps its start
        time (a reused pid gets a new one); None when the root itself is gone."""
        procs: dict[int, tuple[int, Any]] = {}
        members = []
        ptree = self._ptree
        self._zombies &= set(pids)
        for pid in pids:
            start = ptree.start_of(pid) if ptree is not None else None
            known = self._procs.get(pid)
            if known is not None and start is not None and known[0] == start:
                p = known[1]
            else:
                try:
                    p = psutil.Process(pid)
                except psutil.NoSuchProcess:
                    if pid == server.pid:
                        self._drop(f"server pid {server.pid} exited")
                        self._procs, self._members = {}, []
                        return None
                    continue
                except psutil.AccessDenied:
                    continue
            procs[pid] = (start if start is not None else -1, p)
            members.append(p)
        self._procs, self._members, self._members_root = procs, members, server.pid
        return members

    # -- one process
    def _read_process(self, psutil, p, server: ServerProcess,
                      seen: set[tuple[int, float]]):
        """(readings, kind, role, argv) of one process, or None if it exited or is a
        zombie."""
        pid = p.pid
        denied = _denied_reason(pid)
        out: list[Reading] = []

        def get(fn):
            try:
                return fn(), False
            except psutil.AccessDenied:
                return None, True

        try:
            if self._ptree is not None:   # /proc read directly: a third of psutil's calls
                got = self._lean(psutil, pid)
            else:
                with p.oneshot():
                    got = self._by_psutil(psutil, p, get)
            status, cpu, cpu_denied, rss, mem_denied, nthr, nthr_denied, ctx, ctx_denied = got
            t_read = self._clock()
            if status == psutil.STATUS_ZOMBIE:  # exited, parent has not reaped it yet
                if pid not in self._zombies:   # once: a zombie may linger for long
                    self._zombies.add(pid)
                    self._tree_dirty = True    # its children have another parent now
                return None
            ctime, _ = get(p.create_time)      # kept by the Process object: no read
            ctime = ctime or 0.0
            static = self._static.get((pid, ctime))
            if static is None:                 # once per description refresh
                with p.oneshot():
                    name, _ = get(p.name)
                    uids, _ = get(p.uids)
                    ppid, _ = get(p.ppid)
                    argv, argv_denied = get(p.cmdline)
                raw = (name, uids, ppid, argv, argv_denied)
            threads, thr_denied = self._threads(psutil, p) if self.max_threads else ([], False)
        except psutil.NoSuchProcess:  # includes ZombieProcess: gone is gone
            self._members_at = -math.inf     # the tree changed: list it again next tick
            self._tree_dirty = True
            return None
        if static is None:
            static = self._static[(pid, ctime)] = self._describe(pid, server, *raw)
        name, argv, argv_denied, kind, role, info_labels, text = static
        labels = {"pid": pid, "name": name}
        out.append(_reading("process.info", 1.0, info_labels, text=text,
                            status=Status.ERROR if argv_denied else Status.OK,
                            reason=denied if argv_denied else ""))
        key = (pid, ctime)
        seen.add(key)
        # CPU in cores: the rate of user+system time since the previous tick
        if cpu_denied or cpu is None:
            out.append(_reading("process.cpu_ratio", None, labels, status=Status.ERROR,
                                reason=denied))
            dt = None
        else:
            total = cpu
            prev = self._prev_cpu.get(key)
            self._prev_cpu[key] = (t_read, total)
            dt = (t_read - prev[0]) if prev else None
            if prev and dt and dt > 0:
                out.append(_reading("process.cpu_ratio", max(0.0, total - prev[1]) / dt, labels))
            else:
                out.append(_reading("process.cpu_ratio", None, labels, status=Status.NODATA,
                                    reason="CPU rate needs two samples"))
                dt = None
        out.append(_reading("process.rss_bytes", float(rss) if rss is not None else None, labels,
                            status=Status.ERROR if mem_denied else Status.OK,
                            reason=denied if mem_denied else ""))
        if status:
            out.append(_reading("process.state", 1.0, labels, text=str(status)))
        out.append(_reading("process.threads", float(nthr) if nthr is not None else None, labels,
                            status=Status.ERROR if nthr_denied else Status.OK,
                            reason=denied if nthr_denied else ""))
        for i, typ in enumerate(("voluntary", "involuntary")):
            out.append(_reading("process.ctx_switches_total",
                                float(ctx[i]) if ctx is not None else None,
                                {**labels, "type": typ},
                                status=Status.ERROR if ctx_denied else Status.OK,
                                reason=denied if ctx_denied else ""))
        if thr_denied:
            out.append(_reading("thread.cpu_ratio", None, {"pid": pid}, status=Status.ERROR,
                                reason=denied))
        elif self.max_threads:
            out.extend(self._thread_readings(pid, key, threads or [], dt))
        return out, kind, role, argv

    @staticmethod
    def _describe(pid: int, server: ServerProcess, name, uids, ppid, argv,
                  argv_denied: bool) -> tuple:
        """(name, argv, argv_denied, kind, role, process.info labels, its text) of one
        member: cleaned (escapes shown), redacted (secrets) and classified."""
        name = clean(name or "")
        argv = clean_cmdline(argv)   # secrets redacted, escapes made visible
        kind, role = classify(name, argv)
        if not role:
            role = "server" if pid == server.pid else "helper"
        info_labels = {"pid": pid, "ppid": ppid if ppid is not None else "", "name": name,
                       "role": role, "kind": kind if is_server_kind(kind) else
                       (server.kind if pid == server.pid else kind)}
        user = user_name(uids.real) if uids else None
        if user:   # the GPU process list's user column (nvitop's); another user's: unknown
            info_labels["user"] = clean(str(user))[:32]
        text = truncate(" ".join(argv)) if argv else name
        return name, argv, argv_denied, kind, role, info_labels, text

    @staticmethod
    def _lean(psutil, pid: int) -> tuple:
        """This tick's (status, CPU s, denied, RSS, denied, threads, denied, (vol, invol),
        denied) from /proc (proctree.read_member)."""
        try:
            m = read_member(pid)
        except OSError:   # gone (a permission error is per file, inside)
            raise psutil.NoSuchProcess(pid) from None
        no = m["denied"]
        assert isinstance(no, list)
        return (m.get("status"), m.get("cpu"), "stat" in no, m.get("rss"), "statm" in no,
                m.get("threads"), "stat" in no, m.get("ctx"), "status" in no)

    @staticmethod
    def _by_psutil(psutil, p, get) -> tuple:
        """The same through psutil (inside its oneshot), where /proc is not read directly."""
        status, _ = get(p.status)
        if status == psutil.STATUS_ZOMBIE:   # nothing more to read of it
            return (status, None, False, None, False, None, False, None, False)
        times, times_denied = get(p.cpu_times)
        mem, mem_denied = get(p.memory_info)
        nthr, nthr_denied = get(p.num_threads)
        ctx, ctx_denied = get(p.num_ctx_switches)
        return (status, times.user + times.system if times is not None else None,
                times_denied, mem.rss if mem is not None else None, mem_denied, nthr,
                nthr_denied, (ctx.voluntary, ctx.involuntary) if ctx is not None else None,
                ctx_denied)

    def _threads(self, psutil, p) -> tuple[list[tuple[int, float]] | None, bool]:
        """((tid, CPU seconds) of each thread, denied?): /proc read directly where it can
        be (proctree.read_thread_times), psutil's threads() elsewhere."""
        if self._ptree is not None:
            try:
                return read_thread_times(p.pid), False
            except PermissionError:
                return None, True
            except OSError:
                raise psutil.NoSuchProcess(p.pid) from None
        try:
            return [(t.id, t.user_time + t.system_time) for t in p.threads()], False
        except psutil.AccessDenied:
            return None, True

    def _thread_readings(self, pid: int, key: tuple[int, float], threads, dt: float | None):
        """The busiest threads of one process since the previous tick."""
        now_times = dict(threads)
        prev = self._prev_thr.get(key)
        self._prev_thr[key] = now_times
        if not prev or not dt:
            return []
        rates = [(max(0.0, v - prev.get(tid, 0.0)) / dt, tid) for tid, v in now_times.items()]
        rates.sort(key=lambda r: (-r[0], r[1]))
        out: list[Reading] = []
        for rate, tid in rates:
            if len(out) >= self.max_threads:
                break
            comm = self._comm.get((pid, tid))
            if comm is None:
                comm = read_comm(pid, tid)
                if comm is None:  # thread exited after threads() listed it
                    continue
                self._comm[(pid, tid)] = comm
            out.append(_reading("thread.cpu_ratio", rate, {"pid": pid, "tid": tid, "name": comm}))
        return out

    # -- host
    def _top_consumers(self, host: list[Reading]) -> list[Reading]:
        """The host's top CPU consumers while it is near saturation (host_top.py), each
        marked whether it belongs to the server's tree (as of the last tick)."""
        ratio = next((r.value for r in host if r.key == "host.cpu_ratio" and r.ok), None)
        top = self._top.scan(ratio, set(self.tree))
        return [_reading("host.top_cpu_cores", cores,
                         {"pid": pid, "name": clean(name)[:NAME_MAX] or "?",
                          "server": "yes" if mine else "no"})
                for pid, name, cores, mine in top or ()]

    def _host(self, psutil) -> list[Reading]:
        out = []
        # one read of /proc/stat gives the CPU times and the task counter the tree
        # follows (proctree.py); psutil where that file cannot be read
        got = read_cpu_and_tasks()
        if got is not None and len(got[0]) >= 4:
            f, self._tasks = got[0], got[1]
            # on Linux guest time is already inside user/nice: count it once (as psutil
            # does); the ratio below needs no unit, so clock ticks as they are
            total = float(sum(f) - sum(f[8:10]))
            busy = total - f[3] - (f[4] if len(f) > 4 else 0)
        else:
            self._tasks = None
            ct = psutil.cpu_times()
            total = sum(ct) - getattr(ct, "guest", 0.0) - getattr(ct, "guest_nice", 0.0)
            busy = total - ct.idle - getattr(ct, "iowait", 0.0)
        prev, self._prev_host = self._prev_host, (busy, total)
        if prev and total > prev[1]:
            out.append(_reading("host.cpu_ratio",
                                min(1.0, max(0.0, (busy - prev[0]) / (total - prev[1]))), {}))
        else:
            out.append(_reading("host.cpu_ratio", None, {}, status=Status.NODATA,
                                reason="CPU rate needs two samples"))
        out.append(_reading("host.cpu_count", float(psutil.cpu_count() or os.cpu_count() or 0), {}))
        try:
            out.append(_reading("host.load1", float(os.getloadavg()[0]), {}))
        except OSError:
            out.append(_reading("host.load1", None, {}, status=Status.UNSUPPORTED,
                                reason="no load average on this system"))
        mem = read_meminfo()   # MemTotal and MemAvailable, as psutil.virtual_memory has them
        if mem is None:        # not Linux, or a kernel without MemAvailable: psutil estimates
            vm = psutil.virtual_memory()
            mem = (vm.total, vm.available)
        # used = total - available: memory nothing can reclaim (page cache is not "used")
        out.append(_reading("host.mem_used_bytes", float(mem[0] - mem[1]), {}))
        out.append(_reading("host.mem_total_bytes", float(mem[0]), {}))
        return out


SPEC = register(ProbeSpec(
    name="process", order=20,
    keys=("host.cpu_ratio", "host.cpu_count", "host.load1", "host.top_cpu_cores",
          "host.mem_used_bytes", "host.mem_total_bytes", "process.info", "process.cpu_ratio",
          "process.rss_bytes", "process.threads", "process.state", "process.ctx_switches_total",
          "thread.cpu_ratio", "server.setting", "model.info", "model.params",
          "model.active_params", "model.weight_bytes", "model.kv_bytes_per_token"),
    needs="psutil and /proc (the server's process tree, host CPU and memory); the "
          "model's config.json for model.*",
    # the server --url or --pid names (discovered by name with neither)
    build=lambda args, target: [ProcessProbe(
        pid=target.pid, url=target.given_urls[0] if target.given_urls else None,
        host_top_at=SCAN_AT if target.host_top_at is None else target.host_top_at)],
    demo="infertop.demo.readings:process_sample",
))
