"""Each --url's prefill/decode role, read from the command line of the process on its port.

vLLM's /metrics page carries no role: the engine's part in disaggregated serving is its
``--kv-transfer-config`` ``kv_role`` (SGLang's page has it, as the engine_type label, and
its ``--disaggregation-mode`` flag).  The process probe reads the settings of the ONE server
it follows, a host-wide ``server.setting``; with a prefill and a decode vLLM on one box
(``--url :8100 --url :8200``) the other instance's role would be unknown and the TTFT split
"not measured".  So each server metrics probe owns one ``RoleReader`` for its URL, and
labels the role with its own instance, as SGLang's engine_type label and the demo
(probes/sources/demo.py ``with_role``) do.

Why in the server probe and not the process probe: ``server.disagg_role`` is a key of the
server probe (SGLang's label maps to it) and no key belongs to two probes; the URL and its
instance name are the server probe's too.  The server probe runs on the event loop, so
every psutil call here runs in a worker thread (``poll`` starts it and never waits for it:
the reading appears one tick later), at most one at a time per URL, at most every
``recheck_every`` seconds.  The command line is read once per port owner: a recheck only
asks whether that pid (with its start time) still lives, and looks the port's owner up
again (``listening_ports``: every process's sockets) only when it does not.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from infertop.keys import SPECS
from infertop.model import Reading, Status, make_labels
from infertop.probes.server import discovery

KEY = "server.disagg_role"
REMOTE_WHY = ("role unknown: the /metrics page carries none, and the server's process is "
              "not on this host (its --kv-transfer-config cannot be read from here)")


@dataclass(frozen=True)
class Owner:
    """The process serving a port: its pid and start time (a reused pid is another
    process) and its cleaned command line."""

    pid: int
    ctime: float
    kind: str
    argv: tuple[str, ...]


def role_from_argv(kind: str, argv: tuple[str, ...] | list[str]) -> str | None:
    """'prefill' / 'decode' / 'both' from a server's command line (its kind's settings
    table: vLLM's --kv-transfer-config kv_role, SGLang's --disaggregation-mode),
    'unified' for a server of a known kind that names none, None when the process is no
    known server.  Never raises: a command line is outside input (any JSON, any size)."""
    if not discovery.is_server_kind(kind):
        return None
    try:
        role = discovery.server_settings(kind, list(argv)).get("disagg_role", "")
    except Exception:   # a hostile --kv-transfer-config must not cost the scrape
        return None
    return role if role in ("prefill", "decode", "both") else "unified"


def find_owner(port: int) -> tuple[Owner | None, str]:
    """The root of the server tree that listens on ``port``, or (None, why).  Blocking
    (psutil): call from a thread.  Only the port's owner: never a search by name, which
    could pick another server's role."""
    import psutil
    owners = discovery.listening_ports()
    found = discovery.port_owner(port, owners)
    if found is None:
        why = (f"port {port} is held by a process we cannot inspect" if port in owners
               else f"no local process listens on port {port}")
        return None, why
    root, info = found.root, found.info
    ctime = info.create_time if info else 0.0   # psutil's, from the same process table
    if not ctime:
        try:
            ctime = psutil.Process(root).create_time()
        except psutil.Error:
            return None, f"port {port}'s owner (pid {root}) could not be read"
    return Owner(root, ctime, found.kind, tuple(info.cmdline) if info else ()), ""


def still_running(owner: Owner) -> bool:
    """Whether the same process (pid and start time) still runs.  Blocking."""
    import psutil
    try:
        return psutil.Process(owner.pid).create_time() == owner.ctime
    except psutil.AccessDenied:
        return True
    except psutil.Error:
        return False


MISS_MAX_S = 40.0    # the longest wait between looks for a port's owner that was not found


class RoleReader:
    """The role of one URL's server, for its metrics probe.  ``find``/``alive``/``clock``
    are the boundaries tests replace."""

    def __init__(self, url: str, instance: str, *, recheck_every: float = 5.0,
                 find: Callable[[int], tuple[Owner | None, str]] = find_owner,
                 alive: Callable[[Owner], bool] = still_running,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.instance = instance
        self.port = discovery.port_from_url(url)
        self._host = discovery.host_from_url(url)
        # None until the first look: whether the host is this one may need a name lookup
        # (socket.getfqdn), which is no call for the event loop
        self.local: bool | None = None if self.port is not None else False
        self.recheck_every = recheck_every
        # the wait before the next look: recheck_every while an owner is known; doubled
        # after each look that found none, up to MISS_MAX_S (a port held by another user,
        # or a server not up yet: each look lists every socket and process on the host)
        self._delay = recheck_every
        self._find, self._alive, self._clock = find, alive, clock
        self._owner: Owner | None = None
        self._role: str | None = None
        self._next = -math.inf
        self._running: asyncio.Future | None = None

    def check(self) -> None:
        """One look (blocking; in a worker thread): keep the owner while it lives, else find
        the port's owner again and read its command line once."""
        try:
            if self.local is None:
                self.local = discovery.is_local_host(self._host)
            if not self.local:
                return
            if self._owner is not None and self._alive(self._owner):
                return
            owner, _ = self._find(self.port) if self.port is not None else (None, "")
            self._owner = owner
            self._role = role_from_argv(owner.kind, owner.argv) if owner else None
        except Exception:   # psutil in an odd sandbox: no role, the scrape goes on
            self._owner, self._role = None, None
            if self.local is None:
                self.local = False
        self._delay = self.recheck_every if self._owner is not None else \
            min(MISS_MAX_S, self._delay * 2)

    def poll(self) -> list[Reading]:
        """The role reading as last read ([] while unknown), starting a look in a worker
        thread when one is due (on the event loop; never waits for it)."""
        if self.local is False:
            return [self._reading(None, REMOTE_WHY)]
        now = self._clock()
        if now >= self._next and (self._running is None or self._running.done()):
            self._next = now + self._delay
            self._running = asyncio.get_running_loop().run_in_executor(None, self.check)
        return [self._reading(self._role)] if self._role else []

    def _reading(self, role: str | None, why: str = "") -> Reading:
        spec = SPECS[KEY]
        return Reading(KEY, 1.0 if role else None, spec.unit,
                       make_labels(instance=self.instance),
                       Status.OK if role else Status.NODATA, why, spec.kind, role)
