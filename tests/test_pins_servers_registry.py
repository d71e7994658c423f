"""infertop/servers/registry.py pinned (tools/mutate.py, issue 31 item 8): a plug-in that
defines no kind is left out with that reason, unregistering a kind rebuilds what was
cached from the kinds, and the cached tables stay the same objects while the kinds do
not change (mapping_plan keeps a page's plan only while ``dialects()`` is the same)."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterator

import pytest

from infertop.servers import registry
from infertop.servers.spec import ServerKind

TOY = "toykind"


@pytest.fixture
def toy() -> Iterator[ServerKind]:
    vllm = registry.KINDS["vllm"]
    k = ServerKind(name=TOY, title="Toy", order=max(x.order for x in registry.kinds()) + 1,
                   dialect=type(vllm.dialect)(TOY, ("toy:",), "", (), ()), roles={"toyrole": 0},
                   match_argv=lambda how, prog, first: None)
    yield k
    registry.unregister(TOY)


def test_the_cached_tables_are_the_same_objects_while_the_kinds_stay() -> None:
    assert registry.dialects() is registry.dialects()
    assert registry.role_priority() is registry.role_priority()
    assert registry.python_title_prefixes() is registry.python_title_prefixes()


def test_register_and_unregister_rebuild_what_was_cached(toy: ServerKind) -> None:
    before = registry.dialects()
    assert TOY not in before and "toyrole" not in registry.role_priority()
    registry.register(toy)
    assert TOY in registry.dialects() and registry.role_priority()["toyrole"] == 0
    assert registry.dialects() is not before
    registry.unregister(TOY)
    assert TOY not in registry.dialects() and "toyrole" not in registry.role_priority()
    assert TOY not in registry.names()
    # unregistering what is not there changes nothing
    kept = registry.dialects()
    registry.unregister(TOY)
    assert registry.dialects() is kept


def test_a_plugin_without_a_kind_is_left_out_with_the_reason() -> None:
    ep = importlib.metadata.EntryPoint("nokind", "math", registry.ENTRY_POINT_GROUP)
    try:
        assert registry.load_plugins([ep]) == []
        assert registry.plugin_errors()["nokind"] == \
            "math: ValueError: defines no KIND (a ServerKind)"
    finally:
        registry._PLUGIN_ERRORS.pop("nokind", None)


def test_a_plugin_may_not_replace_a_builtin_kind() -> None:
    ep = importlib.metadata.EntryPoint("again", "infertop.servers.vllm", registry.ENTRY_POINT_GROUP)
    try:
        assert registry.load_plugins([ep]) == []
        assert registry.plugin_errors()["again"].endswith("kind 'vllm' already exists")
    finally:
        registry._PLUGIN_ERRORS.pop("again", None)


def test_which_processes_run_python() -> None:
    assert registry.is_python("python") is True
    assert registry.is_python("vllm") is True
    assert registry.is_python("tgi", "shard") is True     # a Python role of a C++ kind
    assert registry.is_python("tgi", "router") is False
    assert registry.is_python("llamacpp") is False
    assert registry.is_python("nosuchkind") is False


def test_which_kinds_preallocate_their_gpu() -> None:
    assert registry.is_preallocating("vllm") is True
    assert registry.is_preallocating("llamacpp") is False
    assert registry.is_preallocating("nosuchkind") is False
    assert registry.is_preallocating(None) is False


def test_a_role_two_kinds_share_takes_the_smaller_priority(toy: ServerKind) -> None:
    from dataclasses import replace
    registry.register(replace(toy, roles={"helper": 9, "api_server": 1}))
    got = registry.role_priority()
    assert got["helper"] == 5 and got["api_server"] == 1 and got["server"] == 2


def test_looked_for_names_the_chosen_kinds_in_order() -> None:
    assert registry.looked_for(["sglang", "vllm"]) == "vLLM, SGLang"
    assert registry.looked_for([]) == ""
    assert registry.looked_for().startswith("vLLM, SGLang, TGI, llama.cpp")
