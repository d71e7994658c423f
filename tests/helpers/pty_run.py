"""Run ``python -m infertop ...`` on a pseudo-terminal, like a user's terminal: wait until
the screen is up, send a signal, and collect every byte it wrote and its exit status.

Waits are on conditions (a byte sequence appears, the process exits) with generous
timeouts, never on a fixed sleep: the 2-core test machine is shared and slow.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

ALT_SCREEN_ON = b"\x1b[?1049h"
ALT_SCREEN_OFF = b"\x1b[?1049l"
CURSOR_SHOWN = b"\x1b[?25h"
MOUSE_OFF = b"\x1b[?1000l"


@dataclass
class PtyRun:
    output: bytes
    returncode: int | None


def run_on_pty(args: list[str], sig: int | None, *, ready: bytes = ALT_SCREEN_ON,
               after_ready: bytes = b"", timeout: float = 90.0,
               hangup: bool = False, until=None, keys: bytes = b"") -> PtyRun:
    """Start infertop on a pty (100x30), wait for ``ready`` (and ``after_ready`` after it)
    and for ``until()`` to be true, type ``keys``, send ``sig`` (None: none); with
    ``hangup`` close our end first (an SSH session dropping)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": str(ROOT),
           "COLUMNS": "100", "LINES": "30"}
    env.pop("TEXTUAL", None)
    proc = subprocess.Popen([sys.executable, "-m", "infertop", *args], stdin=slave,
                            stdout=slave, stderr=slave, cwd=ROOT, env=env,
                            start_new_session=True, close_fds=True)
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while ready not in out or (after_ready and after_ready not in out[out.find(ready):]) \
                or (until is not None and not until()):
            assert time.monotonic() < deadline, f"screen never came up: {bytes(out[-500:])!r}"
            assert proc.poll() is None, f"exited early ({proc.returncode}): {bytes(out)!r}"
            _read(master, out, 0.2)
        if keys:
            os.write(master, keys)
        if hangup:
            os.close(master)
            master = -1
        if sig is not None:
            proc.send_signal(sig)
        while proc.poll() is None:
            assert time.monotonic() < deadline, "did not exit after the signal"
            if master >= 0:
                _read(master, out, 0.2)
            else:
                time.sleep(0.05)
        if master >= 0:
            while _read(master, out, 0.2):
                pass
        return PtyRun(bytes(out), proc.returncode)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if master >= 0:
            os.close(master)


def _read(fd: int, out: bytearray, wait: float) -> bool:
    r, _, _ = select.select([fd], [], [], wait)
    if not r:
        return False
    try:
        data = os.read(fd, 65536)
    except OSError:   # EIO: the other side closed
        return False
    out += data
    return bool(data)


__all__ = ["run_on_pty", "PtyRun", "ALT_SCREEN_OFF", "ALT_SCREEN_ON", "CURSOR_SHOWN",
           "MOUSE_OFF", "signal"]
