"""A small real process tree that looks like a vLLM server to /proc, for probe tests.

    parent (python spawn_tree.py ...)           optional TCP listener on 127.0.0.1
      └─ child, comm "VLLM::EngineCor"          (what setproctitle's title looks like in comm)
           ├─ threads burner-1..3 burning CPU  (OS thread names set with prctl)
           └─ sleeper (python -c ...)           optional, for "exits between ticks"

Run as a script it prints one JSON line {"parent", "child", "sleeper", "port"} when
everything is up, then lives until its stdin closes.  Every level holds the next one by a
stdin pipe, so the whole tree goes away when the test (or pytest) lets go, even on a crash.
``spawn()`` does all that for a test and cleans up by pid.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

HERE = os.path.abspath(__file__)
PR_SET_NAME = 15
ENGINE_COMM = "VLLM::EngineCor"  # 'VLLM::EngineCore' cut to 15 chars, as /proc shows it


def _set_thread_name(name: str) -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def _burn(name: str, seconds: float, named: threading.Event) -> None:
    _set_thread_name(name)
    named.set()
    # sha256 of a large buffer releases the GIL, so the three threads burn in parallel
    data = b"x" * (1 << 20)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        hashlib.sha256(data).digest()


def child_main(burn: float, sleeper: bool) -> None:
    with open("/proc/self/comm", "w") as f:  # setproctitle is not installed here
        f.write(ENGINE_COMM)
    named = [threading.Event() for _ in range(3)]
    threads = [threading.Thread(target=_burn, args=(f"burner-{i + 1}", burn, named[i]),
                                name=f"burner-{i + 1}", daemon=True) for i in range(3)]
    for t in threads:
        t.start()
    for e in named:  # report ready only once /proc shows the names
        e.wait(10)
    sleeper_pid = None
    if sleeper:
        sp = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                              stdin=subprocess.PIPE)
        sleeper_pid = sp.pid
    print(json.dumps({"sleeper": sleeper_pid}), flush=True)
    sys.stdin.read()  # until the parent lets go
    os._exit(0)


def parent_main(burn: float, sleeper: bool, listen: bool) -> None:
    args = [sys.executable, HERE, "--child", "--burn", str(burn)]
    args += ["--sleeper"] if sleeper else []
    child = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdin is not None   # both piped above
    line = child.stdout.readline()
    info = json.loads(line) if line else {"sleeper": None}
    port = None
    if listen:
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
    print(json.dumps({"parent": os.getpid(), "child": child.pid, "sleeper": info["sleeper"],
                      "port": port}), flush=True)
    sys.stdin.read()
    child.stdin.close()
    try:
        child.wait(5)
    except subprocess.TimeoutExpired:
        child.kill()


@contextmanager
def spawn(*, burn: float = 0.0, sleeper: bool = False, listen: bool = False) -> Iterator[dict]:
    """Start the tree; yield {"parent", "child", "sleeper", "port", "proc"}; stop it."""
    args = [sys.executable, HERE, "--burn", str(burn)]
    args += (["--sleeper"] if sleeper else []) + (["--listen"] if listen else [])
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None   # piped above
    info: dict = {}
    try:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"spawn_tree did not start (exit {proc.wait(5)})")
        info = json.loads(line)
        info["proc"] = proc
        yield info
    finally:
        if proc.stdin and not proc.stdin.closed:
            proc.stdin.close()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        for key in ("child", "sleeper"):  # stragglers: only pids this helper started
            pid = info.get(key)
            if pid and _still_ours(pid):
                try:
                    os.kill(pid, 9)
                except (ProcessLookupError, PermissionError):
                    pass


def _still_ours(pid: int) -> bool:
    """True if pid is still a process of this tree (not a reused pid)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return False
    return any(HERE.encode() == a or b"sys.stdin.read()" in a for a in argv)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--burn", type=float, default=0.0)
    ap.add_argument("--sleeper", action="store_true")
    ap.add_argument("--listen", action="store_true")
    a = ap.parse_args()
    if a.child:
        child_main(a.burn, a.sleeper)
    else:
        parent_main(a.burn, a.sleeper, a.listen)
