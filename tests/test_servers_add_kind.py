"""Adding a server kind is one module: a toy kind written to a temporary folder on the
package's path is found by the registry, and discovery, settings, the dialect engine, the
rules, the scheduling pane's order and the fleet query all pick it up.  No other file is
touched (docs/servers.md lists what a real kind adds: the module, a fixture, a test).
"""

from __future__ import annotations

import sys

import pytest

from infertop.dialects import readings_from_exposition
from infertop.probes.prometheus.source import server_name_regex
from infertop.probes.server.discovery import (
    ProcInfo,
    ServerProcess,
    _fill_ports,
    classify,
    group_servers,
    port_from_cmdline,
    server_settings,
)
from infertop.rules.base import Proc
from infertop.servers import registry

TOY_MODULE = '''\
"""ToyServe: a made-up server, declared in one module like the real ones."""

from .flags import settings_from
from .mapping import Dialect, rule
from .spec import ServerKind, Titles

DIALECT = Dialect("toyserve", ("toy_",), "replica", ("model",), rules=(
    rule("toy_running", "server.requests_running"),
    rule("toy_waiting", "server.requests_waiting"),
    rule("toy_kv_used_ratio", "kv.usage_ratio", fraction=True, since="1.0"),
))


def _match_argv(how, prog, first):
    if how == "module":
        return ("toyserve", "server") if prog == "toyserve.main" else None
    return ("toyserve", "server") if prog == "toy-serve" else None


def settings(args):
    out, _ = settings_from(args, {"model": ("--model",), "max_batch": ("--max-batch", "-B")})
    return out


KIND = ServerKind(
    name="toyserve", title="ToyServe", order=990, dialect=DIALECT,
    roles={"server": 2, "toy_worker": 1}, match_argv=_match_argv,
    titles=Titles("TOY", (("Worker", "toy_worker"),)),
    default_port=7777, port_flags=("--listen-port",), settings=settings,
    python=True, preallocating=True,
)
'''

TOY_PAGE = """\
# TYPE toy_running gauge
toy_running{model="toy-7b",replica="0"} 3
toy_running{model="toy-7b",replica="1"} 4
# TYPE toy_waiting gauge
toy_waiting{model="toy-7b",replica="0"} 2
# TYPE toy_kv_used_ratio gauge
toy_kv_used_ratio{model="toy-7b",replica="0"} 0.25
"""


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy module dropped beside the real kinds (a folder on the package's path)."""
    (tmp_path / "toyserve.py").write_text(TOY_MODULE)
    import infertop.servers as pkg
    monkeypatch.setattr(pkg, "__path__", [*pkg.__path__, str(tmp_path)])
    registry._load()    # what importing infertop.servers does: every module with a KIND
    try:
        yield registry.KINDS["toyserve"]
    finally:
        registry.unregister("toyserve")
        sys.modules.pop("infertop.servers.toyserve", None)
    assert "toyserve" not in registry.names()


def test_the_registry_finds_the_new_module(toy):
    assert registry.names()[-1] == "toyserve"      # ordered by KIND.order
    assert registry.kind("ToyServe") is toy
    assert "ToyServe" in registry.looked_for()


def test_discovery_classifies_and_groups_its_processes(toy):
    argv = ["/opt/toy/bin/toy-serve", "--model", "m", "--listen-port", "9001"]
    assert classify("toy-serve", argv) == ("toyserve", "server")
    assert classify("python3", ["python3", "-m", "toyserve.main"]) == ("toyserve", "server")
    # its setproctitle titles, and /proc's comm cut to 15 characters
    assert classify("TOY::Worker_3", ["TOY::Worker_3"]) == ("toyserve", "toy_worker")
    assert classify("TOY::Worker_12", []) == ("toyserve", "toy_worker")
    assert classify("TOY::Other", ["TOY::Other"]) == ("toyserve", "helper")
    procs = [ProcInfo(1, 0, "init", ("init",)),
             ProcInfo(10, 1, "toy-serve", tuple(argv), 5.0),
             ProcInfo(11, 10, "TOY::Worker_0", ("TOY::Worker_0",), 6.0)]
    [server] = group_servers(procs)
    assert (server.pid, server.kind, server.port, server.members) == (10, "toyserve", 9001,
                                                                      [10, 11])
    assert port_from_cmdline("toyserve", ["toy-serve", "--port", "1"]) is None  # not its flag
    # no port on the command line: its default port, when the root listens there
    quiet = ServerProcess(10, "toyserve", "toy-serve", ["toy-serve"], None, "", [10])
    _fill_ports([quiet], {7777: [10], 40000: [10]})
    assert quiet.port == 7777


def test_its_settings_are_read_from_the_command_line(toy):
    got = server_settings("toyserve", ["/opt/toy/bin/toy-serve", "--model", "m", "-B", "64"])
    assert got == {"model": "m", "max_batch": "64"}


def test_its_metrics_page_is_detected_and_mapped(toy):
    e = readings_from_exposition(TOY_PAGE, "127.0.0.1:7777")
    assert e.dialect == "toyserve" and e.meta.engines == ("0", "1")
    running = {r.label("engine"): r.value for r in e.readings
               if r.key == "server.requests_running"}
    assert running == {"0": 3.0, "1": 4.0}
    kv = next(r for r in e.readings if r.key == "kv.usage_ratio")
    assert (kv.value, kv.label("model")) == (0.25, "toy-7b")
    # the fleet's Prometheus query asks for its families too
    assert "toy_running(_total|_bucket|_sum|_count)?" in server_name_regex()


def test_rules_and_the_scheduling_pane_ask_it(toy):
    assert Proc("10", "1", "toy-serve", "server", "toyserve", "").is_python
    assert registry.is_preallocating("toyserve")
    assert registry.role_priority()["toy_worker"] == 1


def test_the_toy_kind_is_gone_afterwards():
    assert "toyserve" not in registry.names()
    assert classify("toy-serve", ["toy-serve"]) == ("unknown", "")
