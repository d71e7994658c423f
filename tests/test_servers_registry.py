"""infertop/servers: one module per server kind, each with a /metrics fixture that parses.

Properties, not pins (issue 34): every kind is checked against its own declaration and
fixture, so adding a kind (docs/servers.md) needs no edit here.  The lookups that replaced
the old scattered tables (discovery's DEFAULT_PORTS, rules' PYTHON_KINDS/PREALLOCATING,
the scheduling pane's ROLE_PRIORITY, promrules' DROP_LABELS) are checked as answers of each
kind's own fields, plus the facts of known kinds that must not change.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from infertop import testing
from infertop.dialects import DIALECTS
from infertop.servers import registry
from infertop.servers.spec import ServerKind

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ROOT / "infertop" / "servers"
METRICS = Path(__file__).parent / "fixtures" / "metrics"
INST = "127.0.0.1:8000"
# the package's modules that are not a kind
NOT_KINDS = {"__init__", "spec", "mapping", "flags", "registry"}


def test_one_module_per_kind_and_nothing_else():
    modules = {p.stem for p in SERVERS.glob("*.py")} - NOT_KINDS
    assert set(registry.names()) == modules
    for name in modules:
        mod = importlib.import_module(f"infertop.servers.{name}")
        assert isinstance(mod.KIND, ServerKind) and mod.KIND.name == name
        assert registry.kind(name) is mod.KIND
        assert mod.KIND.dialect.name == name       # the dialect is the kind's, by name
    assert {"vllm", "sglang", "tgi", "llamacpp", "triton", "trtllm"} <= set(registry.names())


def test_kinds_are_ordered_and_their_dialects_are_the_engines_tables():
    orders = [k.order for k in registry.kinds()]
    assert orders == sorted(orders) and len(set(orders)) == len(orders)
    assert list(DIALECTS) == list(registry.names())
    assert all(DIALECTS[k.name] is k.dialect for k in registry.kinds())


def _fixtures(kind: str) -> list[Path]:
    return sorted(METRICS.glob(f"{kind}-*.prom"))


@pytest.mark.parametrize("kind", sorted(registry.names()))
def test_every_kind_has_a_metrics_fixture_that_maps_to_its_readings(kind):
    pages = _fixtures(kind)
    assert pages, f"no tests/fixtures/metrics/{kind}-*.prom for kind {kind}"
    k = registry.KINDS[kind]
    # the kit an outside kind's package runs (infertop.testing): the same checks
    testing.check_kind(k)
    for page in pages:
        e = testing.check_fixture_page(k, page.read_text(), INST)
        assert e.dialect == kind and e.meta.dialect == kind


def test_every_rule_names_its_kinds_prefix():
    for k in registry.kinds():
        d = k.dialect
        for rule in d.rules:
            assert all(f.startswith(d.prefixes) for f in rule.families), (k.name, rule)
        assert all(f.startswith(d.prefixes) for f in d.extra_families), k.name


@pytest.mark.parametrize("name", sorted(registry.names()))
def test_lookups_answer_from_each_kinds_own_declaration(name):
    k = registry.KINDS[name]
    assert registry.is_python(name) == k.python
    assert all(registry.is_python(name, role) for role in k.python_roles)
    assert set(k.python_roles) <= set(k.roles), "a Python role the kind does not have"
    assert registry.is_preallocating(name) == k.preallocating
    assert registry.default_port(name) == k.default_port
    assert (name in registry.demo_kinds()) == bool(k.demo_render)
    prio = registry.role_priority()
    assert all(prio[role] <= p for role, p in k.roles.items())
    assert registry.kind(name.upper()) is k and registry.kind(k.name) is k
    # the demo's renderer, when named, resolves
    if k.demo_render:
        module, func = k.demo_render.split(":")
        assert callable(getattr(importlib.import_module(module), func)), k.demo_render


def test_the_known_kinds_keep_the_facts_the_old_tables_had():
    # rules/base.py PYTHON_KINDS (+ TGI's shards), rules/memory.py PREALLOCATING
    assert {"vllm", "sglang", "trtllm"} <= {n for n in registry.names() if registry.is_python(n)}
    assert not registry.is_python("llamacpp") and not registry.is_python("triton")
    assert registry.is_python("python") and registry.is_python("tgi", "shard")
    assert not registry.is_python("tgi", "router") and not registry.is_python("unknown")
    assert all(registry.is_preallocating(n) for n in ("vllm", "sglang", "trtllm", "tgi"))
    assert not registry.is_preallocating("llamacpp")
    # tui/panes/scheduling.py ROLE_PRIORITY: the roles doing the work first
    prio = registry.role_priority()
    assert prio["engine_core"] == prio["scheduler"] == 0 and prio["worker"] == 1
    assert prio["server"] == 2 and prio["helper"] == 5
    # discovery.DEFAULT_PORTS
    assert {n: registry.default_port(n) for n in ("vllm", "sglang", "tgi", "llamacpp")} == {
        "vllm": 8000, "sglang": 30000, "tgi": 3000, "llamacpp": 8080}
    assert registry.default_port("python") is None
    # promrules DROP_LABELS / BARE_COUNTERS
    assert registry.KINDS["sglang"].dialect.drop_labels == (
        "tp_rank", "pp_rank", "ep_rank", "moe_ep_rank", "engine_type", "pid")
    assert registry.KINDS["tgi"].dialect.bare_counters
    assert {"vllm", "sglang", "tgi", "llamacpp"} <= set(registry.demo_kinds())
    assert registry.kind("VLLM") is registry.KINDS["vllm"] and registry.kind("") is None


def test_profiler_endpoints_are_declared_by_their_kinds():
    vllm, sglang = registry.KINDS["vllm"].profiler, registry.KINDS["sglang"].profiler
    assert vllm is not None and sglang is not None
    assert not vllm.served([["vllm", "serve", "m"]])
    assert vllm.served([["vllm", "serve", "m", "--profiler-config", "{}"]])
    assert sglang.served([]) and sglang.stops_by_itself and not vllm.stops_by_itself


def test_a_kind_cannot_take_another_kinds_order():
    clash = ServerKind(name="other", title="Other", order=registry.KINDS["vllm"].order,
                       dialect=registry.KINDS["vllm"].dialect, roles={},
                       match_argv=lambda how, prog, first: None)
    with pytest.raises(ValueError, match="order"):
        registry.register(clash)
    assert "other" not in registry.names()


@pytest.mark.parametrize("kind", sorted(registry.names()))
def test_the_fleet_token_query_is_generated_from_each_kinds_dialect(kind):
    from infertop.probes.prometheus.aggregates import per_node
    from infertop.promrules import raw_series
    query = per_node("tok_s", True)
    # every series of the kind's that promrules reads for the key is in the column's query
    for r in (r for r in raw_series("server.generation_tokens_total") if r.dialect == kind):
        assert f"rate({r.selector()}[60s])" in query, (kind, r.name)
