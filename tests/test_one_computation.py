"""One computation of every windowed quantity: a finding's evidence under a derived key is
the derived reading the screen, ``snapshot --json`` and ``doctor`` show, value for value.

Rules read derived readings (``Context.derived``), never recompute rates, increases,
ratios or quantiles; these tests catch a rule that drifts from what is on screen.
"""

from __future__ import annotations

import pytest

from helpers.rulekit import Feed
from infertop.demo.scenario import list_scenarios
from infertop.keys import SPECS
from infertop.pipeline import Pipeline
from infertop.probes.sources.demo import DemoSource
from infertop.rules.engine import Diagnoser

DERIVED = {k for k, s in SPECS.items() if s.derived}


def _mismatches(frame, holding) -> list[str]:
    """Findings whose condition held this tick (a clearing one keeps the evidence of the
    last tick it held) against the derived readings of the same tick."""
    shown = {(r.key, r.labels): r for r in frame.derived}
    bad = []
    for f in frame.findings:
        if (f.code, f.subject) not in holding:
            continue
        for e in f.evidence:
            if e.key not in DERIVED:
                continue
            r = shown.get((e.key, e.labels))
            if r is None:
                bad.append(f"{f.code}: {e.key}{dict(e.labels)} not shown on screen")
            elif r.value is None or e.value != pytest.approx(r.value, rel=1e-9, abs=1e-12):
                bad.append(f"{f.code}: {e.key}{dict(e.labels)} evidence {e.value} != "
                           f"screen {r.value}")
    return bad


@pytest.mark.slow   # every scenario, whole
@pytest.mark.parametrize("name", list_scenarios())
def test_evidence_under_a_derived_key_is_the_screen_value(name):
    src = DemoSource(name, loop=False)
    diag = Diagnoser()
    pipeline = Pipeline(diag)
    bad = []
    while (snap := src.next_sync()) is not None:
        frame = pipeline.feed(snap)
        bad += _mismatches(frame, diag.holding)
    assert not bad, bad[:5]


@pytest.mark.slow
def test_some_scenario_evidence_is_derived():
    """The check above must have something to check: these rules' evidence is derived."""
    seen = set()
    for name in ("mem-kv-pressure", "dec-error-restart", "dec-spec-collapse"):
        src = DemoSource(name, loop=False)
        pipeline = Pipeline(Diagnoser())
        while (snap := src.next_sync()) is not None:
            for f in pipeline.feed(snap).findings:
                seen |= {e.key for e in f.evidence if e.key in DERIVED}
    assert {"server.preemptions_per_second", "server.error_ratio",
            "spec.acceptance_ratio"} <= seen, seen


def test_error_ratio_counts_errors_not_aborts_on_screen_and_in_dec004():
    """2 % error and 10 % abort finishes: the pane's errors and DEC-004 both read 2 %."""
    feed = Feed()
    done = {"stop": 0.0, "error": 0.0, "abort": 0.0}

    def tick():
        done["stop"] += 88
        done["error"] += 2
        done["abort"] += 10
        return {"server.requests_finished_total": {f"engine=0,reason={k}": v
                                                   for k, v in done.items()}}

    feed.run(tick, 20)
    frame = feed.pipe.feed(__import__("helpers.rulekit", fromlist=["tick"]).tick(feed.t, tick()))
    ratio = [r for r in frame.derived if r.key == "server.error_ratio"]
    aborts = [r for r in frame.derived if r.key == "server.abort_ratio"]
    assert ratio[0].value == pytest.approx(0.02) and aborts[0].value == pytest.approx(0.10)
    dec = [f for f in frame.findings if f.code == "DEC-004"]
    assert dec and dec[0].evidence[0].value == pytest.approx(0.02)
    assert "2.0 %" in dec[0].title.replace("%", " %").replace("  ", " ")
    assert "client aborts not counted" in dec[0].evidence[0].note
    assert not _mismatches(frame, feed.diag.holding)
