#!/usr/bin/env python3
"""The CPU cost of tui/termdiff.py's CellDiff on a recorded stream of Textual's writes.

    # 1. record: run infertop in a pty of COLSxROWS for SECONDS; every write the quiet
    #    driver gets from Textual (before the filter) is saved, one JSON
    #    [seconds, text] a line after the first, [cols, rows]
    python benchmarks/bench_termdiff.py record OUT.jsonl COLS ROWS SECONDS -- ARGS...
    # 2. replay through the filter (and through the reference filter of
    #    tests/helpers/termdiff_reference.py, the one measured in issue 35, beside it):
    #    CPU seconds per filter, bytes in and out, and that both sent the same bytes
    python benchmarks/bench_termdiff.py replay OUT.jsonl [--rounds 5] [--profile]

Without arguments (``make bench``) a synthetic 160x48 stream of that shape is replayed.
The replay runs each filter over the whole stream ``--rounds`` times (interleaved) and
prints the median CPU (time.process_time) per filter, as a % of one core over the span the
stream was recorded in.  ``--profile`` prints cProfile's top functions of the current
filter.  Asserts nothing; numbers in benchmarks/bytes-issue35.md (round 2).
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import struct
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# the child: infertop's own main with the driver's write wrapped to save what it is given
_CHILD = r"""
import json, sys, time
import infertop.tui.driver as driver
out = open(sys.argv[1], "w", encoding="utf-8")
out.write(json.dumps([int(sys.argv[2]), int(sys.argv[3])]) + "\n")   # the pty's size
start = time.monotonic()
write = driver.QuietLinuxDriver.write
def saving(self, data):
    out.write(json.dumps([round(time.monotonic() - start, 3), data]) + "\n")
    out.flush()
    return write(self, data)
driver.QuietLinuxDriver.write = saving
from infertop.cli.main import main
sys.exit(main(sys.argv[4:]))
"""


def record(out: str, cols: int, rows: int, seconds: float, args: list[str]) -> None:
    import fcntl
    import termios
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm-256color"
        os.environ.setdefault("COLORTERM", "truecolor")
        os.execv(sys.executable, [sys.executable, "-c", _CHILD, out, str(cols), str(rows), *args])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    os.kill(pid, signal.SIGWINCH)
    end = time.monotonic() + seconds
    while (now := time.monotonic()) < end:
        ready, _, _ = select.select([fd], [], [], min(0.2, end - now))
        if not ready:
            continue
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        if b"\x1b[6n" in data:
            os.write(fd, b"\x1b[1;1R")
    os.kill(pid, signal.SIGTERM)
    time.sleep(1.5)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
    print(f"recorded {sum(1 for _ in open(out, encoding='utf-8'))} writes to {out}")


def synthetic(cols: int = 160, rows: int = 48, ticks: int = 30) -> list[str]:
    """A stream shaped as the recorded ones (for ``make bench``, which has no server): every
    tick each row written whole, segment by segment in its style with a reset after each,
    a few numbers changed; its lines as a recording's."""
    import random
    rng = random.Random(35)
    styles = ["38;2;79;163;224;48;2;16;20;24", "48;2;16;20;24", "38;2;216;222;228;48;2;16;20;24",
              "1;38;2;239;160;48;48;2;16;20;24"]
    frames = [json.dumps([cols, rows])]
    values = [[rng.randrange(100) for _ in range(6)] for _ in range(rows)]
    for tick in range(ticks):
        out = []
        for y in range(rows):
            if rng.random() < 0.3:
                values[y][rng.randrange(6)] = rng.randrange(100)
            cells = "".join(f"{v:3d} % ██░ " for v in values[y])[:cols - 4]
            out.append(f"\x1b[{y + 1};1H\x1b[{styles[0]}m│\x1b[0m\x1b[{styles[1]}m \x1b[0m"
                       f"\x1b[{styles[2 + y % 2]}m{cells.ljust(cols - 4)}\x1b[0m"
                       f"\x1b[{styles[1]}m \x1b[0m\x1b[{styles[0]}m│\x1b[0m")
        frames.append(json.dumps([float(tick), "".join(out)]))
    return frames


def replay(path: str, rounds: int, profile: bool) -> None:
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    from helpers.termdiff_reference import CellDiff as Reference
    from infertop.tui.termdiff import CellDiff
    lines = open(path, encoding="utf-8").read().splitlines() if path else synthetic()
    cols, rows = json.loads(lines[0])
    stream = [json.loads(line) for line in lines[1:]]
    path = path or "a synthetic 160x48 stream"
    span = stream[-1][0] - stream[0][0]
    writes = [data for _, data in stream]
    size_in = sum(len(w.encode()) for w in writes)

    def run(cls: type) -> tuple[float, list[str]]:
        cells = cls(cols, rows)
        t0 = time.process_time()
        sent = [cells.feed(w) for w in writes]
        return time.process_time() - t0, sent

    times: dict[str, list[float]] = {"reference": [], "current": []}
    sent: dict[str, list[str]] = {}
    for _ in range(rounds):
        for name, cls in (("reference", Reference), ("current", CellDiff)):
            dt, sent[name] = run(cls)
            times[name].append(dt)
    import statistics
    print(f"{path}: {len(writes)} writes over {span:.1f} s at {cols}x{rows}, "
          f"{size_in / span:.0f} B/s from Textual")
    for name, dts in times.items():
        out = sum(len(s.encode()) for s in sent[name])
        med = statistics.median(dts)
        print(f"  {name:9s}: {med * 1000:7.1f} ms CPU (median of {rounds}) = "
              f"{med / span * 100:.3f} % of a core; sent {out / span:.0f} B/s")
    same = sent["reference"] == sent["current"]
    print(f"  same bytes sent: {same}")
    if profile:
        import cProfile
        import pstats
        prof = cProfile.Profile()
        prof.enable()
        run(CellDiff)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(12)


def main() -> None:
    cmd = sys.argv[1:2]
    if cmd == ["record"]:
        out, cols, rows, secs = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), \
            float(sys.argv[5])
        record(out, cols, rows, secs, sys.argv[sys.argv.index("--") + 1:])
    elif cmd == ["replay"]:
        rest = sys.argv[3:]
        rounds = int(rest[rest.index("--rounds") + 1]) if "--rounds" in rest else 5
        replay(sys.argv[2], rounds, "--profile" in rest)
    elif not cmd:              # make bench: no recording at hand
        replay("", 5, False)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
