"""The assertions ``rules promtool-input`` writes, pinned at their edges (issue 31 item 8):
the shortest grid that can assert, the grid step the raise-time slack is counted in, an
episode whose worst level the export has no alert for.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from helpers.rulekit import tick
from infertop.findings import Severity
from infertop.model import Snapshot
from infertop.promrules import build
from infertop.promtool_asserts import expectations, fired_expr

LOST: dict[str, Any] = {"gpu.lost": {"gpu=0": 1}}
CAPPED: dict[str, Any] = {"gpu.throttle_reasons": {"gpu=0": 0x4},
                          "gpu.sm_clock_hz": {"gpu=0": 0.99e9},
                          "gpu.sm_clock_max_hz": {"gpu=0": 1.98e9}}


def _run(data: dict[str, Any], n: int = 20) -> list[Snapshot]:
    return [tick(1_000_000.0 + i, data) for i in range(n)]


def _evals(tests: list[str], code: str) -> list[int]:
    """The eval times of the tests that ask whether ``code`` fired (any severity)."""
    out = []
    for t in tests:
        if f'alertname="{code}"}}' in t and "severity" not in t.split("\n", 1)[0]:
            out.append(int(t.split("eval_time: ")[1].split("s", 1)[0]))
    return out


def test_a_grid_of_two_steps_is_enough_to_assert() -> None:
    got = expectations(_run(LOST), 1.0, 2, has_gpu=True)
    assert got.judged and got.tests and set(got.expected) == {"HW-005"}
    assert expectations(_run(LOST), 1.0, 1, has_gpu=True).tests == []


def test_the_raise_time_slack_is_counted_in_grid_steps() -> None:
    """HW-005 raised at once (no hold): fired by 2 steps + half a step after it."""
    two = expectations(_run(LOST), 2.0, 10, has_gpu=True)
    assert _evals(two.tests, "HW-005") == [5]                   # 2 x 2 s + 1 s
    assert fired_expr(5, "HW-005") in two.tests[1]
    # no interval given: steps of 1 s
    none = expectations(_run(LOST), 0.0, 10, has_gpu=True)
    assert _evals(none.tests, "HW-005") == [2]                  # 2 x 1 s + 0.5 s, rounded


def test_a_worst_level_below_every_exported_one_asserts_only_that_it_fired() -> None:
    """In-process HW-003 is a notice for a power cap at low clocks; the export has HW-003
    at warn and crit only: the code must fire, no severity is asserted for it."""
    got = expectations(_run(CAPPED), 1.0, 20, has_gpu=True)
    assert "HW-003" in got.expected
    assert _evals(got.tests, "HW-003")
    assert not [t for t in got.tests if 'alertname="HW-003", severity' in t]


def test_a_code_raised_long_after_the_start_must_not_fire_early() -> None:
    """HW-005 raised 11 s in (no hold): besides "fired by", a test that it had not
    fired by 1 s (11 - 10 s of slack), the first eval time that can say so."""
    snaps = [tick(1_000_000.0 + i, {"gpu.lost": {"gpu=0": 1 if i >= 11 else 0}})
             for i in range(30)]
    got = expectations(snaps, 1.0, 30, has_gpu=True)
    assert got.expected["HW-005"].first == 11.0
    early = [t for t in got.tests if fired_expr(1, "HW-005") in t]
    assert len(early) == 1 and early[0].endswith("exp_samples: []")


def test_the_worst_level_asserted_is_the_highest_exported_one_below_it() -> None:
    """An export whose HW-005 alerts are warn and notice only (a config or a version
    without its crit): a critical episode asserts the warn alert fired, and nothing
    above it."""
    export = build()
    hw5 = [a for a in export.alerts if a.code == "HW-005" and a.severity is Severity.WARN]
    export.alerts = [a for a in export.alerts if a.code != "HW-005"] + hw5 + \
        [replace(hw5[0], severity=Severity.NOTICE)]
    got = expectations(_run(LOST), 1.0, 20, has_gpu=True, export=export)
    assert got.expected["HW-005"].worst is Severity.CRIT
    sev = [t for t in got.tests if 'alertname="HW-005", severity=~' in t]
    assert len(sev) == 1 and 'severity=~"warn"' in sev[0] and "value: 1" in sev[0]
