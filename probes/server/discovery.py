"""Find the inference server among the host's processes.

Three ways, in order: ``--pid`` (the user knows best), the owner of the TCP port in
``--url``, then names and command lines.  The naming rules are pure functions
(``classify``, ``server_settings``, ``group_servers``) so they are tested as tables against
real process names (``server_settings`` and its per-server flag tables live in
server_settings.py and are re-exported here); only ``snapshot_processes``/``discover_all``/``find_server`` touch
psutil, imported lazily (the core must stay importable without it).

What each server's processes look like (its setproctitle titles, its programs and modules,
its roles, default port and port flag) is declared by its kind in infertop/servers/<kind>.py
(tests/fixtures/processes/*.txt are real trees); this module applies them and names no
server.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from infertop.meta import ServerInfo

# server_settings is re-exported (process.py, demo.py and the tests import it from here);
# parse_flags and _pick also read the port flag in port_from_cmdline below.
from infertop.probes.server.settings import _pick, parse_flags
from infertop.probes.server.settings import server_settings as server_settings
from infertop.redact import redact_argv
from infertop.servers import registry
from infertop.textclean import clean

# Roles that are a server's entry point; anything else is a child whose root is above it.
ROOT_ROLES = ("api_server", "launcher", "server")


def is_server_kind(kind: str) -> bool:
    """A registered server kind (not "python" or "unknown")."""
    return registry.kind(kind) is not None


def looked_for() -> str:
    """What discovery searches for, said when nothing was found."""
    return f"{registry.looked_for()} processes; --pid; owner of --url port"



@dataclass
class ServerProcess:
    """The root process of one inference server."""

    pid: int
    kind: str      # a registered kind's name (infertop.servers), python or unknown
    name: str
    cmdline: list[str]
    port: int | None
    reason: str    # how it was found, shown in the header
    members: list[int] = field(default_factory=list)  # tree pids seen when found
    by_name_not_port: bool = False  # --url given, but its port's owner could not be read
    container: str = ""  # the container or namespace/pod it runs in (containers.py)

    def to_meta(self) -> ServerInfo:
        return ServerInfo(self.pid, self.kind, self.name, self.reason, self.port,
                          "name, not port" if self.by_name_not_port else "", self.container)


@dataclass(frozen=True)
class ProcInfo:
    """What discovery needs from one process (a psutil row, or a line of a fixture)."""

    pid: int
    ppid: int
    name: str
    cmdline: tuple[str, ...]
    create_time: float = 0.0


# ---- command-line anatomy ----------------------------------------------------------------

_PYTHON_RE = re.compile(r"^(python|pypy)(\d+(\.\d+)*)?[dmu]*(\.exe)?$")
# python options that consume the next argument
_PY_OPTS_WITH_ARG = {"-W", "-X", "-Q", "--check-hash-based-pycs"}


def clean_cmdline(cmdline: Iterable[str] | None) -> list[str]:
    """Drop setproctitle's space padding and empty arguments, redact secrets (``--api-key
    X``, ``HF_TOKEN=...``, ``user:pass@``) and make control characters visible.

    Every command line infertop keeps (discovery, the process probe's readings, settings,
    the nsys restart command) comes through here, so none of them can hold a secret or a
    terminal escape.  Idempotent.
    """
    out = []
    for a in cmdline or ():
        a = a.rstrip(" \x00")
        if a:
            out.append(clean(a))
    return redact_argv(out)


def split_program(cmdline: Iterable[str] | None) -> tuple[str, str, list[str]]:
    """What a command line runs: (how, program, args).

    how is "module" (python -m X), "code" (python -c ...), "script" (python path/X: program
    is the basename) or "exe" (basename of argv[0]).  Looking at the program position, not at
    every word, is what keeps ``grep vllm serve`` or ``bash -c 'vllm serve'`` from looking
    like a server.
    """
    argv = clean_cmdline(cmdline)
    if not argv:
        return "exe", "", []
    exe = os.path.basename(argv[0])
    if not _PYTHON_RE.match(exe):
        return "exe", exe, argv[1:]
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "-m" and i + 1 < len(argv):
            return "module", argv[i + 1], argv[i + 2:]
        if a.startswith("-m") and len(a) > 2 and not a.startswith("--"):
            return "module", a[2:], argv[i + 1:]
        if a == "-c" and i + 1 < len(argv):
            return "code", argv[i + 1], argv[i + 2:]
        if a in _PY_OPTS_WITH_ARG:
            i += 2
            continue
        if a == "-" or not a.startswith("-"):
            return "script", os.path.basename(a), argv[i + 1:]
        i += 1
    return "exe", exe, []


def _title_of(name: str, cmdline: list[str]) -> str:
    """A setproctitle title ('VLLM::Worker_TP0') from name() or argv[0], else ''."""
    for cand in (cmdline[0] if cmdline else "", name or ""):
        if "::" in cand and " " not in cand.strip() and "/" not in cand:
            return cand.strip()
    return ""


def _classify_title(title: str) -> tuple[str, str] | None:
    prefix, _, rest = title.partition("::")
    cut = len(title) == 15  # /proc comm: the title may be cut short

    def is_(word: str) -> bool:
        return rest.startswith(word) or (cut and len(rest) >= 3 and word.startswith(rest))

    def named(t) -> str | None:
        return next((role for word, role in t.names if is_(word)), None)

    titled = [(k.name, k.titles) for k in registry.kinds() if k.titles is not None]
    # a kind's own prefix first ('sglang::Worker' is SGLang's), then names any prefix may
    # carry (vLLM's prefix is configurable: comm cuts 'VLLM::EngineCore' to 'VLLM::EngineCor')
    for name, t in titled:
        if prefix.lower() == t.prefix.lower():
            return name, named(t) or t.default_role
    for name, t in titled:
        if t.any_prefix:
            role = named(t)
            if role:
                return name, role
    return None


_HELPER_CODE = ("multiprocessing.resource_tracker", "multiprocessing.spawn",
                "multiprocessing.forkserver", "multiprocessing.popen")


def _match_kinds(how: str, prog: str, args: list[str]) -> tuple[str, str] | None:
    """The first kind that claims the program (each names its own programs and modules)."""
    for k in registry.kinds():
        hit = k.match_argv(how, prog, tuple(args))
        if hit is not None:
            return hit
    return None


def classify(name: str, cmdline: Iterable[str] | None) -> tuple[str, str]:
    """(kind, role) of one process from its name and command line.

    kind: a registered kind's name for a server's process (each kind's ``match_argv``
    and ``titles``), "python" for any other Python process, "unknown" otherwise.  role:
    one of the kinds' roles (registry.role_priority()), "helper" for Python helpers, or ""
    when the process is not recognisably part of a server.  infertop itself is never a
    server.
    """
    argv = clean_cmdline(cmdline)
    title = _title_of(name, argv)
    if title:
        hit = _classify_title(title)
        if hit:
            return hit
    how, prog, args = split_program(argv)
    if not argv:
        prog = name or ""
        how = "exe"
    if how == "module":
        if prog.startswith("infertop"):
            return "unknown", ""
        hit = _match_kinds(how, prog, args)
        if hit:
            return hit
        if prog.startswith("torch._inductor.compile_worker") or prog in _HELPER_CODE:
            return "python", "helper"
        return "python", ""
    if how == "code":
        code = " ".join([prog, *args])
        if any(h in code for h in _HELPER_CODE) or "compile_worker" in code:
            return "python", "helper"
        return "python", ""
    if prog.startswith("infertop"):
        return "unknown", ""
    hit = _match_kinds(how, prog, args)
    if hit:
        return hit
    if how == "script":
        # torch's compile workers run .../torch/_inductor/compile_worker/__main__.py
        if any("compile_worker" in a for a in argv[:3]):
            return "python", "helper"
        return "python", ""
    if _PYTHON_RE.match(prog or ""):
        return "python", ""
    return "unknown", ""


# ---- grouping processes into servers -----------------------------------------------------

def group_servers(procs: Iterable[ProcInfo], *,
                  self_pids: Iterable[int] = ()) -> list[ServerProcess]:
    """Group server processes under their roots, oldest server first.

    The root is the topmost ancestor of the same kind (vLLM's Worker -> EngineCore -> API
    server).  When that topmost process is only a child role (an EngineCore whose parent is
    an ordinary Python script that embeds the engine), the Python parent is taken as the
    root: it is the process hosting the engine client.
    """
    table = {p.pid: p for p in procs}
    skip = set(self_pids)
    kinds = {pid: classify(p.name, p.cmdline) for pid, p in table.items()}
    roots: dict[int, tuple[str, list[int]]] = {}
    for pid, (kind, role) in kinds.items():
        if not is_server_kind(kind) or not role or pid in skip:
            continue
        cur = pid
        seen = {cur}
        while True:
            parent = table.get(table[cur].ppid)
            if parent is None or parent.pid in seen or parent.pid in skip or parent.pid <= 1:
                break
            pk, prole = kinds[parent.pid]
            if pk == kind and prole:
                cur = parent.pid
                seen.add(cur)
                continue
            if pk == "python" and prole == "" and kinds[cur][1] not in ROOT_ROLES:
                cur = parent.pid  # a Python program embedding the engine
            break
        entry = roots.setdefault(cur, (kind, []))
        entry[1].append(pid)
    out = []
    for root, (kind, members) in roots.items():
        p = table[root]
        argv = clean_cmdline(p.cmdline)
        out.append((p.create_time, root, ServerProcess(
            pid=root, kind=kind, name=p.name, cmdline=argv, port=port_from_cmdline(kind, argv),
            reason=f"found by name: {kind} {kinds[root][1] or 'host process'}",
            members=sorted(set(members) | {root}))))
    out.sort(key=lambda t: (t[0], t[1]))
    return [s for _, _, s in out]


def root_of(pid: int, procs: Iterable[ProcInfo]) -> tuple[int, str]:
    """(root pid, kind) for any process: its server root if it belongs to one, else itself."""
    table = {p.pid: p for p in procs}
    for s in group_servers(table.values()):
        if pid in s.members:
            return s.pid, s.kind
    p = table.get(pid)
    return pid, (classify(p.name, p.cmdline)[0] if p else "unknown")


# ---- ports and hosts from the command line and the URL -----------------------------------

def port_from_cmdline(kind: str, cmdline: Iterable[str] | None) -> int | None:
    """The HTTP port a server was told to use, or None when the command line is silent."""
    _, _, args = split_program(cmdline)
    k = registry.kind(kind)
    flag = k.port_flags if k is not None else ("--port",)
    found = parse_flags(args, flag)
    v = _pick(found, *flag)
    try:
        port = int(v) if v is not None else None
    except ValueError:
        return None
    # a port no socket can have (--port 99999 on a command line) is no port: the recorded
    # meta's range (infertop/meta.py) would refuse it
    return port if port is not None and 0 < port <= 65535 else None


def port_from_url(url: str) -> int | None:
    """The TCP port a URL points at (scheme default when it has none)."""
    if "://" not in url:
        url = "http://" + url
    try:
        parts = urlsplit(url)
        return parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return None


def host_from_url(url: str) -> str:
    if "://" not in url:
        url = "http://" + url
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def is_local_host(host: str) -> bool:
    """Whether a URL's host is this machine (loopback, its name, or one of its addresses):
    only then can the server's processes be read here."""
    import socket
    if host in ("", "localhost", "0.0.0.0", "::", "::1") or host.startswith("127."):
        return True
    names = {socket.gethostname().lower(), socket.getfqdn().lower()}
    if host in names:
        return True
    try:
        import psutil
        addrs = {a.address.split("%")[0].lower() for nics in psutil.net_if_addrs().values()
                 for a in nics}
    except Exception:
        addrs = set()
    return host in addrs


