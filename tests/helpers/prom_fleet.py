"""A fleet to test against: ``infertop demo-server --nodes N`` scraped by a real Prometheus.

Both run as child processes on loopback only, with a bounded life: the demo fleet serves N
nodes (a server page and a dcgm-exporter page each, one node misbehaving), Prometheus
(Debian's ``prometheus`` package) scrapes them every second from file_sd targets with a
``node`` label, its TSDB in a temporary directory.  ``extra_targets`` adds server targets
nobody listens on (a node whose scrape fails).  When the binary is missing the caller
skips with ``INSTALL_HINT``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

INSTALL_HINT = ("the fleet tests need a real Prometheus: `apt-get install prometheus` "
                "(Debian/Ubuntu; .ci/run installs it), or put a `prometheus` binary on PATH")


def prometheus_binary() -> str | None:
    return os.environ.get("INFERTOP_PROMETHEUS") or shutil.which("prometheus")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PromFleet:
    url: str
    nodes: int
    bad_node: str | None
    dead_targets: list[str]
    workdir: Path
    procs: list[subprocess.Popen] = field(default_factory=list)

    def targets(self) -> list[dict]:
        with urllib.request.urlopen(f"{self.url}/api/v1/targets", timeout=5) as r:
            return json.load(r)["data"]["activeTargets"]

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)


def start_fleet(workdir: Path, *, nodes: int = 4, bad_node: int | None = 4,
                dead: int = 1, scrape_interval: str = "1s", scenario: str | None = None,
                ready_scrapes: int = 3, timeout: float = 60.0,
                rule_files: tuple[Path, ...] = ()) -> PromFleet:
    """Start the demo fleet and Prometheus; return once every live target was scraped
    ``ready_scrapes`` times (so counters have a rate and histograms a window).
    ``rule_files`` are loaded and evaluated every ``scrape_interval``."""
    binary = prometheus_binary()
    if binary is None:
        raise FileNotFoundError(INSTALL_HINT)
    sd = workdir / "sd"
    sd.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "infertop", "demo-server", "--nodes", str(nodes),
           "--port", "0", "--targets", str(sd)]
    if scenario:
        cmd.insert(4, scenario)
    if bad_node:
        cmd += ["--bad-node", str(bad_node)]
    fleet = PromFleet("", nodes, f"node-{bad_node:02d}" if bad_node else None, [], workdir)
    demo = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(workdir / "demo.err", "w"),
                            text=True)
    fleet.procs.append(demo)
    assert demo.stdout is not None   # piped above
    try:
        line = demo.stdout.readline().strip()
        if line != "READY":
            raise RuntimeError(f"demo fleet did not start: {line!r} "
                               f"{(workdir / 'demo.err').read_text()[-500:]}")
        groups = json.loads((sd / "server.json").read_text())
        for i in range(dead):   # a node whose server does not answer: nothing listens there
            port = free_port()
            target = f"127.0.0.1:{port}"
            fleet.dead_targets.append(target)
            groups.append({"targets": [target], "labels": {"node": f"node-dead{i + 1}"}})
        (sd / "server.json").write_text(json.dumps(groups))
        port = free_port()
        config = workdir / "prometheus.yml"
        config.write_text(
            "global:\n"
            f"  scrape_interval: {scrape_interval}\n"
            f"  scrape_timeout: {scrape_interval}\n"
            f"  evaluation_interval: {scrape_interval}\n"
            + (f"rule_files: {json.dumps([str(f) for f in rule_files])}\n" if rule_files else "")
            + "scrape_configs:\n"
            "  - job_name: server\n"
            f"    file_sd_configs: [{{files: ['{sd}/server.json'], refresh_interval: 1s}}]\n"
            "  - job_name: dcgm\n"
            f"    file_sd_configs: [{{files: ['{sd}/dcgm.json'], refresh_interval: 1s}}]\n")
        prom = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1h",
             "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=open(workdir / "prometheus.err", "w"))
        fleet.procs.append(prom)
        fleet.url = f"http://127.0.0.1:{port}"
        _wait_scraped(fleet, nodes * 2 + dead, ready_scrapes, timeout)
        return fleet
    except BaseException:
        fleet.stop()
        raise


def _wait_scraped(fleet: PromFleet, expected: int, scrapes: int, timeout: float) -> None:
    """Until Prometheus lists every target and has scraped the live ones ``scrapes`` times
    (counted as sample timestamps of ``up`` over the last minute)."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        for p in fleet.procs:
            if p.poll() is not None:
                raise RuntimeError(f"a fleet process exited ({p.args!r}): see {fleet.workdir}")
        try:
            targets = fleet.targets()
            q = urllib.parse.quote('min(count_over_time(up{job="dcgm"}[1m]))')
            with urllib.request.urlopen(f"{fleet.url}/api/v1/query?query={q}", timeout=5) as r:
                res = json.load(r)["data"]["result"]
            n = float(res[0]["value"][1]) if res else 0.0
            if len(targets) >= expected and n >= scrapes:
                return
            last = f"{len(targets)}/{expected} targets, {n:g}/{scrapes} scrapes"
        except (OSError, ValueError, KeyError) as e:
            last = str(e)
        time.sleep(0.5)
    raise TimeoutError(f"Prometheus not ready within {timeout:g} s: {last}")


