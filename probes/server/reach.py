"""How to reach a discovered server's /metrics when it runs in a container or a pod.

Discovery finds a server by its process (the host sees every container's processes); its
port may be in another network namespace, where ``127.0.0.1:PORT`` on the host is not it.
``plan`` picks, in order:

1. as root (CAP_SYS_ADMIN): read it from inside its namespace (netns.connect_in), at the
   address it listens on there; the URL shown is the namespace's own address when it has
   one, so two pods both on port 8000 stay two sources;
2. a port the host publishes for it: ``docker-proxy -container-ip A -container-port P
   -host-port H`` (or a ``socat TCP-LISTEN:H,fork TCP:A:P`` forwarder) where A is one of
   the namespace's addresses and P the server's port.
   This comes before the namespace's own address because it is what the operator chose to
   expose (it survives a container restart, which changes the address; it works where the
   bridge is not routable from the host: rootless Docker, Docker Desktop);
3. the namespace's own address (a Docker bridge or a pod network routes the host to it),
   when the server listens on it (not on its loopback only);
4. none: ``problem`` says why and which ``--url`` to pass.

The choice is said in the server source's status (``Route.via``): "in container vllm-a,
read through its network namespace".  ``plan`` is pure over what it is given
(``plan_for`` reads /proc), so each branch is tested without namespaces.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from infertop.probes.server import netns
from infertop.probes.server.containers import Container, container_of
from infertop.servers import registry

PROXY_NAMES = ("docker-proxy", "rootlesskit-docker-proxy")


@dataclass(frozen=True)
class Route:
    """Where one server's /metrics is read from, and how that is said."""

    url: str                    # what the probe scrapes (and shows as the source)
    via: str = ""               # the status line: "in container X, read ..."
    netns_pid: int | None = None  # connect from inside this process's network namespace
    connect_host: str = ""      # the address dialled there
    problem: str = ""           # no way in: why, and the --url to pass
    container: str = ""         # the container's or pod's label
    hint: str = ""              # said after a failed read: what else to try


@dataclass(frozen=True)
class Published:
    """One docker-proxy forwarding: host_ip:host_port -> container_ip:container_port."""

    host_ip: str
    host_port: int
    container_ip: str
    container_port: int


def parse_proxy_args(argv: Sequence[str]) -> Published | None:
    """docker-proxy's own flags (``-host-ip``, ``-host-port``, ``-container-ip``,
    ``-container-port``, ``-proto``; one or two dashes, ``-flag value`` or ``-flag=value``);
    None for a UDP proxy or a command line missing one of them."""
    flags: dict[str, str] = {}
    args = list(argv[1:])
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("-"):
            name, eq, value = a.lstrip("-").partition("=")
            if not eq and i + 1 < len(args) and not args[i + 1].startswith("-"):
                value = args[i + 1]
                i += 1
            flags[name] = value
        i += 1
    if flags.get("proto", "tcp") != "tcp":
        return None
    try:
        return Published(flags.get("host-ip", "0.0.0.0") or "0.0.0.0", int(flags["host-port"]),
                         flags["container-ip"], int(flags["container-port"]))
    except (KeyError, ValueError):
        return None


def parse_socat_args(argv: Sequence[str]) -> Published | None:
    """A socat forwarder, ``socat TCP-LISTEN:9000,fork TCP:10.0.0.2:8000`` (TCP4/TCP6 and
    ``bind=`` spelled as socat does); None for anything else."""
    addrs = [a for a in argv[1:] if not a.startswith("-")]
    if len(addrs) != 2:
        return None
    listen, target = addrs
    head, _, opts = listen.partition(",")
    kind, _, port = head.partition(":")
    if kind.upper() not in ("TCP-LISTEN", "TCP4-LISTEN", "TCP6-LISTEN", "TCP-L"):
        return None
    bind = next((o[5:] for o in opts.split(",") if o.startswith("bind=")), "0.0.0.0")
    tkind, _, rest = target.partition(",")[0].partition(":")
    host, _, tport = rest.rpartition(":")
    if tkind.upper() not in ("TCP", "TCP4", "TCP6", "TCP-CONNECT") or not host:
        return None
    try:
        return Published(bind, int(port), host.strip("[]"), int(tport))
    except ValueError:
        return None


def published_ports(procs: Iterable) -> list[Published]:
    """Every TCP forwarding of the docker-proxy and socat processes in ``procs`` (ProcInfo
    rows): host listeners that forward to a container's address."""
    out = []
    for p in procs:
        argv = list(p.cmdline)
        prog = argv[0].rsplit("/", 1)[-1] if argv else ""
        got = None
        if prog in PROXY_NAMES or p.name in PROXY_NAMES:
            got = parse_proxy_args(argv)
        elif prog == "socat" or p.name == "socat":
            got = parse_socat_args(argv)
        if got is not None:
            out.append(got)
    return out