# ---- I/O: psutil ---------------------------------------------------------------------------

def _self_pids() -> set[int]:
    """infertop's own process and its ancestors are never the server."""
    out = set()
    try:
        import psutil
        p = psutil.Process()
        out.add(p.pid)
        for a in p.parents():
            out.add(a.pid)
    except Exception:
        out.add(os.getpid())
    return out


def snapshot_processes() -> list[ProcInfo]:
    """Every process we can see (name/cmdline may be empty where access is denied)."""
    import psutil
    out = []
    for p in psutil.process_iter(["pid", "ppid", "name", "cmdline", "create_time"]):
        i = p.info
        out.append(ProcInfo(i["pid"], i.get("ppid") or 0, clean(i.get("name") or ""),
                            tuple(clean_cmdline(i.get("cmdline"))), i.get("create_time") or 0.0))
    return out


def listening_ports() -> dict[int, list[int]]:
    """Listening TCP port -> owner pids.  A port whose owner we may not read (psutil maps a
    socket to its pid through /proc/PID/fd: same user or root) maps to an empty list."""
    import psutil
    owners: dict[int, list[int]] = {}
    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, PermissionError):
        return {}
    for c in conns:
        if c.status != psutil.CONN_LISTEN or not c.laddr:
            continue
        pids = owners.setdefault(c.laddr.port, [])
        if c.pid is not None and c.pid not in pids:
            pids.append(c.pid)
    return owners


