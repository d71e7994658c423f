"""A demo-server of this checkout started for a benchmark (bench_scrape, bench_collect_process)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time


def start_demo(port: int, scenario: str = "healthy") -> subprocess.Popen:
    """``infertop demo-server SCENARIO --port PORT`` from this Python's environment, once
    it accepts connections (SystemExit when it does not within ~10 s)."""
    exe = os.path.join(os.path.dirname(sys.executable), "infertop")
    proc = subprocess.Popen([exe, "demo-server", scenario, "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("demo-server did not start")
