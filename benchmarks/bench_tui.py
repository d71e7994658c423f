#!/usr/bin/env python3
"""The TUI's own cost: CPU % of one core and RSS at 1 Hz over 60 s, in tmux, plus the
time to first frame seen from outside (process start -> 'tick 1' on the tmux screen).

    python benchmarks/bench_tui.py [--seconds 60] [--size 160x48] [-- infertop args...]

Default args: `demo healthy` (works on a machine with no GPU and no server).  Against a
real server: `-- --url http://127.0.0.1:8011`.  Targets: <= 2 % CPU, <= 60 MB RSS,
first frame <= 0.5 s.  Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK  # utime + stime


def rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def find_pid(session: str, timeout: float = 10) -> int:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        out = subprocess.run(["tmux", "-L", "bench", "list-panes", "-t", session, "-F",
                              "#{pane_pid}"], capture_output=True, text=True).stdout.split()
        if out:
            return int(out[0])
        time.sleep(0.01)
    raise SystemExit("tmux pane did not start")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--size", default="160x48")
    ap.add_argument("rest", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    if not shutil.which("tmux"):
        print("tmux is not installed")
        return 1
    args = [x for x in a.rest if x != "--"] or ["demo", "healthy"]
    exe = str(ROOT / ".venv" / "bin" / "infertop")
    w, h = a.size.split("x")
    session = "infertop-bench"
    subprocess.run(["tmux", "-L", "bench", "kill-server"], capture_output=True)
    t0 = time.monotonic()
    subprocess.run(["tmux", "-L", "bench", "new-session", "-d", "-s", session, "-x", w, "-y", h,
                    "exec " + " ".join([exe, *args])], check=True)
    pid = find_pid(session)
    first = None
    while time.monotonic() - t0 < 15:
        screen = subprocess.run(["tmux", "-L", "bench", "capture-pane", "-p", "-t", session],
                                capture_output=True, text=True).stdout
        if "tick 1" in screen or "tick 2" in screen:
            first = time.monotonic() - t0
            break
        time.sleep(0.01)
    time.sleep(3)  # let start-up settle before measuring steady state
    c0, w0 = cpu_seconds(pid), time.monotonic()
    peak = 0.0
    while time.monotonic() - w0 < a.seconds:
        time.sleep(1)
        peak = max(peak, rss_mb(pid))
    c1, w1 = cpu_seconds(pid), time.monotonic()
    rss = rss_mb(pid)
    subprocess.run(["tmux", "-L", "bench", "kill-server"], capture_output=True)
    print(f"infertop {' '.join(args)} at {a.size}, 1 Hz, {w1 - w0:.0f} s")
    print(f"  first frame (process start -> tick 1 on screen): "
          f"{first:.2f} s" if first else "  first frame: not seen within 15 s")
    print(f"  CPU: {100 * (c1 - c0) / (w1 - w0):.2f} % of one core (target <= 2 %)")
    print(f"  RSS: {rss:.1f} MB at the end, {peak:.1f} MB peak (target <= 60 MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
