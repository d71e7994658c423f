"""Pins for the decoding rules where a mutation run found none (issue 31 item 8)."""

from __future__ import annotations

from helpers.snapkit import sample, snap
from infertop.config import DiagnosisConfig
from infertop.findings import Severity
from infertop.history import History
from infertop.model import Reading, make_labels
from infertop.rules.base import Candidate, Context
from infertop.rules.decoding import admission_rejections

LAB = make_labels({"model": "m"})


def _rejected(ratio: float, refused: float = 10.0) -> list[Candidate]:
    derived = [Reading("server.rejection_ratio", ratio, "ratio", LAB),
               Reading("server.requests_rejected", refused, "count", LAB)]
    ctx = Context(History(), snap(1.0, sample("server:local", 1.0, [])), derived,
                  DiagnosisConfig(), {}, {})
    return list(admission_rejections(ctx))


def test_refusals_at_exactly_the_slo_error_ratio_are_within_it() -> None:
    """slo.error_ratio is the share allowed: DEC-007 needs more than it."""
    limit = DiagnosisConfig().slo.error_ratio
    assert _rejected(limit) == []
    (got,) = _rejected(limit * 1.5)
    assert got.severity is Severity.WARN and got.evidence[0].op == ">"
    assert got.title == f"{limit * 1.5:.1%} of requests refused at admission"


def test_refusals_at_exactly_the_critical_ratio_are_critical() -> None:
    crit = DiagnosisConfig().thresholds.error_crit_ratio
    (got,) = _rejected(crit)
    assert got.severity is Severity.CRIT
    (got,) = _rejected(crit * 0.9)
    assert got.severity is Severity.WARN
