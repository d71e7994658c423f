"""How soon infertop shows something (issue 35 item 2).

    python benchmarks/bench_start.py [--runs N] [--frames N] [--sizes 80x24,160x48] [-- CMD...]

Prints the load average, then the min and median wall time of N runs (default 20) of
`infertop --version`, `--help` and the screen without a terminal (its one-line error),
then for CMD (default: `infertop --or-demo`, the demo tour where there is no GPU and no
server) run in a pty of each size (the pty loop of benchmarks/harness/ttybytes.py:
TERM=xterm-256color, cursor-position queries answered), over --frames runs (default 7):
  first byte   the first byte on the terminal (the splash line, cli/splash.py);
  titles       the first moment all six panes' titles ("1 hardware" .. "6 decoding") have
               been drawn, read from the byte stream with its escape sequences taken out
               (the changed-cells writer moves over blank cells, so a space may be gone);
               the panes may still say "waiting for the first tick";
  full frame   the titles and the first snapshot drawn: the status line's "tick 1",
               written in the same paint as the panes' first values (the tick's _apply
               updates header, panes and status in one go on the event loop).
Numbers, not assertions: benchmarks/start-issue35.md holds the measured ones.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import statistics
import struct
import subprocess
import sys
import termios
import time

INFERTOP = [sys.executable, "-m", "infertop"]
LAYERS = ("hardware", "kernels", "memory", "scheduling", "parallelism", "decoding")
TITLES = [re.compile(rf"{i + 1} ?{name}".encode()) for i, name in enumerate(LAYERS)]
ESCAPES = re.compile(rb"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])")
# the status line's clock once the first snapshot is drawn (tui/app.py tick_text)
FIRST_TICK = re.compile(rb"tick ?1(?![0-9])")
TIMEOUT = 60.0


def stats(values: list[float]) -> str:
    good = [v for v in values if v == v]
    if not good:
        return "n/a"
    missed = f", {len(values) - len(good)} missed" if len(good) < len(values) else ""
    return f"min {min(good):.3f} s  median {statistics.median(good):.3f} s{missed}"


def wall(cmd: list[str], runs: int, stdin: int | None = None) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdin=stdin, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
        out.append(time.perf_counter() - t0)
    return out


def first_frame(cmd: list[str], cols: int, rows: int) -> tuple[float, float, float]:
    """(first byte, six titles, first full frame) in seconds after the fork; nan when
    not seen."""
    t0 = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:   # the child: its terminal's size set before infertop starts
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        os.environ["TERM"] = "xterm-256color"
        os.execvp(cmd[0], cmd)
    first = titles = full = float("nan")
    text = b""
    missing = [*TITLES, FIRST_TICK]
    deadline = t0 + TIMEOUT
    try:
        while missing and time.perf_counter() < deadline:
            if not select.select([fd], [], [], 0.05)[0]:
                continue
            try:
                data = os.read(fd, 65536)
            except OSError:      # EIO: the child ended
                break
            if not data:
                break
            now = time.perf_counter() - t0
            if first != first:
                first = now
            if b"\x1b[6n" in data:
                os.write(fd, b"\x1b[1;1R")
            if b"\x1b[c" in data:
                os.write(fd, b"\x1b[?62;c")
            text = (text + data)[-1_000_000:]
            plain = ESCAPES.sub(b"", text)
            missing = [t for t in missing if not t.search(plain)]
            if titles != titles and not any(t in missing for t in TITLES):
                titles = now
            if not missing:
                full = now
    finally:
        os.kill(pid, signal.SIGTERM)
        end = time.monotonic() + 10
        while time.monotonic() < end and os.waitpid(pid, os.WNOHANG) == (0, 0):
            time.sleep(0.05)
        else:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        os.close(fd)
    return first, titles, full


def option(name: str, default: str) -> str:
    args = sys.argv[1:sys.argv.index("--")] if "--" in sys.argv else sys.argv[1:]
    return args[args.index(name) + 1] if name in args else default


def main() -> None:
    cmd = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else \
        [*INFERTOP, "--or-demo"]
    runs, frames = int(option("--runs", "20")), int(option("--frames", "7"))
    sizes = [tuple(int(n) for n in s.split("x")) for s in option("--sizes", "80x24,160x48")
             .split(",")]
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"(2 cores), {runs} runs each")
    print(f"--version          {stats(wall([*INFERTOP, '--version'], runs))}")
    print(f"--help             {stats(wall([*INFERTOP, '--help'], runs))}")
    print(f"no terminal error  {stats(wall(INFERTOP, runs, stdin=subprocess.DEVNULL))}")
    print(f"python -c pass     {stats(wall([sys.executable, '-c', 'pass'], runs))}  "
          "(the interpreter alone)")
    print(f"{' '.join(cmd[1:] if cmd[:1] == [sys.executable] else cmd)} in a pty, "
          f"{frames} runs:")
    for cols, rows in sizes:
        got = [first_frame(cmd, cols, rows) for _ in range(frames)]
        print(f"  {cols}x{rows} first byte   {stats([g[0] for g in got])}")
        print(f"  {cols}x{rows} six titles   {stats([g[1] for g in got])}")
        print(f"  {cols}x{rows} full frame   {stats([g[2] for g in got])}")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")


if __name__ == "__main__":
    main()
