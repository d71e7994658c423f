"""Cross-node rules: what only a fleet shows (one node among peers, nodes out of balance,
a node nobody can read).

They run on the fleet's whole Frame (``infertop.fleet.FleetPipeline``), where every reading
carries its ``node`` label and latency quantiles are each node's own (derived from that
node's History).  On a single box there is no ``node`` label and they find nothing.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator

from ..findings import Evidence, RuleSpec, Severity
from ..key_symbols import K
from ..keysym import any_of
from ..model import Layer, Valued, make_labels
from .base import Candidate, Context, Rule, ev, sub
from .parallelism import dp_unbalanced

WARN, CRIT = Severity.WARN, Severity.CRIT
LATENCY_KEYS = ("latency.ttft_seconds", "latency.itl_seconds")


# ---- FLT-001 one slow node among peers serving the same model ---------------------------
def slow_node(ctx: Context) -> Iterator[Candidate]:
    t = ctx.t
    for key in LATENCY_KEYS:
        # model -> node -> worst p99 of that node's engines
        by_model: dict[str, dict[str, tuple[float, Valued]]] = {}
        for r in ctx.derived_of(key):
            node = r.label("node")
            if not node or r.label("quantile") != "0.99":
                continue
            per = by_model.setdefault(r.label("model"), {})
            if node not in per or r.value > per[node][0]:
                per[node] = (r.value, r)
        for model, per in sorted(by_model.items()):
            if len(per) < t.fleet_min_peers:
                continue
            for node, (v, r) in sorted(per.items()):
                peers = sorted(pv for n, (pv, _) in per.items() if n != node)
                median = statistics.median(peers)
                limit = max(t.fleet_slow_factor * median, t.fleet_slow_min_seconds)
                if v < limit:
                    continue
                what = "time to first token" if key == "latency.ttft_seconds" else \
                    "inter-token latency"
                evidence = (
                    ev(r, key, r.labels, v, limit, ">=",
                       f"p99 {t.fleet_slow_factor:g}x the median {median:.3g} s of "
                       f"{len(peers)} peer nodes serving {model or 'the same model'}"),)
                yield Candidate(sub(node=node, model=model) if model else sub(node=node),
                                WARN, evidence,
                                title=f"node {node} slow among its peers ({what} p99)")


# ---- FLT-002 data-parallel replicas on different nodes unevenly loaded ----------------------
def nodes_unbalanced(ctx: Context) -> Iterator[Candidate]:
    """PAR-003's test across every engine of the fleet (each reading names its node)."""
    nodes = {r.label("node") for r in ctx.ok("server.requests_running")}
    if len(nodes - {""}) < 2:
        return
    for c in dp_unbalanced(ctx):
        busiest = c.evidence[0].labels if c.evidence else ()
        node = dict(busiest).get("node", "")
        yield Candidate(make_labels(c.subject, node=node) if node else c.subject, c.severity,
                        c.evidence,
                        title=f"replicas unevenly loaded across nodes (node {node} busiest)"
                        if node else "replicas unevenly loaded across nodes")


# ---- FLT-003 a node whose scrape is failing ------------------------------------------------
def scrape_failing(ctx: Context) -> Iterator[Candidate]:
    for r in ctx.ok("node.up"):
        if r.value >= 1.0:
            continue
        node = r.label("node")
        inst = r.label("instance")
        how = r.text or f"Prometheus cannot scrape {inst} (job {r.label('job')})"
        evidence = (Evidence("node.up", r.labels, r.value, 1.0, "<", "",
                             f"{how}; its values are missing, not healthy"),)
        yield Candidate(sub(node=node, instance=inst), CRIT, evidence,
                        title=f"node {node}: scrape of {inst} failing")


RULES = (
    Rule(RuleSpec(
        "FLT-001", Layer.DECODING, "One node slow among its peers",
        "Among nodes serving the same model, one node's TTFT or inter-token latency p99 "
        "(over the window, from its own histograms) is a multiple of the median of the "
        "others: the fleet's tail latency is that node's.",
        (any_of(K.latency.ttft_seconds, K.latency.itl_seconds),),
        {"thresholds.fleet_slow_factor": None, "thresholds.fleet_slow_min_seconds": None,
         "thresholds.fleet_min_peers": None},
        "drain the node from the load balancer and look at its own panes (Enter on it in "
        "the fleet screen): throttling, a straggler GPU, KV pressure, a noisy neighbour",
        optional=(K.node.up,)), slow_node),
    Rule(RuleSpec(
        "FLT-002", Layer.PARALLELISM, "Replicas unevenly loaded across nodes",
        "Engines serving the same model on different nodes carry very different loads "
        "(running+waiting) or KV usage: the load balancer in front of the nodes favours "
        "some (PAR-003's test across the fleet).",
        (K.server.requests_running, K.node.up),
        {"thresholds.dp_load_ratio": None, "thresholds.dp_load_min_gap": None,
         "thresholds.dp_kv_gap": None},
        "check the load balancer's policy across nodes (least-outstanding-requests rather "
        "than round-robin or sticky sessions) and that every node serves the same config",
        optional=(K.server.requests_waiting, K.kv.usage_ratio)), nodes_unbalanced),
    Rule(RuleSpec(
        "FLT-003", Layer.SCHEDULING, "Node scrape failing",
        "Prometheus reports the node's target down (up == 0), or infertop's own scrape of a "
        "node named with --url NODE=URL fails: its server or exporter does not answer, so "
        "nothing about it is known, which is never healthy.",
        (K.node.up,), {},
        "check the node: is the server (or dcgm-exporter) running and listening on the "
        "scraped port? The evidence quotes the scrape's last error (Prometheus's target "
        "page shows it too)",
        # a node's own DEC-006 (its server not answering) is the same fact from the node's
        # diagnoser: the fleet's lists keep this one, which names the node (fleet.py)
        supersedes=("DEC-006",)), scrape_failing),
)
