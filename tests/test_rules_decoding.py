"""Decoding rules DEC-001..DEC-005."""

from __future__ import annotations

import pytest

from infertop.config import DiagnosisConfig, SLO
from infertop.findings import Severity
from infertop.model import Status
from helpers.rulekit import (SERVER, Case, Feed, Hist)

E0 = "engine=0,model=m"


class TtftSlo(Case):
    code = "DEC-001"
    windowed = True
    lag = 62.0  # slow first tokens stay in the 60 s window
    missing = ("latency.ttft_seconds",)

    def __init__(self):
        self.h = Hist()

    def _t(self, seconds):
        self.h.observe(seconds, 20)
        return {"latency.ttft_seconds": {E0: self.h.value()}}

    def good(self):
        return self._t(0.04)

    def bad(self):
        return self._t(0.45)

    def hi(self):
        return self._t(0.21)

    def lo(self):
        return self._t(0.19)


class ItlJitter(Case):
    code = "DEC-002"
    windowed = True
    lag = 62.0
    missing = ("latency.itl_seconds",)

    def __init__(self):
        self.h = Hist()

    def _t(self, stalls):
        self.h.observe(0.015, 500 - stalls)
        self.h.observe(0.4, stalls)
        return {"latency.itl_seconds": {E0: self.h.value()}}

    def good(self):
        return self._t(0)

    def bad(self):
        return self._t(25)   # 5 % of tokens stall 400 ms behind a prefill

    def hi(self):
        return self._t(8)

    def lo(self):
        return self._t(2)


class SpecAcceptance(Case):
    code = "DEC-003"
    windowed = True
    build = 40   # the ratio over 60 s needs time to fall
    lag = 62.0
    missing = ("spec.accepted_tokens_total",)

    def __init__(self):
        self.drafts = self.acc = 0.0

    def _t(self, accepted):
        self.drafts += 100
        self.acc += accepted
        return {"spec.draft_tokens_total": {E0: self.drafts},
                "spec.accepted_tokens_total": {E0: self.acc}}

    def good(self):
        return self._t(70)

    def bad(self):
        return self._t(15)

    def hi(self):
        return self._t(39)

    def lo(self):
        return self._t(41)


class ErrorRate(Case):
    code = "DEC-004"
    windowed = True
    lag = 62.0
    missing = ("server.requests_finished_total",)

    def __init__(self):
        self.stop = self.err = self.abort = 0.0

    def _t(self, errors, aborts=0):
        self.stop += 100
        self.err += errors
        self.abort += aborts
        return {"server.requests_finished_total": {f"{E0},reason=stop": self.stop,
                                                   f"{E0},reason=error": self.err,
                                                   f"{E0},reason=abort": self.abort}}

    def good(self):
        return self._t(0, aborts=3)   # client aborts are not server errors

    def bad(self):
        return self._t(3)

    def hi(self):
        return self._t(1)

    def lo(self):
        return self._t(0)


class Restart(Case):
    code = "DEC-005"
    windowed = True
    lag = 300.0  # restart_window
    missing = ("server.generation_tokens_total", "server.prompt_tokens_total",
               "server.requests_finished_total", "server.process_start_seconds")

    def __init__(self):
        self.gen = 50_000.0
        self.restarted = False

    def _t(self):
        self.gen += 300
        return {"server.generation_tokens_total": {E0: self.gen},
                "server.requests_running": {E0: 4}}

    def good(self):
        return self._t()

    def bad(self):
        if not self.restarted:
            self.gen, self.restarted = 0.0, True
        return self._t()

    def hi(self):
        self.gen = 0.0   # another restart
        return self._t()


class AdmissionRejected(Case):
    """DEC-007: vLLM's admission_rejections (no engine label) judged as errors."""
    code = "DEC-007"
    windowed = True
    lag = 62.0
    missing = ("server.admission_rejections_total",)

    def __init__(self):
        self.stop = self.refused = 0.0

    def _t(self, refused):
        self.stop += 100
        self.refused += refused
        return {"server.requests_finished_total": {f"{E0},reason=stop": self.stop},
                "server.admission_rejections_total": {
                    "model=m,reason=max_num_queued_reqs": self.refused,
                    "model=m,reason=max_num_queued_tokens": 0.0}}

    def good(self):
        return self._t(0)

    def bad(self):
        return self._t(10)

    def hi(self):
        return self._t(1)

    def lo(self):
        return self._t(0)


CASES = [TtftSlo(), ItlJitter(), SpecAcceptance(), ErrorRate(), Restart(), AdmissionRejected()]


