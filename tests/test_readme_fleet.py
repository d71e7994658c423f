"""The fleet from the README alone (issue 35, item 5): the two `prometheus.yml` snippets
of README's "The fleet from this README alone", as written, load in a real Prometheus;
the demo one, with `demo-server --targets`, gives infertop its nodes by their `node`
label, and the real-deployment one names each node after its host."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from helpers.inproc import run_main
from helpers.prom_fleet import INSTALL_HINT, free_port, prometheus_binary

needs_prometheus = pytest.mark.skipif(prometheus_binary() is None, reason=INSTALL_HINT)

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_snippets() -> list[str]:
    """The YAML blocks of the README's fleet section, in order (demo, real)."""
    text = README.read_text()
    section = text.split("#### The fleet from this README alone", 1)[1].split("\n### ", 1)[0]
    return re.findall(r"```yaml\n(.*?)```", section, re.S)


def start_prometheus(config: Path, workdir: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    prometheus = prometheus_binary()
    assert prometheus is not None
    proc = subprocess.Popen(
        [prometheus, f"--config.file={config}", f"--storage.tsdb.path={workdir}",
         f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=open(workdir.with_suffix(".err"), "w"))
    return proc, f"http://127.0.0.1:{port}"


def targets_up(url: str, want: int, deadline: float = 60.0) -> list[dict]:
    """Prometheus's active targets once ``want`` of them are up (polled, 60 s at most)."""
    end = time.monotonic() + deadline
    got: list[dict] = []
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(f"{url}/api/v1/targets", timeout=5) as r:
                got = json.load(r)["data"]["activeTargets"]
            if sum(t["health"] == "up" for t in got) >= want:
                return got
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.5)
    raise AssertionError(f"targets not up in time: {got}")


def test_readme_has_both_snippets_with_a_node_label():
    demo_yml, real_yml = readme_snippets()
    assert "/tmp/infertop-sd/server.json" in demo_yml and "/tmp/infertop-sd/dcgm.json" in demo_yml
    for yml in (demo_yml, real_yml):
        assert yml.count("target_label: node") == 2 and "job_name: dcgm" in yml


@needs_prometheus
@pytest.mark.integration    # a real Prometheus (two) and a demo fleet
@pytest.mark.slow
def test_readme_prometheus_yml_runs_the_demo_fleet_and_a_real_layout(tmp_path):
    demo_yml, real_yml = readme_snippets()
    sd = tmp_path / "sd"
    sd.mkdir()
    demo = subprocess.Popen([sys.executable, "-m", "infertop", "demo-server", "--nodes", "2",
                             "--port", "0", "--targets", str(sd)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    procs = [demo]
    assert demo.stdout is not None
    try:
        assert demo.stdout.readline().strip() == "READY"
        servers = [g["targets"][0] for g in json.loads((sd / "server.json").read_text())]
        dcgms = [g["targets"][0] for g in json.loads((sd / "dcgm.json").read_text())]
        # the snippets as written; only their paths and hosts point at this test's fleet
        (tmp_path / "demo.yml").write_text(demo_yml.replace("/tmp/infertop-sd", str(sd)))
        real = real_yml
        for host, (srv, dcgm) in zip(("127.0.0.1", "localhost"), zip(servers, dcgms)):
            n = 1 if host == "127.0.0.1" else 2
            real = real.replace(f"gpu-node-{n}:8000", f"{host}:{srv.rsplit(':', 1)[1]}")
            real = real.replace(f"gpu-node-{n}:9400", f"{host}:{dcgm.rsplit(':', 1)[1]}")
        real = real.replace("scrape_interval: 15s", "scrape_interval: 1s")   # the wait only
        (tmp_path / "real.yml").write_text(real)
        prom_demo, url_demo = start_prometheus(tmp_path / "demo.yml", tmp_path / "tsdb-demo")
        prom_real, url_real = start_prometheus(tmp_path / "real.yml", tmp_path / "tsdb-real")
        procs += [prom_demo, prom_real]
        for url, nodes in ((url_demo, {"node-01", "node-02"}),
                           (url_real, {"127.0.0.1", "localhost"})):
            got = targets_up(url, 4)
            for job in ("server", "dcgm"):
                named = {t["labels"].get("node") for t in got if t["labels"]["job"] == job}
                assert named == nodes, (url, job, got)
        r = run_main("snapshot", "--json", "--prometheus", url_demo, "--window", "2")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        text = json.dumps(doc)
        assert '"node-01"' in text and '"node-02"' in text, r.stderr
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
