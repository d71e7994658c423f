"""Every demo scenario, played once through the real Diagnoser, raises what it promises.

A scenario's ``expect`` lists the finding codes it teaches, and each phase's ``raises``
says which of them that phase brings on.  Played headless from start to end (no loop)
with the documented default thresholds:

* the codes ever active are exactly ``expect``: nothing missing, nothing unexpected;
* each code in a phase's ``raises`` first becomes active within 10 s of that phase's
  onset (the first tick that belongs to the phase), not before it: the finding follows
  the phase whose narration explains it;
* at least one expected code belongs to the scenario's own layer (its pane);
* the healthy scenario raises nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import pytest

from infertop.demo.scenario import list_scenarios, load_scenario
from infertop.pipeline import Pipeline
from infertop.probes.sources.demo import DemoSource
from infertop.rules.engine import Diagnoser

pytestmark = pytest.mark.slow   # every scenario played to its findings

RAISE_WITHIN = 10  # seconds (ticks) after a phase's onset
LAYER_PREFIX = {"hardware": "HW", "kernels": "KRN", "memory": "MEM", "scheduling": "SCH",
                "parallelism": "PAR", "decoding": "DEC"}


@dataclass(frozen=True)
class Run:
    phase_of_tick: tuple[int, ...]           # phase index of each tick
    active: tuple[frozenset[str], ...]       # codes active at each tick

    def onset(self, phase: int) -> int | None:
        """The first tick of ``phase`` (None: the run never reached it)."""
        return next((i for i, p in enumerate(self.phase_of_tick) if p == phase), None)

    def first_active(self, code: str) -> int | None:
        return next((i for i, codes in enumerate(self.active) if code in codes), None)

    def ever(self) -> set[str]:
        return set().union(*self.active)


@cache
def played(name: str) -> Run:
    """One full pass of the scenario through a fresh Pipeline(Diagnoser()), once per session."""
    src = DemoSource(name, loop=False)
    pipeline = Pipeline(Diagnoser())
    phases, active = [], []
    while (snap := src.next_sync()) is not None:
        frame = pipeline.feed(snap)
        phases.append(src.phase.index)
        active.append(frozenset(f.code for f in frame.findings))
    return Run(tuple(phases), tuple(active))


SCENARIOS = list_scenarios()


def test_every_shipped_scenario_is_checked():
    assert "healthy" in SCENARIOS and len(SCENARIOS) >= 21


@pytest.mark.parametrize("name", SCENARIOS)
def test_raises_exactly_what_it_expects(name):
    sc = load_scenario(name)
    run = played(name)
    assert len(run.active) == int(sc.duration)  # the whole timeline was played
    ever = run.ever()
    assert not ever - set(sc.expect), f"{name}: unexpected {sorted(ever - set(sc.expect))}"
    assert not set(sc.expect) - ever, f"{name}: never raised {sorted(set(sc.expect) - ever)}"


@pytest.mark.parametrize("name", SCENARIOS)
def test_each_code_raises_within_10_s_of_its_phase(name):
    sc = load_scenario(name)
    run = played(name)
    late = []
    for phase in sc.phases:
        if not phase.raises:
            continue
        onset = run.onset(phase.index)
        assert onset is not None, f"{name}: phase '{phase.name}' never played"
        for code in phase.raises:
            window = range(onset, min(onset + RAISE_WITHIN + 1, len(run.active)))
            first = run.first_active(code)
            if not any(code in run.active[i] for i in window) or first is None or first < onset:
                late.append(f"{code} in '{phase.name}' (onset tick {onset}, first active "
                            f"at tick {first})")
    assert not late, f"{name}: not raised within {RAISE_WITHIN} s of its phase: {late}"


@pytest.mark.parametrize("name", [n for n in SCENARIOS if n != "healthy"])
def test_teaches_a_finding_of_its_own_layer(name):
    sc = load_scenario(name)
    prefix = LAYER_PREFIX[sc.layer.value]
    assert any(c.startswith(prefix + "-") for c in sc.expect), \
        f"{name}: layer {sc.layer.value} but expects {list(sc.expect)}"


def test_healthy_raises_nothing():
    sc = load_scenario("healthy")
    assert sc.expect == () and all(not p.raises for p in sc.phases)
    assert played("healthy").ever() == set()
