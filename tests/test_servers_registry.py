"""infertop/servers: one module per server kind, each with a /metrics fixture that parses.

The tables that used to be scattered (discovery's SERVER_KINDS/DEFAULT_PORTS, rules'
PYTHON_KINDS/PREALLOCATING, the scheduling pane's ROLE_PRIORITY, promrules' DROP_LABELS)
are now answers of the registry; the last tests pin those answers to the old tables so
the move changed no behaviour.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from infertop.dialects import DIALECTS, detect_dialect, readings_from_exposition
from infertop.model import Status
from infertop.promtext import parse
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
    assert set(registry.names()) == {"vllm", "sglang", "tgi", "llamacpp", "triton", "trtllm"}


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
    rule_keys = {r.key for r in k.dialect.rules}
    for page in pages:
        text = page.read_text()
        assert detect_dialect(parse(text)) == kind, page.name
        e = readings_from_exposition(text, INST)
        assert e.dialect == kind and e.meta.dialect == kind
        got = {r.key for r in e.readings if r.status is Status.OK}
        # the basics every kind maps, read from its own page
        assert {"server.requests_running", "server.requests_waiting"} <= got, page.name
        # most of what the kind's table names is on its page (a renamed family would
        # silently drop its key: this notices)
        assert len(got & rule_keys) >= len(rule_keys) // 2, (page.name, rule_keys - got)
        assert next(r for r in e.readings if r.key == "server.info").text.startswith(kind)


def test_every_rule_names_its_kinds_prefix():
    for k in registry.kinds():
        d = k.dialect
        for rule in d.rules:
            assert all(f.startswith(d.prefixes) for f in rule.families), (k.name, rule)
        assert all(f.startswith(d.prefixes) for f in d.extra_families), k.name


def test_lookups_match_the_tables_they_replaced():
    # rules/base.py PYTHON_KINDS (+ TGI's shards), rules/memory.py PREALLOCATING
    python = {n for n in registry.names() if registry.is_python(n)}
    assert python == {"vllm", "sglang", "trtllm"}
    assert registry.is_python("python") and registry.is_python("tgi", "shard")
    assert not registry.is_python("tgi", "router") and not registry.is_python("unknown")
    assert {n for n in registry.names() if registry.is_preallocating(n)} == \
        {"vllm", "sglang", "trtllm", "tgi"}
    # tui/panes/scheduling.py ROLE_PRIORITY
    assert dict(registry.role_priority()) == {
        "engine_core": 0, "scheduler": 0, "worker": 1, "shard": 1, "server": 2,
        "api_server": 3, "router": 3, "launcher": 4, "detokenizer": 4, "helper": 5}
    # discovery.DEFAULT_PORTS and the port flags
    assert {n: registry.default_port(n) for n in registry.names()} == {
        "vllm": 8000, "sglang": 30000, "tgi": 3000, "llamacpp": 8080, "triton": 8000,
        "trtllm": 8000}
    assert registry.default_port("python") is None
    # promrules DROP_LABELS / BARE_COUNTERS
    assert {k.name: k.dialect.drop_labels for k in registry.kinds() if k.dialect.drop_labels} \
        == {"sglang": ("tp_rank", "pp_rank", "ep_rank", "moe_ep_rank", "engine_type",
                       "pid"),
            "triton": ("version", "request_type", "kv_cache_block_type")}
    assert [k.name for k in registry.kinds() if k.dialect.bare_counters] == ["tgi"]
    # the demo plays the kinds it has a renderer for
    assert set(registry.demo_kinds()) == {"vllm", "sglang", "tgi", "llamacpp"}
    assert registry.kind("VLLM") is registry.KINDS["vllm"] and registry.kind("") is None


def test_profiler_endpoints_are_declared_by_their_kinds():
    vllm, sglang = registry.KINDS["vllm"].profiler, registry.KINDS["sglang"].profiler
    assert vllm is not None and sglang is not None
    assert not vllm.served([["vllm", "serve", "m"]])
    assert vllm.served([["vllm", "serve", "m", "--profiler-config", "{}"]])
    assert sglang.served([]) and sglang.stops_by_itself and not vllm.stops_by_itself
    assert [k.name for k in registry.kinds() if k.profiler] == ["vllm", "sglang"]


def test_a_kind_cannot_take_another_kinds_order():
    clash = ServerKind(name="other", title="Other", order=registry.KINDS["vllm"].order,
                       dialect=registry.KINDS["vllm"].dialect, roles={},
                       match_argv=lambda how, prog, first: None)
    with pytest.raises(ValueError, match="order"):
        registry.register(clash)
    assert "other" not in registry.names()
