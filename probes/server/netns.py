"""Network namespaces: is a server's port in ours, what addresses its own has, and a
connection made from inside it.

A server in a container or a pod listens in its own network namespace: the host sees its
process but ``127.0.0.1:PORT`` on the host is not its port.  What /proc tells about it:

- ``/proc/PID/ns/net``: the namespace (``net:[INODE]``); it differs from ours when the
  process is in a container.  Reading another user's link needs ptrace access (root).
- ``/proc/PID/net/fib_trie``, ``/proc/PID/net/if_inet6``: that namespace's own addresses
  (the ``/32 host LOCAL`` entries), which a Docker bridge or a pod network routes to.
- ``/proc/PID/net/tcp``/``tcp6``: its listening sockets (address and port).

``connect_in`` opens a TCP connection from inside a process's namespace: a one-shot thread
enters it with ``setns(2)`` (a thread's network namespace is its own, so no other thread of
infertop moves), connects, and ends; a socket stays in the namespace it was made in, so the
caller's event loop then uses it like any other.  Entering needs CAP_SYS_ADMIN (root).

Every reader is bounded (``READ_MAX`` bytes a file) and returns nothing rather than raise.
"""

from __future__ import annotations

import ctypes
import ipaddress
import os
import socket
import threading
from dataclasses import dataclass

PROC = "/proc"
READ_MAX = 1 << 20          # a namespace with thousands of sockets: ~150 bytes a line
CLONE_NEWNET = 0x40000000
CAP_SYS_ADMIN = 21
LISTEN = "0A"               # TCP_LISTEN in /proc/net/tcp's st column


def _read(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(READ_MAX).decode("ascii", "replace")
    except OSError:
        return ""


def netns_id(pid: int | str = "self", proc: str = PROC) -> str | None:
    """``net:[INODE]`` of a process's network namespace; None when it cannot be read
    (gone, or another user's process and we are not root)."""
    try:
        return os.readlink(f"{proc}/{pid}/ns/net")
    except OSError:
        return None


def can_enter(proc: str = PROC) -> bool:
    """Whether this process holds CAP_SYS_ADMIN (setns into another network namespace)."""
    for line in _read(f"{proc}/self/status").splitlines():
        if line.startswith("CapEff:"):
            try:
                return bool(int(line.split()[1], 16) >> CAP_SYS_ADMIN & 1)
            except (IndexError, ValueError):
                return False
    return False


def parse_fib_trie(text: str) -> tuple[str, ...]:
    """The namespace's own IPv4 addresses (``/32 host LOCAL``), loopback left out."""
    out: list[str] = []
    last = ""
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("|--"):
            last = s[3:].strip()
        elif s.startswith("/32 host LOCAL") and last and not last.startswith("127."):
            if last not in out:
                out.append(last)
    return tuple(out)


def parse_if_inet6(text: str) -> tuple[str, ...]:
    """Global-scope IPv6 addresses (scope 00) of interfaces other than lo."""
    out = []
    for line in text.splitlines():
        f = line.split()
        if len(f) < 6 or f[5] == "lo" or f[3] != "00" or len(f[0]) != 32:
            continue
        try:
            out.append(str(ipaddress.IPv6Address(int(f[0], 16))))
        except ValueError:
            continue
    return tuple(out)


def addresses(pid: int | str, proc: str = PROC) -> tuple[str, ...]:
    """The addresses of a process's network namespace the host may route to (IPv4 first)."""
    return (parse_fib_trie(_read(f"{proc}/{pid}/net/fib_trie"))
            + parse_if_inet6(_read(f"{proc}/{pid}/net/if_inet6")))


def _hex_addr(h: str) -> str:
    """/proc/net/tcp's address: 8 (IPv4) or 32 (IPv6) hex digits, 32-bit words in host
    (little-endian) order."""
    raw = bytes.fromhex(h)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    if len(raw) == 16:
        words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
        addr = ipaddress.IPv6Address(words)
        return str(addr.ipv4_mapped or addr)
    raise ValueError(h)


def parse_listeners(text: str) -> tuple[tuple[str, int], ...]:
    """(address, port) of the LISTEN sockets in a /proc/net/tcp or tcp6 table."""
    out = []
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) < 4 or f[3] != LISTEN or ":" not in f[1]:
            continue
        h, _, p = f[1].rpartition(":")
        try:
            out.append((_hex_addr(h), int(p, 16)))
        except ValueError:
            continue
    return tuple(out)