def _fill_ports(servers: list[ServerProcess], owners: Mapping[int, list[int]]) -> None:
    """Port of servers whose command line did not say: a socket the root listens on, else
    the kind's default port when a member (TGI's router) or an unreadable owner holds it.
    Other members' ports are not guessed from: workers listen too (gloo, NCCL bootstrap)."""
    by_pid: dict[int, list[int]] = {}
    for port, pids in owners.items():
        for pid in pids:
            by_pid.setdefault(pid, []).append(port)
    for s in servers:
        if s.port is not None:
            continue
        default = registry.default_port(s.kind)
        mine = sorted(by_pid.get(s.pid, []))
        if mine:
            s.port = default if default in mine else mine[0]
        elif default is not None and default in owners and (not owners[default] or
                                    set(owners[default]) & set(s.members)):
            s.port = default


def _label_containers(servers: Iterable[ServerProcess | None]) -> None:
    """Each server's container or pod label, from /proc/PID/cgroup and the runtime's
    metadata (containers.py); unreadable is left empty."""
    from infertop.probes.server.containers import container_of
    for s in servers:
        if s is not None and not s.container:
            c = container_of(s.pid)
            s.container = c.label if c is not None else ""


def routes_of(servers: Iterable[ServerProcess]) -> list:
    """How each server's /metrics is read (reach.Route): ``127.0.0.1:PORT`` when it shares
    our network namespace, else into its container (reach.py); servers with no port and
    no way to learn one are left out."""
    from infertop.probes.server.reach import Route, plan_for
    servers = list(servers)
    procs: list[ProcInfo] | None = None
    out = []
    for s in servers:
        if procs is None:   # docker-proxy's forwardings, read once
            try:
                procs = snapshot_processes()
            except Exception:
                procs = []
        try:
            route = plan_for(s, procs)
        except Exception:   # /proc changed under us: the plain URL is still worth a try
            route = None
        if route is not None:
            out.append(route)
        elif s.port:
            out.append(Route(f"http://127.0.0.1:{s.port}"))
    return out