# ---- closer looks ---------------------------------------------------------------------
def test_a_few_slow_requests_in_a_busy_window_are_within_slo():
    """'Too short' for a windowed p99: a burst too small to move the p99 over the window."""
    c = TtftSlo()
    f = Feed()
    f.run(c.good, 60)
    f.tick({"latency.ttft_seconds": {E0: c.h.observe(2.0, 5).value()}})   # 5 of ~1200
    f.run(c.good, 30)
    assert not f.events("DEC-001", "raised")


def test_ttft_slo_from_config_and_critical_factor():
    c = TtftSlo()
    f = Feed(DiagnosisConfig(slo=SLO(ttft_p99_seconds=0.5)))
    f.run(c.bad, 20)                       # p99 ~0.45-0.5 s: inside a 0.5 s SLO
    assert not f.active("DEC-001")
    c2 = TtftSlo()
    f2 = Feed()
    f2.run(lambda: c2._t(4.0), 10)         # 20x the default 200 ms
    assert f2.active("DEC-001")[0].severity is Severity.CRIT


def test_ttft_with_queue_dominating_points_at_capacity():
    c = TtftSlo()
    q = Hist()
    f = Feed()
    f.run(lambda: {**c.bad(), "latency.queue_seconds": {E0: q.observe(0.4, 20).value()}}, 10)
    got = f.active("DEC-001")[0]
    assert "queue" in got.remedy and got.evidence[1].key == "latency.queue_seconds"


def test_too_few_requests_to_judge():
    f = Feed()
    h = Hist()
    f.run(lambda: {"latency.ttft_seconds": {E0: h.observe(3.0, 0.1).value()}}, 50)
    assert not f.active("DEC-001")    # 5 slow requests in a minute: not enough to call a p99


def test_errors_then_healthy_traffic_clear_after_the_window():
    """Counters are windowed: an error burst a minute ago is not a finding now."""
    c = ErrorRate()
    f = Feed()
    f.run(c.good, 5)
    f.run(c.bad, 10)
    assert f.active("DEC-004")
    f.run(c.good, 75)
    assert not f.active("DEC-004")


def test_high_error_rate_is_critical_and_aborts_are_noted():
    c = ErrorRate()
    f = Feed()
    f.run(lambda: c._t(10, aborts=2), 10)
    got = f.active("DEC-004")[0]
    assert got.severity is Severity.CRIT
    assert "aborts not counted" in got.evidence[0].note


def test_restart_measures_downtime():
    c = Restart()
    f = Feed()
    f.run(c.good, 10)
    f.run(lambda: {}, 7, status={SERVER: Status.ERROR})    # /metrics unreachable 7 s
    f.tick(c.bad())
    got = f.active("DEC-005")
    assert got, f.diag.events
    down = [e for e in got[0].evidence if e.key == "server.downtime_seconds"][0]
    assert down.value == 7.0 and "7 scrapes" in down.note
    assert "down 7" in got[0].title


def test_restart_between_scrapes_is_still_found():
    c = Restart()
    f = Feed()
    f.run(c.good, 10)
    f.tick(c.bad())
    got = f.active("DEC-005")[0]
    assert got.since == f.t - 1 and "between two scrapes" in got.title
    assert got.evidence[0].op == "<" and got.evidence[0].threshold > got.evidence[0].value


def test_process_start_time_moving_is_a_restart():
    f = Feed()
    f.run(lambda: {"server.process_start_seconds": 1_700_000_000.0}, 5)
    f.tick({"server.process_start_seconds": 1_700_000_900.0})
    assert f.active("DEC-005")


def test_fresh_diagnoser_finds_recent_restart_in_history():
    """A Diagnoser created later (config reload) still sees a restart in the history."""
    c = Restart()
    f = Feed()
    f.run(c.good, 10)
    f.run(c.bad, 10)
    from infertop.rules.engine import Diagnoser
    d = Diagnoser()
    f.pipe.diagnoser = f.diag = d
    f.run(c.good, 3)
    assert f.active("DEC-005")


def test_admission_rejections_count_against_every_engine_of_the_model():
    """Refusals carry no engine label: the denominator is the finished requests of all
    the model's engines (two engines finishing 100/s each, 10 refused/s: 10 / 210)."""
    f = Feed()
    state = {"stop0": 0.0, "stop1": 0.0, "refused": 0.0}

    def tick():
        state["stop0"] += 100
        state["stop1"] += 100
        state["refused"] += 10
        return {"server.requests_finished_total": {
                    "engine=0,model=m,reason=stop": state["stop0"],
                    "engine=1,model=m,reason=stop": state["stop1"]},
                "server.admission_rejections_total": {
                    "model=m,reason=max_num_queued_reqs": state["refused"]}}
    f.run(tick, 20)
    [fin] = f.active("DEC-007")
    assert fin.severity.value == "warn"   # 4.8 % < the 5 % critical share
    assert fin.evidence[0].value == pytest.approx(10 / 210)
    assert "refused at admission" in fin.title