def listeners(pid: int | str, proc: str = PROC) -> tuple[tuple[str, int], ...]:
    """The listening TCP sockets of a process's network namespace (every process's in it,
    not only this one's: a container has one server, a pod a few)."""
    return (parse_listeners(_read(f"{proc}/{pid}/net/tcp"))
            + parse_listeners(_read(f"{proc}/{pid}/net/tcp6")))


def is_loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return False


def is_any(addr: str) -> bool:
    return addr in ("0.0.0.0", "::")


@dataclass(frozen=True)
class Namespace:
    """What the host can learn about one process's network namespace."""

    id: str                                  # net:[INODE]
    addresses: tuple[str, ...]               # its own, loopback left out
    listeners: tuple[tuple[str, int], ...]   # (address, port) listening

    def bound(self, port: int) -> str | None:
        """The address ``port`` listens on there (the wildcard when any is), else None."""
        got = [a for a, p in self.listeners if p == port]
        for a in got:
            if is_any(a):
                return a
        return got[0] if got else None


def namespace_of(pid: int, proc: str = PROC) -> Namespace | None:
    """The network namespace of ``pid`` when it is not ours; None when it is ours or
    cannot be told apart (unreadable link)."""
    mine, theirs = netns_id("self", proc), netns_id(pid, proc)
    if theirs is None or mine is None or theirs == mine:
        return None
    return Namespace(theirs, addresses(pid, proc), listeners(pid, proc))


# ---- connecting from inside a namespace ---------------------------------------------------

_libc = None


def _setns(fd: int) -> None:
    setns = getattr(os, "setns", None)   # Python 3.12+
    if setns is not None:
        setns(fd, CLONE_NEWNET)
        return
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def open_netns(pid: int, proc: str = PROC) -> int:
    """A file descriptor of ``pid``'s network namespace (OSError when unreadable).  Held, it
    keeps the namespace: a pod's container that restarts (a new pid, the same namespace,
    which the pod's sandbox holds) is reached through it again with no new discovery."""
    return os.open(f"{proc}/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)


def connect_in(pid: int, host: str, port: int, timeout: float,
               proc: str = PROC) -> socket.socket:
    """A TCP socket connected to (host, port) from inside ``pid``'s network namespace
    (blocking: call it from a worker thread); see ``connect_in_fd``."""
    fd = open_netns(pid, proc)
    try:
        return connect_in_fd(fd, host, port, timeout)
    finally:
        os.close(fd)


def connect_in_fd(fd: int, host: str, port: int, timeout: float) -> socket.socket:
    """A TCP socket connected to (host, port) from inside the network namespace ``fd``
    names (blocking).  OSError when the namespace cannot be entered or the connection
    fails.  The thread that enters the namespace is made for this one connection and ends
    with it, so no pooled thread is left in a foreign namespace."""
    result: list[socket.socket | BaseException] = []

    def run() -> None:
        try:
            _setns(fd)
            result.append(socket.create_connection((host, port), timeout=timeout))
        except BaseException as e:  # handed to the caller's thread
            result.append(e)

    t = threading.Thread(target=run, name="infertop-netns", daemon=True)
    t.start()
    t.join(timeout + 1.0)
    if not result:
        raise OSError(f"no connection within {timeout:g} s inside the server's network namespace")
    got = result[0]
    if isinstance(got, BaseException):
        raise got if isinstance(got, OSError) else OSError(str(got))
    got.settimeout(None)
    got.setblocking(False)
    return got