def discover_all() -> list[ServerProcess]:
    """All inference servers on this host, oldest first."""
    servers = group_servers(snapshot_processes(), self_pids=_self_pids())
    _label_containers(servers)
    if any(s.port is None for s in servers):
        try:
            owners = listening_ports()
        except Exception:  # ports are a convenience; the servers were found anyway
            owners = {}
        _fill_ports(servers, owners)
    return servers


@dataclass(frozen=True)
class PortOwner:
    """The server tree listening on a port: ``pid`` holds the socket, ``root`` is the root
    of its tree (the server: vLLM's API server over its engine cores), ``info`` the root's
    row of ``procs``, the process table it was found in."""

    pid: int
    root: int
    kind: str
    info: ProcInfo | None
    procs: list[ProcInfo]


def port_owner(port: int, owners: dict[int, list[int]]) -> PortOwner | None:
    """The tree that owns ``port`` by ``owners`` (listening_ports), None when no process we
    may read listens there: never a search by name.  Blocking (psutil).  locate (--url)
    and the P/D role reader (probes/server/roles.py) both find a port's server with it."""
    pids = sorted(set(owners.get(port, [])))
    if not pids:
        return None
    procs = snapshot_processes()
    root, kind = root_of(pids[0], procs)
    return PortOwner(pids[0], root, kind, {p.pid: p for p in procs}.get(root), procs)


