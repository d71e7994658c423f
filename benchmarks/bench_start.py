"""How soon infertop shows something (issue 35 item 2).

    python benchmarks/bench_start.py [-- CMD...]

Prints, each the best of 5 runs: the wall time of `infertop --version`, `--help` and the
screen without a terminal (its one-line error), then for CMD (default: `infertop demo
healthy`) run in an 80x24 pty: the time to its first byte and to its first full frame
(as many bytes as the screen has cells: a full frame writes every cell at least once,
the splash line is ~60 bytes).  Numbers, not assertions: see
benchmarks/bytes-issue35.md for the measured ones.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time

INFERTOP = [sys.executable, "-m", "infertop"]


def wall(cmd: list[str], stdin=None) -> float:
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdin=stdin, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
        best = min(best, time.perf_counter() - t0)
    return best


def first_frame(cmd: list[str], cols: int = 80, rows: int = 24) -> tuple[float, float]:
    """(first byte, first full frame) in seconds after the command started."""
    t0 = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm-256color"
        os.execvp(cmd[0], cmd)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    first = full = float("nan")
    seen = b""
    deadline = t0 + 30
    while time.perf_counter() < deadline:
        if not select.select([fd], [], [], 0.05)[0]:
            continue
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if b"\x1b[6n" in data:
            os.write(fd, b"\x1b[1;1R")
        if first != first:
            first = time.perf_counter() - t0
        seen += data
        if len(seen) >= cols * rows:
            full = time.perf_counter() - t0
            break
    os.kill(pid, signal.SIGTERM)
    os.waitpid(pid, 0)
    os.close(fd)
    return first, full


def main() -> None:
    cmd = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else \
        [*INFERTOP, "demo", "healthy"]
    print(f"--version          {wall([*INFERTOP, '--version']):.3f} s")
    print(f"--help             {wall([*INFERTOP, '--help']):.3f} s")
    print(f"no terminal error  {wall(INFERTOP, stdin=subprocess.DEVNULL):.3f} s")
    runs = [first_frame(cmd) for _ in range(5)]
    print(f"first byte         {min(r[0] for r in runs):.3f} s (best of 5)")
    print(f"first full frame   {min(r[1] for r in runs):.3f} s (best of 5)")


if __name__ == "__main__":
    main()
