"""tools/mutate.py finds a module's tests by what exercises it (issue 31 item 8): the test
files that import it, or import a test helper that does (rulekit's Feed runs the whole
Diagnoser), plus, for a rule module, the engine's (the registry runs it there)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parent.parent / "tools" / "mutate.py"


@pytest.fixture(scope="module")
def mutate():
    spec = importlib.util.spec_from_file_location("infertop_mutate_targets", TOOL)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop(spec.name, None)


def test_the_engine_is_exercised_by_every_test_that_runs_the_rules(mutate):
    got = set(mutate.TARGETS["engine"].test_files())
    # directly, and through helpers.rulekit (Feed), whatever the file is called
    assert {"tests/test_rules_engine.py", "tests/test_rules_memory.py",
            "tests/test_severity_pins.py", "tests/test_faults_dead_server.py"} <= got
    assert "tests/test_promtext.py" not in got


def test_a_rule_module_is_exercised_through_the_engine(mutate):
    got = set(mutate.TARGETS["hardware"].test_files())
    assert {"tests/test_rules_gpu_health.py", "tests/test_rules_hardware.py",
            "tests/test_hold_levels.py"} <= got


def test_mapped_tests_stay_as_listed(mutate):
    t = mutate.Target("infertop.windowstat", "infertop/windowstat.py",
                      ("tests/test_windowstat.py",), 1.0)
    assert t.test_files() == ("tests/test_windowstat.py",)


def test_the_data_side_modules_are_found_by_what_exercises_them(mutate) -> None:
    assert "tests/test_one_median.py" in mutate.TARGETS["windowstat"].test_files()
    assert "tests/test_pins_servers_mapping.py" in \
        mutate.TARGETS["servers_mapping"].test_files()


def test_every_target_has_tests_and_its_file(mutate):
    root = TOOL.parent.parent
    for name, t in mutate.TARGETS.items():
        assert (root / t.path).is_file(), name
        files = t.test_files()
        assert files and all((root / f).is_file() for f in files), name


def test_a_file_name_two_targets_share_gets_its_path_as_the_id_prefix(mutate,
                                                                      monkeypatch) -> None:
    # rules/registry.py and servers/registry.py: the ids, EQUIVALENT and --show must name
    # one file each
    targets = dict(mutate.TARGETS)
    targets["rules_registry"] = mutate.Target("infertop.rules.registry",
                                              "infertop/rules/registry.py", (), 0.1)
    targets["servers_registry"] = mutate.Target("infertop.servers.registry",
                                                "infertop/servers/registry.py", (), 0.1)
    monkeypatch.setattr(mutate, "TARGETS", targets)
    assert mutate.prefix("rules_registry") == "rules/registry.py"
    assert mutate.prefix("servers_registry") == "servers/registry.py"
    assert mutate.prefix("compare") == "compare.py"
    rules_ids = {s.id for s in mutate.mutants("rules_registry")}
    servers_ids = {s.id for s in mutate.mutants("servers_registry")}
    assert rules_ids and servers_ids and not rules_ids & servers_ids
    assert all(i.startswith("servers/registry.py:") for i in servers_ids)
    # a mutant compiles against its own file, not the other registry.py
    one = sorted(servers_ids)[0]
    assert "servers" in mutate.mutated_code("servers_registry", one).co_filename


def test_every_target_has_its_own_id_prefix(mutate) -> None:
    prefixes = [mutate.prefix(n) for n in mutate.TARGETS]
    assert len(set(prefixes)) == len(prefixes)
def test_the_order_puts_a_modules_own_tests_first_and_selects_the_same(mutate) -> None:
    """Order only (pytest -x stops at the first failure): files that import the module
    and are named for it, then its other importers, then the engine's named for it."""
    t = mutate.TARGETS["parallelism"]
    got = t.test_files()
    assert set(got) == set(mutate.exercising(t.module)) | set(mutate.exercising(t.via))
    assert len(got) == len(set(got))
    assert got[0] == "tests/test_pins_parallelism.py"
    assert got.index("tests/test_rules_parallelism.py") < got.index("tests/test_config.py")


def test_every_rule_module_is_a_target_with_found_tests(mutate) -> None:
    rules = {p.stem for p in (TOOL.parent.parent / "infertop" / "rules").glob("*.py")}
    deciding = rules - {"__init__", "registry", "catalogue_doc", "threshold_sources",
                        "window"}
    for name in deciding:
        t = mutate.TARGETS[name]
        assert t.module == f"infertop.rules.{name}" and t.tests == (), name
