"""Several nodes read directly (--url on remote hosts or NODE=URL): the demo fleet in this
process (real HTTP on loopback), each node's server and dcgm-exporter page scraped by
DirectNodeProbes, the same fleet pipeline and cross-node rules as through Prometheus."""

from __future__ import annotations

import asyncio
import socket

import pytest

from infertop.cli.demo_server import FleetDemo
from infertop.fleet import FleetPipeline, diagnoser_factory
from infertop.model import Status
from infertop.probes.sources.fleet_hub import FleetHub, fleet_nodes, split_node


def test_which_url_lists_make_a_fleet():
    assert fleet_nodes(["http://127.0.0.1:8000", "http://127.0.0.1:8001"]) is None  # one box
    assert fleet_nodes(["8000"]) is None
    assert fleet_nodes(["http://10.0.0.1:8000", "http://10.0.0.2:8000"]) == [
        ("10.0.0.1", "http://10.0.0.1:8000"), ("10.0.0.2", "http://10.0.0.2:8000")]
    assert fleet_nodes(["gpu-a=http://127.0.0.1:8000"]) == [("gpu-a", "http://127.0.0.1:8000")]
    assert split_node("http://h:1/metrics?a=b") == (None, "http://h:1/metrics?a=b")


@pytest.mark.slow   # a whole four-node demo fleet served and read
async def test_direct_fleet_finds_the_slow_node_and_the_dead_one():
    fleet = FleetDemo(4, bad_node=3)
    await fleet.start()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]
    try:
        sd = fleet.file_sd()
        urls = []
        for job in ("server", "dcgm"):
            for g in sd[job]:
                urls.append(f"{g['labels']['node']}=http://{g['targets'][0]}")
        urls.append(f"node-dead=http://127.0.0.1:{dead_port}")
        nodes = fleet_nodes(urls)
        assert nodes is not None   # the URLs name their nodes: a fleet
        hub = FleetHub(nodes, deadline=2.0)
        pipe = FleetPipeline(diagnoser_factory())
        await hub.start()
        found: set = set()
        try:   # up to 25 ticks: a starved box answers late, quantiles come later
            for _ in range(25):
                frame = pipe.feed(await hub.next())
                found = {(f.code, dict(f.subject).get("node")) for f in frame.findings}
                own = {f.code for f in frame.nodes["node-dead"].findings}
                if {("FLT-003", "node-dead"), ("FLT-001", "node-04")} <= found \
                        and "DEC-006" in own:
                    break
                await asyncio.sleep(1.0)
        finally:
            await hub.stop()
    finally:
        await fleet.stop()
    assert sorted(frame.nodes) == ["node-01", "node-02", "node-03", "node-04", "node-dead"]
    n1 = frame.nodes["node-01"].snapshot
    assert n1.samples["nvml"].status is Status.OK           # the dcgm-exporter page
    assert n1.value("gpu.util_ratio") is not None
    assert any(n.startswith("server:") and s.status is Status.OK for n, s in n1.samples.items())
    assert ("FLT-003", "node-dead") in found
    assert ("FLT-001", "node-04") in found
    assert not any(n in ("node-01", "node-02", "node-03") for _, n in found), found
    # read directly, not through Prometheus: the evidence says so, and why it failed
    dead = next(f for f in frame.findings
                if f.code == "FLT-003" and dict(f.subject).get("node") == "node-dead")
    note = dead.evidence[0].note
    assert "direct scrape" in note and f"127.0.0.1:{dead_port}" in note, note
    assert "refused" in note.lower(), note
    assert "Prometheus" not in note, note
    # said once in the fleet's lists: the node's own DEC-006 (server not answering) is
    # the same fact as FLT-003, and stays on the node's own screen only
    assert "DEC-006" in {f.code for f in frame.nodes["node-dead"].findings}
    assert ("DEC-006", "node-dead") not in found, found
    assert [f.code for f in frame.node_findings("node-dead")] == ["FLT-003"]


async def test_snapshot_json_of_nodes_named_on_the_command_line():
    """`infertop snapshot --json --url NODE=URL ...`: the fleet path from the command line."""
    import json
    import sys
    fleet = FleetDemo(2)
    await fleet.start()
    try:
        sd = fleet.file_sd()
        args = []
        for job in ("server", "dcgm"):
            for g in sd[job]:
                args += ["--url", f"{g['labels']['node']}=http://{g['targets'][0]}"]
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "infertop", "snapshot", "--json", "--window", "2", *args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 90)
    finally:
        await fleet.stop()
    assert proc.returncode == 0, err.decode()
    doc = json.loads(out)
    util = [r for r in doc["layers"]["hardware"]["readings"] if r["key"] == "gpu.util_ratio"]
    assert {r["labels"]["node"] for r in util} == {"node-01", "node-02"}
    assert {n.split("@")[1] for n in doc["sources"]} == {"node-01", "node-02"}
