"""A real Python process tree for the py-spy tests: a parent and one child process.

Parent threads: ``hot_spin`` runs ``hot_spin_loop`` flat out (the known hot function and,
almost always, the GIL holder), ``light_worker`` runs ``light_work_loop`` at a ~5% duty
cycle, ``idle_waiter`` blocks on an Event.  The child (``--child``) runs two
``child_work_loop`` threads at a ~10% duty cycle, so ``hot_spin_loop`` dominates the
tree's on-CPU time.

Prints ``READY <parent pid> <child pid>`` once every thread runs, then lives until its
stdin closes (the test ends it) or ``--lifetime`` seconds pass, so it never outlives a
crashed test run for long.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

STOP = threading.Event()


def hot_spin_loop() -> None:
    x = 0
    while not STOP.is_set():
        for _ in range(10_000):
            x += 1


def _duty(busy_s: float, idle_s: float) -> None:
    end = time.perf_counter() + busy_s
    y = 0
    while time.perf_counter() < end:
        y += 1
    STOP.wait(idle_s)


def light_work_loop() -> None:
    while not STOP.is_set():
        _duty(0.001, 0.019)


def child_work_loop() -> None:
    while not STOP.is_set():
        _duty(0.002, 0.018)


def idle_wait() -> None:
    STOP.wait()


def _start(target, name: str) -> threading.Thread:
    t = threading.Thread(target=target, name=name, daemon=True)
    t.start()
    return t


def _watch_stdin() -> None:
    try:
        sys.stdin.read()
    finally:
        STOP.set()


def main(argv: list[str]) -> int:
    lifetime = 60.0
    if "--lifetime" in argv:
        lifetime = float(argv[argv.index("--lifetime") + 1])
    if "--child" in argv:
        for i in range(2):
            _start(child_work_loop, f"child_worker_{i}")
        _start(_watch_stdin, "stdin_watch")
        print(f"CHILD {__import__('os').getpid()}", flush=True)
        STOP.wait(lifetime)
        STOP.set()
        return 0
    child = subprocess.Popen([sys.executable, __file__, "--child", "--lifetime", str(lifetime)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdin is not None   # both piped above
    line = child.stdout.readline().split()
    child_pid = int(line[1]) if len(line) == 2 and line[0] == "CHILD" else child.pid
    _start(hot_spin_loop, "hot_spin")
    _start(light_work_loop, "light_worker")
    _start(idle_wait, "idle_waiter")
    _start(_watch_stdin, "stdin_watch")
    print(f"READY {__import__('os').getpid()} {child_pid}", flush=True)
    STOP.wait(lifetime)
    STOP.set()
    try:
        child.stdin.close()
        child.wait(5)
    except Exception:
        child.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
