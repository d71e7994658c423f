"""Pins for the decoding rules where a mutation run found none (issue 31 item 8)."""

from __future__ import annotations

from helpers.snapkit import sample, snap
from infertop.config import DiagnosisConfig
from infertop.findings import Severity
from infertop.history import History
from infertop.model import Kind, Reading, make_labels
from infertop.rules.base import Candidate, Context
from infertop.rules.decoding import _downtime, _note_restart, admission_rejections

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


class _Counter:
    """The parts of a History series a restart note reads."""
    key, unit, kind = "server.generation_tokens_total", "tokens", Kind.COUNTER
    labels = make_labels({"instance": "a:8000"})
    points = [(1.0, 5.0)]


def test_a_restart_noted_again_within_a_microsecond_is_the_same_one() -> None:
    """Two notes of one instance closer than 1e-6 s are one restart (seen by two
    counters); 1e-6 s apart or more, the later one replaces it."""
    restarts: dict = {}
    _note_restart(restarts, "a:8000", 0.0, _Counter(), 9.0)
    first = restarts["a:8000"]
    _note_restart(restarts, "a:8000", 0.5e-6, _Counter(), 8.0)
    assert restarts["a:8000"] is first
    _note_restart(restarts, "a:8000", 1e-6, _Counter(), 7.0)
    assert restarts["a:8000"][0] == 1e-6 and restarts["a:8000"][1].threshold == 7.0


def _ctx_with_outage(last: tuple[float, float, int, str]) -> Context:
    return Context(History(), snap(1.0, sample("server:a:8000", 1.0, [])), [],
                   DiagnosisConfig(), {}, {"outages": {"server:a:8000": {"last": last}}})


def test_an_outage_ending_up_to_a_microsecond_after_the_restart_is_its_downtime() -> None:
    """The restart is noted on the first good tick, when the outage ends: an end at the
    note's time (to within 1e-6 s, float noise) or up to 30 s before it is that outage."""
    when = 100.0
    ctx = _ctx_with_outage((40.0, when + 1e-6, 12, "connection refused"))
    assert _downtime(ctx, "a:8000", when) == (when + 1e-6 - 40.0, 12, "connection refused",
                                              "server:a:8000")
    assert _downtime(_ctx_with_outage((40.0, when - 30.0, 3, "")), "a:8000", when) is not None
    assert _downtime(_ctx_with_outage((40.0, when + 1e-5, 3, "")), "a:8000", when) is None
    assert _downtime(_ctx_with_outage((10.0, when - 31.0, 3, "")), "a:8000", when) is None
