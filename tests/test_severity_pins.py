"""Tests that pin a finding's severity where a mutation run found none (issue 31 item 8).

Surviving mutants named by the issue: the engine's "the worse candidate wins" (a rule
that yields two candidates for one subject), HW-005's ``max`` -> ``min`` (a lost GPU with
a minor Xid showed WARN), HW-006's ``break`` and ``max`` in ``too_hot``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from helpers.rulekit import Feed
from infertop.config import config_from_dict
from infertop.findings import RuleSpec, Severity
from infertop.key_symbols import K
from infertop.model import Layer
from infertop.rules.base import Candidate, Context, Rule, ev, sub


def _twice(order: tuple[Severity, ...]):
    def check(ctx: Context) -> Iterator[Candidate]:
        for gpu, r in ctx.per_gpu("gpu.util_ratio").items():
            for sev in order:
                yield Candidate(sub(gpu=gpu), sev, (ev(r, r.key, r.labels, r.value, 0.5, ">="),))
    return check


@pytest.mark.parametrize("order", [(Severity.WARN, Severity.CRIT),
                                   (Severity.CRIT, Severity.WARN)])
def test_the_worse_of_two_candidates_for_one_subject_wins(order):
    rule = Rule(RuleSpec("HW-902", Layer.HARDWARE, "test: two candidates", "",
                         (K.gpu.util_ratio,), {}, "", raise_after=0.0), _twice(order))
    f = Feed()
    f.diag.rules = (*f.diag.rules, rule)
    f.diag._by_code[rule.code] = rule
    f.diag._timing[rule.code] = (0.0, 10.0)
    f.run(lambda: {"gpu.util_ratio": {"gpu=0": 0.9}}, 3)
    assert [x.severity for x in f.active("HW-902")] == [Severity.CRIT]


def test_a_lost_gpu_with_a_minor_xid_is_critical():
    f = Feed()
    f.run(lambda: {"gpu.lost": {"gpu=0": 0}, "gpu.xid_total": {"gpu=0": 0}}, 3)
    f.tick({"gpu.lost": {"gpu=0": 1}, "gpu.xid_total": {"gpu=0": 1},
            "gpu.xid_last": {"gpu=0": 13}})
    (got,) = f.active("HW-005")
    assert got.severity is Severity.CRIT, got.summary()
    lost, xid = got.evidence
    assert (lost.key, lost.threshold, lost.op) == ("gpu.lost", 1, ">=")
    assert (xid.key, xid.threshold, xid.op) == ("gpu.xid_new", 0, ">")
    assert "last Xid 13" in xid.note
    # a lost GPU's remedy is Xid 79's (reboot), whatever minor Xid came with it
    assert got.title == "GPU 0 lost" and "reboot" in got.remedy


def test_a_minor_xid_then_a_critical_one_is_critical():
    f = Feed()
    f.run(lambda: {"gpu.xid_total": {"gpu=0": 0}}, 3)
    f.tick({"gpu.xid_total": {"gpu=0": 1}, "gpu.xid_last": {"gpu=0": 13}})
    assert f.active("HW-005")[0].severity is Severity.WARN
    f.tick({"gpu.xid_total": {"gpu=0": 2}, "gpu.xid_last": {"gpu=0": 79}})
    assert f.active("HW-005")[0].severity is Severity.CRIT


SHORT = config_from_dict({"thresholds": {"gpu_hot_seconds": 30, "gpu_very_hot_seconds": 20,
                                         "hbm_hot_seconds": 20}})


def test_a_very_hot_core_is_critical_with_its_critical_evidence_alone():
    """95 C held past both holds: critical, one core evidence (the 92 C limit; the
    ``break`` after the first level met), not a warning."""
    f = Feed(SHORT)
    f.run(lambda: {"gpu.temp_celsius": {"gpu=0": 95.0}}, 40)
    (got,) = f.active("HW-006")
    assert got.severity is Severity.CRIT
    assert [e.threshold for e in got.evidence] == [92.0]


def test_a_critical_core_and_a_hot_hbm_are_one_critical_finding():
    f = Feed(SHORT)
    f.run(lambda: {"gpu.temp_celsius": {"gpu=0": 95.0},
                   "gpu.mem_temp_celsius": {"gpu=0": 97.0}}, 40)
    (got,) = f.active("HW-006")
    assert got.severity is Severity.CRIT      # the worst of the two (max, not min)
    assert [e.threshold for e in got.evidence] == [92.0, 95.0]
    assert "core and memory (HBM) too hot" in got.title


def test_a_power_capped_gpu_at_low_clocks_is_a_notice_with_its_clock_as_evidence():
    f = Feed()
    f.run(lambda: {"gpu.throttle_reasons": {"gpu=0": 0x4}, "gpu.sm_clock_hz": {"gpu=0": 0.99e9},
                   "gpu.sm_clock_max_hz": {"gpu=0": 1.98e9}}, 8)
    (got,) = f.active("HW-003")
    assert got.severity is Severity.NOTICE
    clock = next(e for e in got.evidence if e.key == "gpu.sm_clock_hz")
    assert clock.value == 0.99e9 and clock.op == "<" and "50% of max 1980 MHz" in clock.note
