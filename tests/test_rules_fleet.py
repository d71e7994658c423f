"""Cross-node rules FLT-001..FLT-003: table cases (run by test_rules_table.py) and closer
looks through the real FleetPipeline (one pipeline per node, FLT rules on the whole)."""

from __future__ import annotations

from helpers.rulekit import Case, Hist
from infertop.findings import Severity
from infertop.fleet import FleetPipeline, diagnoser_factory, split_nodes
from infertop.meta import PrometheusMeta, ServerMeta
from infertop.model import Kind, Reading, Sample, Snapshot, make_labels
from infertop.rules.engine import Diagnoser

M = "model=m"


def up(**down: int) -> dict:
    """node.up for nodes a, b, c (1 unless given)."""
    return {"node.up": {f"node={n},instance={n}:8000,job=server": down.get(n, 1)
                        for n in ("a", "b", "c")}}


class SlowNode(Case):
    code = "FLT-001"
    windowed = True
    lag = 62.0   # the slow node's first tokens stay in the 60 s window
    missing = ("latency.ttft_seconds",)

    def __init__(self):
        self.h = {n: Hist() for n in ("a", "b", "c", "d")}

    def _t(self, slow: float):
        for n, h in self.h.items():
            h.observe(slow if n == "c" else 0.04, 20)
        return {"latency.ttft_seconds": {f"node={n},instance={n}:8000,{M}": h.value()
                                         for n, h in self.h.items()}, **up()}

    def good(self):
        return self._t(0.04)

    def bad(self):
        return self._t(0.45)

    def hi(self):
        return self._t(0.08)    # under max(2 x median, 100 ms)

    def lo(self):
        return self._t(0.05)


class NodesUnbalanced(Case):
    code = "FLT-002"
    missing = ("node.up",)

    def _t(self, a_running: float, a_waiting: float = 0.0):
        run = {f"node={n},instance={n}:8000,{M}": (a_running if n == "a" else 10.0)
               for n in ("a", "b", "c")}
        wait = {f"node={n},instance={n}:8000,{M}": (a_waiting if n == "a" else 0.0)
                for n in ("a", "b", "c")}
        return {"server.requests_running": run, "server.requests_waiting": wait, **up()}

    def good(self):
        return self._t(10.0)

    def bad(self):
        return self._t(40.0, 20.0)

    def hi(self):
        return self._t(23.0)    # just over 2 x (10 + 1)

    def lo(self):
        return self._t(20.0)    # just under


class ScrapeFailing(Case):
    code = "FLT-003"
    missing = ("node.up",)

    def good(self):
        return up()

    def bad(self):
        return up(b=0)


CASES = [SlowNode(), NodesUnbalanced(), ScrapeFailing()]


# ---- through the FleetPipeline ---------------------------------------------------------------
def _fleet_tick(t: float, hists: dict[str, Hist], down: str = "") -> Snapshot:
    samples = {}
    for node, h in hists.items():
        v = h.value()
        name = f"server:{node}:8000@{node}"
        lab = make_labels(instance=f"{node}:8000", model="m", engine="0")
        rs = (Reading("latency.ttft_seconds", v.count, "s", lab, kind=Kind.HISTOGRAM,
                      buckets=v.buckets, hist_sum=v.sum),
              Reading("server.requests_running", 5.0, "count", lab),
              Reading("gpu.util_ratio", 0.5, "ratio", make_labels(gpu=0)))
        samples[name] = Sample(name, t, rs, meta=ServerMeta(node=node))
        samples[f"prometheus@{node}"] = Sample(
            f"prometheus@{node}", t, (Reading("node.up", 0.0 if node == down else 1.0, "",
                                              make_labels(instance=f"{node}:8000",
                                                          job="server")),),
            meta=PrometheusMeta(node=node))
    return Snapshot(t, samples, int(t))


def test_split_nodes_gives_each_node_plain_sample_names():
    snap = _fleet_tick(100.0, {"n1": Hist(), "n2": Hist()})
    parts = split_nodes(snap)
    assert list(parts) == ["n1", "n2"]
    assert sorted(parts["n1"].samples) == ["prometheus", "server:n1:8000"]
    # a node never sees another node's readings: GPU 0 of n1 is not GPU 0 of n2
    assert [r.label("instance") for r in parts["n2"].readings("server.requests_running")] == \
        ["n2:8000"]


def test_fleet_pipeline_names_the_slow_node_and_the_dead_one():
    pipe = FleetPipeline(diagnoser_factory(), window=60.0)
    hists = {n: Hist() for n in ("n1", "n2", "n3", "n4")}
    frame = None
    for i in range(20):
        for n, h in hists.items():
            h.observe(0.9 if n == "n3" else 0.03, 20)
        frame = pipe.feed(_fleet_tick(1000.0 + i, hists, down="n4"))
    assert frame is not None
    codes = {(f.code, dict(f.subject).get("node")) for f in frame.findings}
    assert ("FLT-001", "n3") in codes
    assert ("FLT-003", "n4") in codes
    # n3's own pipeline raised its own DEC-001 too, tagged with the node
    assert ("DEC-001", "n3") in codes
    assert not any(node == "n1" for _, node in codes)
    crit = [f for f in frame.findings if f.code == "FLT-003"]
    assert crit[0].severity is Severity.CRIT
    # each node has its own Frame, and the whole Frame labels every reading with its node
    assert sorted(frame.nodes) == ["n1", "n2", "n3", "n4"]
    nodes = {r.label("node") for r in frame.by_key("gpu.util_ratio")}
    assert nodes == {"n1", "n2", "n3", "n4"}
    assert [f.code for f in frame.node_findings("n3")][:1] in (["DEC-001"], ["FLT-001"])


def test_fleet_rules_stay_out_of_node_pipelines_and_node_rules_out_of_the_fleet():
    make = diagnoser_factory()
    node, fleet = make(False), make(True)
    assert isinstance(node, Diagnoser) and isinstance(fleet, Diagnoser)
    assert node.rules and not any(r.code.startswith("FLT-") for r in node.rules)
    assert fleet.rules and all(r.code.startswith("FLT-") for r in fleet.rules)


def test_a_fleet_report_counts_every_rule_and_calls_unchecked_only_what_no_node_checked():
    from infertop.fleet import FleetPipeline, diagnoser_factory
    from infertop.rules.registry import all_rules

    node_rules = sum(not r.code.startswith("FLT-") for r in all_rules())

    class Node:   # a node's Pipeline as doctor reads it
        def __init__(self, missing):
            self._m, self.rules_total, self.events = missing, node_rules, []

        def missing_inputs(self):
            return self._m

    fp = FleetPipeline(diagnoser_factory())
    nodes = {"a": Node({"HW-001": ["no NVML"], "DEC-003": ["no spec"]}),
             "b": Node({"DEC-003": ["no spec"]})}
    fp.pipelines = nodes  # type: ignore[assignment]  # stand-ins with what doctor reads
    assert fp.missing_inputs() == {"DEC-003": ["no spec"]}   # HW-001 was checked on b
    assert fp.rules_total == len(all_rules())                # node rules + 3 FLT