def locate(pid: int | None = None, url: str | None = None) -> tuple[ServerProcess | None, str]:
    """find_server, plus a sentence saying why nothing was found; the server carries its
    container's label."""
    found, why = _locate(pid, url)
    _label_containers([found])
    return found, why


def _locate(pid: int | None, url: str | None) -> tuple[ServerProcess | None, str]:
    import psutil
    if pid is not None:
        return _by_pid(psutil, pid)
    if url and not is_local_host(host_from_url(url)):
        return None, (f"{host_from_url(url)} is another machine: its server's processes "
                      "cannot be read from here (run infertop on that host for them)")
    port = port_from_url(url) if url else None
    why_port = ""
    if port is not None:
        try:
            owners = listening_ports()
        except Exception as e:  # psutil can fail in odd sandboxes; name discovery still works
            owners = {}
            why_port = f"could not list TCP listeners ({e}); "
        found = port_owner(port, owners)
        if found is not None:
            info, root = found.info, found.root
            argv = clean_cmdline(info.cmdline) if info else []
            members = [s.members for s in group_servers(found.procs) if s.pid == root]
            return ServerProcess(root, found.kind, info.name if info else "", argv, port,
                                 f"owner of port {port} from --url (pid {found.pid})",
                                 members[0] if members else [root]), ""
        if port in owners:  # listed in /proc/net/tcp, but its owner's fds are not readable
            why_port = (f"port {port} is held by a process we cannot inspect (another user's: "
                        "run as the server's user or root); ")
        elif not why_port:
            # nothing listens there: another server found by name is not this URL's, and
            # showing its process tree under this URL would lie
            return None, (f"no local process listens on port {port} (--url): the server is "
                          "not running there; not searching by name")
    servers = discover_all()
    if not servers:
        return None, f"{why_port}no server process found (looked for {looked_for()})"
    chosen = servers[0]
    if port is not None:
        on_port = [s for s in servers if s.port == port]
        if on_port:
            chosen = on_port[0]
            chosen.reason = f"{why_port}found by name, on port {port}"
            return chosen, ""
    # a --url whose port owner could not be read: the name search is a guess, and says so
    guess = "found by name, not by port: " if port is not None else ""
    if len(servers) > 1:
        listed = ", ".join(str(s.pid) for s in servers)
        chosen.reason = (f"{guess}{why_port}{len(servers)} servers found (pids {listed}); "
                         f"following the oldest, pid {chosen.pid}: use --pid or --url to choose")
    else:
        chosen.reason = f"{guess}{why_port}{chosen.reason}"
    chosen.by_name_not_port = bool(guess)
    return chosen, ""


def _by_pid(psutil, pid: int) -> tuple[ServerProcess | None, str]:
    try:
        p = psutil.Process(pid)
        with p.oneshot():
            name, argv = clean(p.name()), clean_cmdline(p.cmdline())
    except psutil.NoSuchProcess:
        return None, f"no process with pid {pid} (--pid)"
    except psutil.AccessDenied:
        name, argv = "", []
    kind, _ = classify(name, argv)
    try:
        kids = p.children(recursive=True)
    except psutil.Error:
        kids = []
    if not is_server_kind(kind) and pid > 1:
        # a wrapper (shell, python script, `timeout`) whose child is the server
        for c in kids:
            try:
                if c.ppid() == pid:
                    k, _ = classify(c.name(), c.cmdline())
                    if is_server_kind(k):
                        kind = k
                        break
            except psutil.Error:
                continue
    server = ServerProcess(pid, kind, name, argv, port_from_cmdline(kind, argv),
                           f"--pid {pid}", [pid, *(c.pid for c in kids)])
    if server.port is None:
        try:
            _fill_ports([server], listening_ports())
        except Exception:
            pass  # the port is a convenience: the URL can still be given
    return server, ""


def find_server(pid: int | None = None, url: str | None = None) -> ServerProcess | None:
    """The server to watch: --pid wins, then the owner of --url's port, then by name."""
    return locate(pid, url)[0]
