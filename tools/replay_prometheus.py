#!/usr/bin/env python3
"""Replay a recording into a real Prometheus with the export loaded; both engines' verdicts.

The recording's series (``infertop.promtool_input``: what Prometheus would have scraped)
are served on loopback, step i at second i of the replay, and a real Prometheus (Debian's
``prometheus``) scrapes them every second (``honor_labels``: the recorded job/instance/
node stay) and evaluates ``infertop rules export`` every second.  At the end: per code,
the worst severity infertop's own diagnosis reached on the same snapshots, and the worst
severity Prometheus fired (``ALERTS`` over the replay), side by side.

    python tools/replay_prometheus.py tests/corpus/vllm-kv-exhaustion.jsonl.gz

Loopback only; Prometheus and the server are stopped at the end (also on Ctrl-C).
"""

from __future__ import annotations

import http.server
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from infertop.promrules import export_text  # noqa: E402
from infertop.promtool_asserts import episodes  # noqa: E402
from infertop.promtool_input import InputSeries, convert  # noqa: E402
from infertop.recording import decode, iter_snapshots  # noqa: E402

RANK = {"notice": 1, "warn": 2, "crit": 3}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _page(series: InputSeries, step: int) -> str:
    lines = []
    for sel, points in series.series.items():
        if sel.startswith("up{") or sel == "up":
            continue     # Prometheus makes its own up
        v = points.get(step)
        if isinstance(v, float):
            lines.append(f"{sel} {v!r}")
    return "\n".join(lines) + "\n"


def query(url: str, q: str) -> list[dict]:
    with urllib.request.urlopen(f"{url}/api/v1/query?query={urllib.parse.quote(q)}",
                                timeout=10) as r:
        return json.load(r)["data"]["result"]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.split("\n\n")[-2], file=sys.stderr)
        return 2
    prom_bin = shutil.which("prometheus")
    if prom_bin is None:
        print("needs prometheus: apt-get install prometheus", file=sys.stderr)
        return 2
    path = Path(argv[0])
    data = path.read_bytes()
    series = convert(decode(data, path.name), 1.0)
    eps, _t0, length = episodes(iter_snapshots(decode(data, path.name)))
    start = [0.0]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:    # noqa: N802 (http.server's name)
            step = min(series.steps - 1, max(0, int(time.monotonic() - start[0])))
            body = _page(series, step).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a) -> None:
            pass

    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        (work / "rules.yml").write_text(export_text())
        sport, pport = _port(), _port()
        (work / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            "  evaluation_interval: 1s\n"
            f"rule_files: [{json.dumps(str(work / 'rules.yml'))}]\n"
            "scrape_configs:\n  - job_name: replay\n    honor_labels: true\n"
            f"    static_configs: [{{targets: ['127.0.0.1:{sport}']}}]\n")
        server = http.server.ThreadingHTTPServer(("127.0.0.1", sport), Handler)
        prom = subprocess.Popen(
            [prom_bin, f"--config.file={work / 'prometheus.yml'}",
             f"--storage.tsdb.path={work / 'tsdb'}", f"--web.listen-address=127.0.0.1:{pport}",
             "--log.level=warn"], stdout=subprocess.DEVNULL, stderr=open(work / "p.err", "w"))
        url = f"http://127.0.0.1:{pport}"
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    query(url, "up")
                    break
                except OSError:
                    time.sleep(0.5)
            start[0] = time.monotonic()
            threading.Thread(target=server.serve_forever, daemon=True).start()
            time.sleep(series.steps + 5)
            span = int(time.monotonic() - start[0]) + 5
            got = query(url, f'max by (alertname, severity) '
                             f'(max_over_time(ALERTS{{alertstate="firing"}}[{span}s]))')
        finally:
            server.shutdown()
            prom.terminate()
            prom.wait(20)
    prom_worst: dict[str, str] = {}
    for r in got:
        code, sev = r["metric"].get("alertname", ""), r["metric"].get("severity", "")
        if RANK.get(sev, 0) > RANK.get(prom_worst.get(code, ""), 0):
            prom_worst[code] = sev
    print(f"{path.name}: {series.steps} s replayed into Prometheus (scrape and evaluation "
          f"every 1 s); in-process run {length:.0f} s")
    print("| code | infertop (in-process) | Prometheus (export) |")
    print("|---|---|---|")
    for code in sorted(set(eps) | set(prom_worst)):
        ours = eps[code].worst.value if code in eps else "none"
        print(f"| {code} | {ours} | {prom_worst.get(code, 'none')} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
