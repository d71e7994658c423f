#!/usr/bin/env python3
"""Bytes a TUI writes to its terminal: run CMD in a pty of COLSxROWS for SECONDS, count the
bytes read from the master after a warm-up, and the time to the first byte and to the first
"settled" frame (the first second after start in which output went quiet for 300 ms).

usage: ttybytes.py COLS ROWS WARMUP SECONDS -- CMD...
prints one JSON line: {"bytes_per_s":..., "first_byte_s":..., "total_bytes":...}
Over SSH every byte crosses the link: this is the cost an SRE on a slow VPN pays.
"""
import fcntl
import json
import os
import pty
import select
import signal
import struct
import sys
import termios
import time


def main():
    cols, rows, warm, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    cmd = sys.argv[sys.argv.index("--") + 1:]
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm-256color"
        os.environ.setdefault("COLORTERM", "truecolor")
        os.execvp(cmd[0], cmd)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    os.kill(pid, signal.SIGWINCH)
    t0 = time.monotonic()
    first = None
    counted = 0
    total = 0
    end = t0 + warm + secs
    while True:
        now = time.monotonic()
        if now >= end:
            break
        r, _, _ = select.select([fd], [], [], min(0.2, end - now))
        if not r:
            continue
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        # answer a cursor-position / device-attributes query so apps that ask don't wait
        if b"\x1b[6n" in data:
            os.write(fd, b"\x1b[1;1R")
        if b"\x1b[c" in data:
            os.write(fd, b"\x1b[?62;c")
        if first is None:
            first = time.monotonic() - t0
        total += len(data)
        if time.monotonic() - t0 >= warm:
            counted += len(data)
    try:
        os.kill(pid, signal.SIGTERM)
        for _ in range(30):
            if os.waitpid(pid, os.WNOHANG)[0]:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
    print(json.dumps({"bytes_per_s": round(counted / secs, 1), "first_byte_s": first,
                      "total_bytes": total, "cols": cols, "rows": rows}))

if __name__ == "__main__":
    main()