def _host(addr: str) -> str:
    return f"[{addr}]" if ":" in addr else addr


def _url(addr: str, port: int) -> str:
    return f"http://{_host(addr)}:{port}"


def guess_port(kind: str, ns: netns.Namespace) -> int | None:
    """A server's port when its command line is silent: its kind's default port if the
    namespace listens there, else the namespace's only listening port."""
    ports = sorted({p for _, p in ns.listeners})
    default = registry.default_port(kind)
    if default in ports:
        return default
    return ports[0] if len(ports) == 1 else None


def where(pid: int, container: Container | None) -> str:
    if container is None:
        return f"pid {pid}'s network namespace"
    return f"pod {container.label}" if container.pod else f"container {container.label}"


def plan(pid: int, kind: str, port: int | None, ns: netns.Namespace,
         container: Container | None, published: Sequence[Published],
         can_enter: bool) -> Route | None:
    """The route to a server whose namespace ``ns`` is not ours (see the module's doc);
    None when no port is known (nothing to read)."""
    if port is None:
        port = guess_port(kind, ns)
        if port is None:
            return None
    label = container.label if container is not None else ""
    place = where(pid, container)
    bound = ns.bound(port)
    own = ns.addresses[0] if ns.addresses else ""
    if can_enter:
        dial = "127.0.0.1" if bound is None or netns.is_any(bound) else bound
        if bound == "::":
            dial = "::1" if not ns.addresses or ":" in own else "127.0.0.1"
        shown = own if own and (bound is None or netns.is_any(bound) or bound == own) else dial
        return Route(_url(shown, port), f"in {place}, read through its network namespace",
                     pid, dial, container=label)
    for pub in published:
        if pub.container_port == port and pub.container_ip in ns.addresses:
            host = "127.0.0.1" if netns.is_any(pub.host_ip) else pub.host_ip
            return Route(_url(host, pub.host_port),
                         f"in {place}, read at its published host port {pub.host_port} "
                         f"(forwarded to {_host(pub.container_ip)}:{port})",
                         container=label)
    if own and bound is not None and not netns.is_loopback(bound):
        addr = own if netns.is_any(bound) else bound
        return Route(_url(addr, port),
                     f"in {place}, read at its own address (not root: cannot enter its "
                     "network namespace)", container=label,
                     hint=f"the host may not route to {addr}: run infertop as root, or "
                          f"publish port {port} (docker run -p HOST:{port}) and pass "
                          "--url http://127.0.0.1:HOST")
    return Route(_url("127.0.0.1", port), "", container=label, problem=(
        f"pid {pid} listens on port {port} in {place}, not on this host's: run infertop "
        "as root to read it through its namespace, or publish the port (docker run -p "
        f"HOST:{port}) and pass --url http://127.0.0.1:HOST"))


def unreadable(pid: int, port: int, container: Container | None) -> str:
    """The problem of a server whose namespace cannot be read (another user's process)."""
    inside = f" in {where(pid, container)}" if container is not None else ""
    return (f"pid {pid}{inside} is another user's process: whether port {port} is in "
            "its own network namespace cannot be read; run infertop as root, or pass "
            "--url with the address its port is published at")


def apart_by_listeners(pid: int, port: int | None,
                       proc: str = netns.PROC) -> netns.Namespace | None:
    """Another user's process, whose namespace link we may not read: its namespace's
    socket table still is (/proc/PID/net is anyone's), so when its port listens there and
    not in ours, it is in another namespace."""
    if port is None:
        return None
    theirs = netns.listeners(pid, proc)
    if port not in {p for _, p in theirs}:
        return None
    if port in {p for _, p in netns.listeners("self", proc)}:
        return None
    return netns.Namespace("", netns.addresses(pid, proc), theirs)


def plan_for(server, procs: Iterable = (), proc: str = netns.PROC) -> Route | None:
    """``plan`` for a discovery.ServerProcess, reading /proc; None when the server shares
    our network namespace (the plain ``127.0.0.1:PORT`` is right)."""
    pid = server.pid
    container = container_of(pid, proc)
    ns = netns.namespace_of(pid, proc)
    readable = ns is not None or netns.netns_id(pid, proc) is not None
    if ns is None and not readable:
        ns = apart_by_listeners(pid, server.port, proc)
    if ns is not None:
        return plan(pid, server.kind, server.port, ns, container, published_ports(procs),
                    readable and netns.can_enter(proc))
    if container is None or not server.port:
        return None
    if not readable:
        # another user's container whose port we cannot see listen anywhere
        return Route(_url("127.0.0.1", server.port), "", container=container.label,
                     problem=unreadable(pid, server.port, container))
    # a container on the host's network (docker run --network host)
    return Route(_url("127.0.0.1", server.port), f"in {where(pid, container)}",
                 container=container.label)
