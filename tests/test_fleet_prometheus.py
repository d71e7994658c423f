"""A real fleet: `infertop demo-server --nodes 4` (node-04 misbehaves) plus one target
nobody answers, scraped every second by a real Prometheus (Debian's package) on loopback;
infertop reads it through Prometheus's HTTP API.  Skips with the install hint when the
prometheus binary is missing (.ci/run installs it)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from helpers.prom_fleet import INSTALL_HINT, prometheus_binary, start_fleet
from helpers.snapkit import meta_of, value_of
from infertop.fleet import FleetPipeline, diagnoser_factory, split_nodes
from infertop.meta import NvmlMeta, ServerMeta
from infertop.model import Status
from infertop.probes.prometheus.source import PrometheusSource

pytestmark = [pytest.mark.skipif(prometheus_binary() is None, reason=INSTALL_HINT),
              pytest.mark.integration]   # a real Prometheus scraping a demo fleet

NODES = ["node-01", "node-02", "node-03", "node-04"]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = start_fleet(tmp_path_factory.mktemp("fleet"), nodes=4, bad_node=4, dead=1)
    yield f
    f.stop()


def infertop(*args, timeout=90):
    return subprocess.run([sys.executable, "-m", "infertop", *args], capture_output=True,
                          text=True, timeout=timeout)


async def test_every_node_reads_gpus_and_server_through_prometheus(fleet):
    src = PrometheusSource(fleet.url)
    await src.start()
    try:
        snap = await src.next()
    finally:
        await src.stop()
    nodes = split_nodes(snap)
    assert set(NODES) <= set(nodes)
    for node in NODES:
        part = nodes[node]
        gpu = part.samples["nvml"]
        assert gpu.status is Status.OK and meta_of(gpu, NvmlMeta).hostname == node
        assert [r.text for r in gpu.readings if r.key == "gpu.info"] == ["NVIDIA H100 80GB HBM3"]
        servers = [s for n, s in part.samples.items() if n.startswith("server:")]
        assert len(servers) == 1 and servers[0].status is Status.OK
        assert meta_of(servers[0], ServerMeta).dialect == "vllm"
        assert servers[0].find("latency.ttft_seconds"), "histograms come through"
        ups = [r.value for r in part.samples["prometheus"].readings if r.key == "node.up"]
        assert ups == [1.0, 1.0]
        ages = [value_of(r) for r in part.samples["prometheus"].readings
                if r.key == "node.scrape_age_seconds"]
        assert ages and all(0 <= a < 10 for a in ages)
    dead = nodes["node-dead1"]
    (name, s), = [(n, s) for n, s in dead.samples.items() if n.startswith("server:")]
    assert s.status is Status.ERROR and "cannot scrape" in s.reason


async def test_counters_through_prometheus_match_a_direct_scrape(fleet):
    """The same server read both ways: Prometheus's value is the one it scraped at most a
    scrape interval ago, so it lies just below the direct read (counters only grow)."""
    from infertop.probes.server.metrics import ServerMetricsProbe
    target = fleet.targets()
    inst = next(t["labels"]["instance"] for t in target
                if t["labels"].get("node") == "node-01" and t["labels"]["job"] == "server")
    src = PrometheusSource(fleet.url)
    probe = ServerMetricsProbe(inst)
    await src.start()
    await probe.open()
    try:
        snap = await src.next()
        direct = await probe.collect()
    finally:
        await src.stop()
        await probe.close()
    via = split_nodes(snap)["node-01"].samples[f"server:{inst}"]
    a = value_of(via.find("server.generation_tokens_total")[0])
    b = value_of(direct.find("server.generation_tokens_total")[0])
    assert 0 < a <= b
    assert b - a < 5 * 2000, "more than a few seconds of tokens apart"
    assert {r.key for r in via.readings} == {r.key for r in direct.readings}


async def test_fleet_pipeline_finds_the_bad_node_and_the_dead_one(fleet):
    src = PrometheusSource(fleet.url)
    pipe = FleetPipeline(diagnoser_factory())
    await src.start()
    found: set = set()
    try:   # up to 25 ticks: on a starved box Prometheus scrapes late, quantiles come later
        for _ in range(25):
            frame = pipe.feed(await src.next())
            found = {(f.code, dict(f.subject).get("node")) for f in frame.findings}
            if {("FLT-003", "node-dead1"), ("FLT-001", "node-04")} <= found:
                break
            await asyncio.sleep(1.0)
    finally:
        await src.stop()
    assert ("FLT-003", "node-dead1") in found
    assert ("FLT-001", "node-04") in found
    assert not any(node in ("node-01", "node-02", "node-03") for _, node in found), found
    # through Prometheus: the evidence says so and quotes the target's last error
    dead = next(f for f in frame.findings
                if f.code == "FLT-003" and dict(f.subject).get("node") == "node-dead1")
    note = dead.evidence[0].note
    assert note.startswith("Prometheus cannot scrape") and "refused" in note.lower(), note


def test_doctor_names_the_bad_node(fleet):
    p = infertop("doctor", "--prometheus", fleet.url, "--duration", "10", "--format", "json")
    assert p.returncode == 2, p.stderr          # FLT-003: a node nobody can read is critical
    doc = json.loads(p.stdout)
    found = {(f["code"], f["subject"].get("node")) for f in doc["findings"]}
    assert ("FLT-003", "node-dead1") in found
    # node-04's TTFT burst: its own DEC-001, or the cross-node view of it (slow among its
    # peers, or the replicas' load out of balance), whichever had its inputs in 10 s
    assert found & {("DEC-001", "node-04"), ("FLT-001", "node-04"), ("FLT-002", "node-04")}
    assert not any(node in ("node-01", "node-02", "node-03") for _, node in found), found
    text = infertop("doctor", "--prometheus", fleet.url, "--duration", "10")
    assert "node-04" in text.stdout and "node-dead1" in text.stdout


def test_snapshot_json_labels_every_reading_with_its_node(fleet):
    p = infertop("snapshot", "--json", "--prometheus", fleet.url, "--window", "2")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    hw = doc["layers"]["hardware"]["readings"]
    assert {r["labels"]["node"] for r in hw if r["key"] == "gpu.util_ratio"} == set(NODES)
    assert any(n.endswith("@node-dead1") and s["status"] == "error"
               for n, s in doc["sources"].items())


def test_record_a_fleet_and_replay_it_through_the_fleet_pipeline(fleet, tmp_path):
    from infertop.probes.sources.replay import ReplaySource
    out = tmp_path / "fleet.jsonl.gz"
    p = infertop("record", "--prometheus", fleet.url, "-o", str(out), "--duration", "3")
    assert p.returncode == 0, p.stderr
    src = ReplaySource(out)
    pipe = FleetPipeline(diagnoser_factory())

    async def play():
        frame = None
        while (snap := await src.next()) is not None:
            frame = pipe.feed(snap)
        return frame
    frame = asyncio.run(play())
    assert set(NODES) <= set(frame.nodes)
    assert src.fleet   # the recording says it is a fleet: the screen replays it per node


def test_prometheus_down_is_one_line_and_exit_3():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = infertop("doctor", "--prometheus", f"http://127.0.0.1:{port}", "--duration", "1")
    assert p.returncode == 3, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    p = infertop("snapshot", "--json", "--prometheus", f"127.0.0.1:{port}", "--window", "1")
    assert p.returncode == 3
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert lines and all(l.startswith("infertop: ") for l in lines)
    assert "cannot connect to Prometheus" in p.stderr
    p = infertop("snapshot", "--json", "--prometheus", "ftp://x")
    assert p.returncode == 2 and p.stderr.count("\n") == 1
