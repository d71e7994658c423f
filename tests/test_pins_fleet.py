"""Pins for the cross-node rules (infertop/rules/fleet.py) where a mutation run found none
(issue 31 item 8): each rule's check on one fleet tick, as the FleetPipeline hands it
(readings labelled by node; p99s derived per node)."""

from __future__ import annotations

from typing import Any

from helpers.snapkit import reading, sample, snap
from infertop.config import DiagnosisConfig
from infertop.findings import Severity
from infertop.history import History
from infertop.model import Labels, Reading, make_labels
from infertop.rules.base import Candidate, Context
from infertop.rules.fleet import nodes_unbalanced, scrape_failing, slow_node


def _p99(key: str, node: str, v: float, model: str = "m", q: str = "0.99",
         engine: str = "0") -> Reading:
    labels: dict[str, Any] = {"node": node, "engine": engine, "quantile": q}
    if model:
        labels["model"] = model
    return Reading(key, v, "s", make_labels(labels))


def _ctx(readings: list[Reading] | None = None,
         derived: list[Reading] | None = None) -> Context:
    return Context(History(), snap(1.0, sample("fleet", 1.0, readings or [])), derived or [],
                   DiagnosisConfig(), {}, {})


def _subjects(got: list[Candidate]) -> list[Labels]:
    return [c.subject for c in got]


TTFT, ITL = "latency.ttft_seconds", "latency.itl_seconds"


def test_one_slow_node_among_three_peers() -> None:
    d = [_p99(TTFT, "a", 0.1), _p99(TTFT, "b", 0.12), _p99(TTFT, "c", 0.5)]
    (got,) = slow_node(_ctx(derived=d))
    assert got.subject == (("model", "m"), ("node", "c")) and got.severity is Severity.WARN
    e = got.evidence[0]
    assert (e.value, e.op) == (0.5, ">=")
    assert isinstance(e.threshold, float) and abs(e.threshold - 0.22) < 1e-12
    assert "2x the median 0.11 s of 2 peer nodes serving m" in e.note
    assert got.title == "node c slow among its peers (time to first token p99)"


def test_a_node_at_exactly_the_limit_is_slow() -> None:
    d = [_p99(TTFT, "a", 0.1), _p99(TTFT, "b", 0.1), _p99(TTFT, "c", 0.2)]
    assert _subjects(list(slow_node(_ctx(derived=d)))) == [(("model", "m"), ("node", "c"))]


def test_itl_is_judged_too_and_named_so() -> None:
    d = [_p99(ITL, "a", 0.02), _p99(ITL, "b", 0.02), _p99(ITL, "c", 0.3)]
    (got,) = slow_node(_ctx(derived=d))
    assert got.title == "node c slow among its peers (inter-token latency p99)"


def test_each_node_counts_its_worst_engine_once() -> None:
    """Node c's engines at 0.05 and 0.5: its p99 is 0.5 (the worst), whatever the order;
    a p50, or a reading with no node, is not a peer."""
    for first, second in ((0.05, 0.5), (0.5, 0.05)):
        d = [_p99(TTFT, "a", 0.1), _p99(TTFT, "b", 0.1),
             _p99(TTFT, "c", first, engine="0"), _p99(TTFT, "c", second, engine="1"),
             _p99(TTFT, "a", 9.0, q="0.5"), _p99(TTFT, "", 9.0)]
        (got,) = slow_node(_ctx(derived=d))
        assert got.evidence[0].value == 0.5


def test_of_two_engines_at_the_same_p99_the_first_is_the_evidence() -> None:
    d = [_p99(TTFT, "a", 0.1), _p99(TTFT, "b", 0.1),
         _p99(TTFT, "c", 0.5, engine="0"), _p99(TTFT, "c", 0.5, engine="1")]
    (got,) = slow_node(_ctx(derived=d))
    assert dict(got.evidence[0].labels)["engine"] == "0"


def test_two_nodes_are_not_enough_peers() -> None:
    """fleet_min_peers (3) is inclusive: three nodes compare, two do not."""
    assert not list(slow_node(_ctx(derived=[_p99(TTFT, "a", 0.1), _p99(TTFT, "c", 0.9)])))


def test_a_node_serving_no_named_model_is_compared_with_its_peers() -> None:
    d = [_p99(TTFT, n, v, model="") for n, v in (("a", 0.1), ("b", 0.1), ("c", 0.9))]
    (got,) = slow_node(_ctx(derived=d))
    assert got.subject == (("node", "c"),)
    assert "serving the same model" in got.evidence[0].note


def _load(nodes: dict[str, float]) -> list[Reading]:
    return [reading("server.requests_running", v, node=n, engine="0", model="m")
            for n, v in nodes.items()]


def test_replicas_on_two_nodes_unevenly_loaded() -> None:
    (got,) = nodes_unbalanced(_ctx(_load({"a": 15, "b": 2})))
    assert got.subject == (("model", "m"), ("node", "a"))
    assert got.title == "replicas unevenly loaded across nodes (node a busiest)"


def test_engines_of_one_node_are_not_a_fleet() -> None:
    rs = [reading("server.requests_running", v, node="a", engine=e, model="m")
          for e, v in (("0", 15), ("1", 2))]
    assert not list(nodes_unbalanced(_ctx(rs)))


def _up(v: float, text: str | None = None) -> Reading:
    r = reading("node.up", v, node="a", instance="a:8000", job="server")
    return r if text is None else Reading(r.key, v, r.unit, r.labels, r.status, "", r.kind, text)


def test_a_node_whose_scrape_fails_is_critical_and_names_why() -> None:
    (got,) = scrape_failing(_ctx([_up(0.0)]))
    assert got.subject == (("instance", "a:8000"), ("node", "a"))
    assert got.severity is Severity.CRIT
    assert got.title == "node a: scrape of a:8000 failing"
    assert got.evidence[0].note == ("Prometheus cannot scrape a:8000 (job server); its "
                                    "values are missing, not healthy")
    (got,) = scrape_failing(_ctx([_up(0.0, "connection refused")]))
    assert got.evidence[0].note == "connection refused; its values are missing, not healthy"


def test_a_node_that_is_up_is_quiet() -> None:
    assert not list(scrape_failing(_ctx([_up(1.0)])))
    assert len(list(scrape_failing(_ctx([_up(0.5)])))) == 1
