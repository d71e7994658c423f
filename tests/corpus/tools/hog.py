#!/usr/bin/env python3
"""Unrelated CPU hog: N processes of pure-Python busy loop for S seconds (bounded)."""
import multiprocessing as mp
import sys
import time


def spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        for _ in range(10000):
            x += 1


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    s = min(float(sys.argv[2]) if len(sys.argv) > 2 else 40, 300)
    ps = [mp.Process(target=spin, args=(s,)) for _ in range(n)]
    for p in ps:
        p.start()
    for p in ps:
        p.join(s + 10)
