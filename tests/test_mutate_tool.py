"""tools/mutate.py, the mutation run of the core: it finds its mutants, applies one
without touching the source file, and its ids and equivalent list stay in step."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

TOOL = Path(__file__).resolve().parent.parent / "tools" / "mutate.py"


@pytest.fixture(scope="module")
def mutate() -> ModuleType:
    spec = importlib.util.spec_from_file_location("infertop_mutate_tool", TOOL)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod      # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop(spec.name, None)


def test_every_kind_of_mutation_is_found_with_unique_ids(mutate):
    sites = mutate.mutants("windowstat")
    ids = [s.id for s in sites]
    assert len(ids) == len(set(ids))
    assert {s.kind for s in sites} >= {"boundary", "negate", "boolop", "const", "delete"}
    assert "windowstat.py:median:const:2 -> 3 in `mid = n // 2`" in ids
    maxmin = [s for name in mutate.TARGETS for s in mutate.mutants(name) if s.kind == "maxmin"]
    assert any(s.before.startswith("max(") and s.after.startswith("min(") for s in maxmin)


def test_a_mutant_is_compiled_without_writing_the_source(mutate):
    path = mutate.ROOT / "infertop" / "windowstat.py"
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    code = mutate.mutated_code("windowstat",
                               "windowstat.py:median:const:2 -> 3 in `mid = n // 2`")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert code.co_filename == str(path)            # tracebacks name the real file
    mod = ModuleType("mutant_windowstat")
    mod.__dict__["__name__"] = "infertop.windowstat_mutant"
    mod.__dict__["__package__"] = "infertop"
    exec(code, mod.__dict__)
    from infertop.windowstat import median
    assert median([1.0, 2.0, 3.0, 4.0, 5.0]) == 3.0
    assert mod.median([1.0, 2.0, 3.0, 4.0, 5.0]) == 2.0   # n // 3: the planted bug


def test_the_sample_is_stable_and_every_equivalent_names_a_mutant(mutate):
    assert [s.id for s in mutate.selected("derive", False)] == \
        [s.id for s in mutate.selected("derive", False)]
    assert 200 <= sum(len(mutate.selected(n, False)) for n in mutate.TARGETS) <= 260
    assert mutate.stale_equivalents() == []
    assert all(reason.strip() for reason in mutate.EQUIVALENT.values())


def test_every_mapped_test_file_exists(mutate):
    for target in mutate.TARGETS.values():
        assert (mutate.ROOT / target.path).is_file()
        for test in target.tests:
            assert (mutate.ROOT / test).is_file(), test
