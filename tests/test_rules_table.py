"""The same six-way table for every rule of every layer: raises when the condition is
sustained, stays quiet when healthy or too short, clears after healthy seconds, does not
flap on noise around the threshold, and stays silent when its inputs are missing.  Each
layer's cases (and its closer looks) live in tests/test_rules_<layer>.py."""

from __future__ import annotations

import pytest

import test_rules_decoding
import test_rules_hardware
import test_rules_kernels
import test_rules_memory
import test_rules_parallelism
import test_rules_scheduling
from helpers.rulekit import (check_clears, check_missing_inputs, check_no_flap, check_quiet_when_healthy,
                     check_quiet_when_too_short, check_raises)

CASES = [c for m in (test_rules_hardware, test_rules_kernels, test_rules_memory,
                     test_rules_scheduling, test_rules_parallelism, test_rules_decoding)
         for c in m.CASES]


def fresh(case):
    """Each check gets its own case object (cases keep per-run state)."""
    return type(case)()


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_raises_when_sustained(case):
    check_raises(fresh(case))


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_quiet_when_healthy(case):
    check_quiet_when_healthy(fresh(case))


# Windowed rules (a quantile or ratio over the window) cannot see a burst shorter than
# raise_after; their modules test "too small to count" instead.
@pytest.mark.parametrize("case", [c for c in CASES if not c.windowed], ids=repr)
def test_quiet_when_too_short(case):
    check_quiet_when_too_short(fresh(case))


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_clears_after_healthy_seconds(case):
    check_clears(fresh(case))


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_no_flap_around_threshold(case):
    check_no_flap(fresh(case))


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_silent_when_inputs_missing(case):
    check_missing_inputs(fresh(case))


def test_every_rule_in_the_catalogue_has_a_table_case():
    from infertop.rules.engine import Diagnoser
    codes = {spec.code for spec in Diagnoser().catalogue()}
    # DEC-006 is judged from a source's status, not readings: a table row (data only)
    # cannot express it; tests/test_faults_dead_server.py runs the same checks on it
    assert codes - {"DEC-006"} == {c.code for c in CASES}
