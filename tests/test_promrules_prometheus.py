"""The exported rules in a real Prometheus (Debian's package, on loopback): it scrapes
`infertop demo-server mem-kv-pressure` every second and evaluates the rules every second;
the KV-pressure episode shows as ``ALERTS{alertname="MEM-001"}``, with the finding's
labels and annotations, and the fleet source and screen show it as Prometheus's finding
for that node (aggregate mode: the rules are loaded).  Skips with the install hint when
prometheus is missing."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.parse
import urllib.request

import pytest

from helpers.prom_fleet import INSTALL_HINT, prometheus_binary, start_fleet
from infertop.fleet import FleetPipeline, diagnoser_factory
from infertop.model import Layer
from infertop.probes.prometheus.source import PrometheusSource
from infertop.promrules import export_text
from infertop.tui.screens.fleet import engine_rows, judging_line

pytestmark = [pytest.mark.skipif(prometheus_binary() is None, reason=INSTALL_HINT),
              pytest.mark.integration]   # a real Prometheus scraping a demo server


def query(url: str, q: str) -> list[dict]:
    with urllib.request.urlopen(f"{url}/api/v1/query?query={urllib.parse.quote(q)}",
                                timeout=5) as r:
        return json.load(r)["data"]["result"]


async def _fleet_frame(url: str):
    """One refresh of the fleet source and pipeline, as the fleet screen makes it."""
    src = PrometheusSource(url, timeout=10.0)
    await src.start()
    try:
        return src, FleetPipeline(diagnoser_factory()).feed(await src.next())
    finally:
        await src.stop()


def test_prometheus_raises_mem001_on_a_kv_pressure_demo_server(tmp_path):
    rules = tmp_path / "infertop-rules.yml"
    rules.write_text(export_text())
    fleet = start_fleet(tmp_path, nodes=1, bad_node=None, dead=0, scenario="mem-kv-pressure",
                        rule_files=(rules,))
    try:
        with urllib.request.urlopen(f"{fleet.url}/api/v1/rules", timeout=5) as r:
            groups = json.load(r)["data"]["groups"]
        loaded = {g["name"]: [x.get("health") for x in g["rules"]] for g in groups}
        assert set(loaded) == {"infertop-quantities", "infertop-findings"}
        assert all(h == "ok" for hs in loaded.values() for h in hs), loaded
        # the scenario's KV pressure begins ~25 s in (infertop's own doctor raises MEM-001
        # at 28 s on the same scenario played headless); wait for the firing alert
        deadline = time.monotonic() + 150
        got: list[dict] = []
        while time.monotonic() < deadline and not got:
            got = query(fleet.url, 'ALERTS{alertname="MEM-001", alertstate="firing"}')
            time.sleep(1.0)
        assert got, "MEM-001 never fired: " + json.dumps(
            query(fleet.url, 'ALERTS') + query(fleet.url, "infertop:kv_usage:ratio"))[:2000]
        labels = got[0]["metric"]
        assert labels["layer"] == "memory" and labels["severity"] in ("warn", "crit")
        assert labels["node"] == "node-01" and labels["model_name"]   # the server's labels
        alerts = json.load(urllib.request.urlopen(f"{fleet.url}/api/v1/alerts", timeout=5))
        mem = [a for a in alerts["data"]["alerts"] if a["labels"]["alertname"] == "MEM-001"]
        notes = mem[0]["annotations"]
        assert notes["title"] == "MEM-001 KV-cache pressure"
        assert notes["remedy"].startswith("lower max concurrent sequences")
        assert "KV-cache usage" in notes["value"] and notes["threshold_source"]
        # the fleet screen reads it: Prometheus's finding for node-01, not infertop's
        src, frame = asyncio.run(_fleet_frame(fleet.url))
        assert src.mode_in_use == "aggregate" and frame.judged_by == "prometheus"
        mine = [f for f in frame.node_findings("node-01") if f.code == "MEM-001"]
        assert mine, [f.summary() for f in frame.findings]
        assert dict(mine[0].subject)["via"] == "prometheus" and mine[0].layer is Layer.MEMORY
        assert mine[0].title == "KV-cache pressure" and mine[0].remedy.startswith("lower")
        (row,) = [r for r in engine_rows(frame) if r.node == "node-01"]
        assert row.worst.prometheus and row.values["kv"] is not None
        assert "findings from Prometheus" in judging_line(frame)
    finally:
        fleet.stop()
