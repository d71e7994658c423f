"""A server kind shipped as its own package (issue 34's proof): LMDeploy's api_server, in
tests/fixtures/plugins/ (the package ``infertop_lmdeploy``, its dist-info declaring the
``infertop.servers`` entry point, and its /metrics page written from LMDeploy's source).

The package is put on a temporary path as pip would install it and found through
importlib.metadata; nothing in infertop names it.  It passes infertop's test kit
(``infertop.testing``), and discovery, settings, the dialect engine and the fleet's
queries pick it up."""

from __future__ import annotations

import importlib.metadata
import shutil
import sys
from pathlib import Path

import pytest

from infertop import testing
from infertop.probes.prometheus.aggregates import per_node
from infertop.probes.prometheus.source import server_name_regex
from infertop.probes.server.discovery import (
    classify,
    port_from_cmdline,
    server_settings,
)
from infertop.servers import registry

PLUGINS = Path(__file__).parent / "fixtures" / "plugins"
PAGE = PLUGINS / "lmdeploy-documented.prom"


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """The package and its dist-info copied to a site folder on sys.path, then the
    registry's plug-in loading run as at import (the entry point found by metadata)."""
    site = tmp_path / "site"
    shutil.copytree(PLUGINS / "infertop_lmdeploy", site / "infertop_lmdeploy")
    shutil.copytree(PLUGINS / "infertop_lmdeploy-0.1.0.dist-info",
                    site / "infertop_lmdeploy-0.1.0.dist-info")
    monkeypatch.syspath_prepend(str(site))
    eps = importlib.metadata.entry_points(group=registry.ENTRY_POINT_GROUP)
    assert [ep.name for ep in eps] == ["lmdeploy"]   # found as an installed distribution
    assert registry.load_plugins() == ["lmdeploy"]
    try:
        yield registry.KINDS["lmdeploy"]
    finally:
        registry.unregister("lmdeploy")
        sys.modules.pop("infertop_lmdeploy", None)


def test_without_the_package_infertop_has_no_lmdeploy():
    assert "lmdeploy" not in registry.names()
    assert classify("lmdeploy", ["lmdeploy", "serve", "api_server", "m"]) != \
        ("lmdeploy", "api_server")


def test_the_package_passes_the_test_kit(installed):
    testing.check_kind(installed)
    e = testing.check_fixture_page(installed, PAGE.read_text(), "127.0.0.1:23333")
    ok = {r.key: r for r in e.readings if r.ok}
    assert ok["server.requests_running"].value == 6
    assert ok["server.requests_waiting"].value == 2
    assert ok["kv.usage_ratio"].value == pytest.approx(0.42)
    assert ok["server.generation_tokens_total"].value == 20480
    assert ok["latency.ttft_seconds"].value == 40          # observations (finished requests)
    assert ok["server.requests_running"].label("engine") == "0"
    assert ok["server.requests_running"].label("model") == "internlm2_5-7b-chat"


def test_its_processes_are_told_apart_by_the_whole_command_line(installed):
    argv = ["lmdeploy", "serve", "api_server", "internlm/internlm2_5-7b-chat", "--tp", "2",
            "--server-port", "23334", "--cache-max-entry-count", "0.5"]
    assert classify("lmdeploy", argv) == ("lmdeploy", "api_server")
    # the second argument, which a first-argument matcher could not see
    assert classify("lmdeploy", ["lmdeploy", "serve", "proxy"]) == ("lmdeploy", "router")
    assert classify("lmdeploy", ["lmdeploy", "chat", "m"]) == ("unknown", "")
    assert classify("python3", ["python3", "-m", "lmdeploy.serve.openai.api_server", "m"]) \
        == ("lmdeploy", "api_server")
    assert port_from_cmdline("lmdeploy", argv) == 23334
    assert port_from_cmdline("lmdeploy", argv[:4]) is None   # silent: discovery uses 23333
    assert registry.default_port("lmdeploy") == 23333
    got = server_settings("lmdeploy", argv)
    assert got["model"] == "internlm/internlm2_5-7b-chat"
    assert got["tensor_parallel_size"] == "2" and got["cache_max_entry_count"] == "0.5"


def test_the_fleet_queries_include_it(installed):
    assert "lmdeploy" in server_name_regex()
    # the tokens/s column is generated from each dialect: the new kind's counter is in it
    assert "rate(lmdeploy:generation_tokens_total[60s])" in per_node("tok_s", True)


def test_a_broken_plugin_is_left_out_with_its_reason(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "broken_kind").mkdir(parents=True)
    (site / "broken_kind" / "__init__.py").write_text("raise RuntimeError('no GPU here')\n")
    dist = site / "broken_kind-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-kind\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[infertop.servers]\nbroken = broken_kind\n")
    monkeypatch.syspath_prepend(str(site))
    before = registry.names()
    assert registry.load_plugins() == []
    assert registry.names() == before
    assert "RuntimeError: no GPU here" in registry.plugin_errors()["broken"]
    # doctor says so, on one line of stderr
    from infertop.cli.doctor import plugin_errors
    assert "RuntimeError: no GPU here" in plugin_errors()["broken"]
    registry._PLUGIN_ERRORS.pop("broken", None)   # the test's own, not a real one
    sys.modules.pop("broken_kind", None)
