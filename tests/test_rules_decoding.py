"""Decoding rules DEC-001..DEC-005."""

from __future__ import annotations

from typing import Any

import pytest

from helpers.rulekit import SERVER, Case, Feed, Hist
from infertop.config import SLO, DiagnosisConfig
from infertop.findings import Severity
from infertop.model import Status

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
    ev = got.evidence[0]
    assert isinstance(ev.value, float) and isinstance(ev.threshold, float)
    assert ev.op == "<" and ev.threshold > ev.value


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


# ---- issue 21: a restart that takes minutes (or hours) is still a restart ----------------
def _vllm_like(start: float, gen: float) -> dict:
    return {"server.process_start_seconds": start,
            "server.generation_tokens_total": {E0: gen},
            "server.requests_running": {E0: 2}}


@pytest.mark.parametrize("down_s", [140, 2 * 3600])
def test_restart_after_a_long_outage_is_reported(down_s):
    """A real vLLM took 134-144 s to come back; History drops a series unseen for
    expire_after (120 s), so the old process's start time and counters are gone by then:
    the server's identity must outlive the outage."""
    f = Feed()
    gen = 10_000.0
    for _ in range(20):
        gen += 50
        f.tick(_vllm_like(1_700_000_000.0, gen))
    f.run(lambda: {}, down_s, status={SERVER: Status.ERROR})
    assert f.history.get("server.process_start_seconds") is None   # History forgot it
    f.tick(_vllm_like(1_700_000_000.0 + 20 + down_s, 40.0))
    got = f.active("DEC-005")
    assert got, f.diag.events
    assert f"down {down_s // 60:.0f}" in got[0].title or "h" in got[0].title, got[0].title
    down = [e for e in got[0].evidence if e.key == "server.downtime_seconds"][0]
    assert down.value == pytest.approx(down_s)
    assert got[0].evidence[0].key == "server.process_start_seconds"


def test_restart_after_a_gap_with_no_ticks_at_all():
    """Replay of a recording stopped for 2 hours (no ticks in between): the new process
    start time still says it restarted; its counters alone (grown past the old values)
    could not."""
    f = Feed()
    f.run(lambda: _vllm_like(1_700_000_000.0, 10_000.0), 10)
    f.t += 2 * 3600
    f.run(lambda: _vllm_like(1_700_007_000.0, 90_000.0), 2)
    assert f.active("DEC-005")


def test_the_same_server_back_after_an_outage_is_no_restart():
    """A network blip of 3 minutes: same process, counters where they were."""
    f = Feed()
    f.run(lambda: _vllm_like(1_700_000_000.0, 10_000.0), 10)
    f.run(lambda: {}, 180, status={SERVER: Status.ERROR})
    f.run(lambda: _vllm_like(1_700_000_000.0, 10_050.0), 5)
    assert not f.active("DEC-005")
    assert not f.events("DEC-005", "raised")


# ---- issue 21: a quantile the histogram only bounds is no measurement ---------------------
VLLM_QUEUE_BOUNDS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0)


def _light_load_feed(waiting: float) -> Feed:
    """TTFT p99 ~450 ms (over the 200 ms SLO), every request's queue time in vLLM's first
    queue bucket (0-0.3 s: really microseconds at light load)."""
    c = TtftSlo()
    q = Hist(VLLM_QUEUE_BOUNDS)
    f = Feed()
    f.run(lambda: {**c.bad(), "latency.queue_seconds": {E0: q.observe(0.00003, 20).value()},
                   "server.requests_waiting": {E0: waiting}}, 12)
    return f


def test_light_load_queue_time_is_a_bound_in_evidence_and_json():
    from infertop.report import render_report
    f = _light_load_feed(waiting=0)
    got = f.active("DEC-001")[0]
    q = [e for e in got.evidence if e.key == "latency.queue_seconds"][0]
    assert q.bound == "<" and q.value == pytest.approx(0.3)
    assert "<300 ms" in q.describe() and "297" not in q.describe()
    assert got.to_dict()["evidence"][1]["bound"] == "<"
    # no request waited: the slow part is prefill, not the queue
    assert "prefill itself is slow" in got.remedy
    assert "requests wait in the queue" not in got.remedy
    text = render_report([got], {}, "text", {})
    assert "latency.queue_seconds{engine=0,model=m,quantile=0.99} <300 ms" in text


def test_light_load_queue_bound_with_a_queue_does_not_guess():
    f = _light_load_feed(waiting=3)
    got = f.active("DEC-001")[0]
    assert "too coarse to tell" in got.remedy
    assert not got.remedy.startswith("requests wait in the queue")

# ---- DEC-001: the remedy follows where the first token's time goes ---------------------------
def _ttft_with_queue(queue_seconds):
    """TTFT of 0.45 s (p99 in the (0.2, 0.5] bucket, over the 200 ms SLO) and a queue
    time histogram beside it; the queue values sit inside a bucket, not in the first one
    (where a quantile is only an upper bound)."""
    c = TtftSlo()
    q = Hist()
    f = Feed()
    f.run(lambda: {**c.bad(), "latency.queue_seconds": {E0: q.observe(queue_seconds, 20).value()}},
          10)
    return f.active("DEC-001")[0]


def test_ttft_with_queue_dominating_names_the_queue_time():
    got = _ttft_with_queue(0.4)
    assert got.remedy.startswith("requests wait in the queue")
    p99, queue = got.evidence
    assert p99.key == "latency.ttft_seconds" and dict(p99.labels)["quantile"] == "0.99"
    assert p99.value == pytest.approx(0.497) and p99.threshold == 0.2 and p99.op == ">"
    assert queue.key == "latency.queue_seconds" and dict(queue.labels)["quantile"] == "0.99"
    assert queue.value == pytest.approx(0.497) and queue.threshold is None


def test_ttft_with_a_short_queue_blames_prefill():
    got = _ttft_with_queue(0.015)          # queue p99 ~25 ms of a ~500 ms TTFT p99
    assert got.remedy.startswith("prefill itself is slow")
    assert got.evidence[1].value == pytest.approx(0.02485)
    assert got.severity is Severity.WARN   # 0.5 s is under 5x the 200 ms SLO


def test_ttft_without_a_queue_histogram_has_the_catalogue_remedy():
    c = TtftSlo()
    f = Feed()
    f.run(c.bad, 10)
    got = f.active("DEC-001")[0]
    assert [e.key for e in got.evidence] == ["latency.ttft_seconds"]
    assert got.remedy.startswith("if the queue dominates")
    # 10 ticks into the run: the span covered, not "in the last 60 s" (docs/rules.md#windows)
    assert "first tokens in the 9 s covered of the 60 s window" in got.evidence[0].note
    f.run(c.bad, 55)
    assert "first tokens in the last 60 s" in f.active("DEC-001")[0].evidence[0].note


def test_ttft_just_enough_requests_to_judge():
    """slo_min_requests (10): 12 first tokens in the window are enough, 8 are not."""
    for per_tick, want in ((12 / 60, True), (8 / 60, False)):
        h = Hist()
        f = Feed()
        def ttft(h: Hist = h, per_tick: float = per_tick) -> dict[str, Any]:
            return {"latency.ttft_seconds": {E0: h.observe(3.0, per_tick).value()}}
        f.run(ttft, 90)
        assert bool(f.active("DEC-001")) is want, per_tick


# ---- DEC-002: jitter needs enough tokens and a p99 above the floor ---------------------------
def _itl(fast, stall, stalls_share, tokens_per_tick, ticks=70):
    h = Hist()
    f = Feed()
    f.run(lambda: {"latency.itl_seconds": {E0: h.observe(fast, tokens_per_tick * (1 - stalls_share))
                                           .observe(stall, tokens_per_tick * stalls_share)
                                           .value()}}, ticks)
    return f.active("DEC-002")


def test_itl_jitter_evidence_ratio_p99_and_p50():
    got = _itl(0.015, 0.4, 0.05, 500)[0]
    ratio, p99, p50 = got.evidence
    assert dict(p99.labels)["quantile"] == "0.99" and dict(p50.labels)["quantile"] == "0.5"
    # p50: rank 250 of 475 in (0.01, 0.025]; p99: rank 495, 20 of 25 into (0.2, 0.5]
    assert p50.value == pytest.approx(0.01 + 0.015 * 250 / 475, rel=0.01)
    assert p99.value == pytest.approx(0.2 + 0.3 * 20 / 25, rel=0.01)
    assert ratio.value == pytest.approx(round(p99.value / p50.value, 2))
    assert ratio.threshold == 4.0 and p99.threshold == 0.1 and p50.threshold is None
    assert f"p99 {ratio.value:.1f}x p50" in got.title


def test_itl_jitter_needs_enough_tokens_in_the_window():
    # ~90 tokens a minute: too few to call a p99 (itl_min_tokens 100); 180 are enough
    assert not _itl(0.015, 0.4, 0.05, 1.5)
    assert _itl(0.015, 0.4, 0.05, 3.0)


def test_itl_jitter_needs_a_p99_above_the_floor():
    # p99 / p50 ~5, but p99 is ~90 ms: under itl_jitter_min_seconds (100 ms), no stall felt
    assert not _itl(0.015, 0.08, 0.05, 500)
    assert not _itl(0.015, 0.05, 0.0, 500)      # no jitter at all


def test_itl_jitter_at_exactly_the_ratio_and_the_floor_is_raised():
    """p50 0.025 s and p99 0.1 s, both exactly on bucket bounds: p99/p50 is exactly
    itl_jitter_ratio (4) and p99 exactly itl_jitter_min_seconds (0.1 s): both 'at or
    above', so jitter."""
    h = Hist()
    f = Feed()
    f.run(lambda: {"latency.itl_seconds": {E0: h.observe(0.02, 50).observe(0.08, 49)
                                           .observe(0.4, 1).value()}}, 30)
    ratio, p99, p50 = f.active("DEC-002")[0].evidence
    assert (ratio.value, p99.value, p50.value) == (4.0, pytest.approx(0.1), pytest.approx(0.025))


def test_jitter_with_exactly_the_minimum_tokens_is_judged():
    """One burst of exactly itl_min_tokens (100) tokens, then nothing: the window holds
    100 tokens for a minute, enough to judge."""
    h = Hist()
    f = Feed()
    f.run(lambda: {"latency.itl_seconds": {E0: h.value()}}, 5)
    h.observe(0.015, 90).observe(0.4, 10)
    f.run(lambda: {"latency.itl_seconds": {E0: h.value()}}, 30)
    assert f.active("DEC-002")


# ---- DEC-003 -----------------------------------------------------------------------------
def test_spec_acceptance_exactly_at_the_minimum_is_fine():
    c = SpecAcceptance()
    f = Feed()
    f.run(lambda: c._t(40), 40)                # 40 of 100 drafts: exactly the 0.4 minimum
    assert not f.active("DEC-003")
    f.run(lambda: c._t(20), 40)
    got = f.active("DEC-003")[0]
    (e,) = got.evidence
    assert e.op == "<" and e.threshold == 0.4 and isinstance(e.value, float) and e.value < 0.4
    assert "draft tokens accepted in the last 60 s" in e.note


def test_spec_acceptance_with_exactly_the_minimum_drafts_is_judged():
    f = Feed()
    f.run(lambda: {"spec.draft_tokens_total": {E0: 0.0},
                   "spec.accepted_tokens_total": {E0: 0.0}}, 5)
    f.run(lambda: {"spec.draft_tokens_total": {E0: 100.0},
                   "spec.accepted_tokens_total": {E0: 10.0}}, 30)
    (e,) = f.active("DEC-003")[0].evidence
    assert e.value == pytest.approx(0.1) and e.note.startswith("10 of 100 draft tokens")


# ---- DEC-004 -----------------------------------------------------------------------------
def _errors(stop_per_tick, errors_every, errors_each, ticks=70):
    stop, err, n = [0.0], [0.0], [0]

    def t():
        n[0] += 1
        stop[0] += stop_per_tick
        if n[0] % errors_every == 0:
            err[0] += errors_each
        return {"server.requests_finished_total": {f"{E0},reason=stop": stop[0],
                                                   f"{E0},reason=error": err[0]}}
    f = Feed()
    f.run(t, ticks)
    return f.active("DEC-004")


def test_errors_under_the_slo_are_not_a_finding():
    assert not _errors(100, 20, 1)      # 1 error in 2000 requests: under the 0.1 % SLO
    assert _errors(100, 5, 1)           # 1 in 500: over it


def test_too_few_requests_to_judge_an_error_rate():
    # half of the requests fail, but only ~12 finished in the window (minimum 20)
    assert not _errors(0.1, 10, 1)


def test_error_rate_exactly_at_the_critical_ratio_is_critical():
    got = _errors(95, 1, 5)[0]           # 5 of every 100: exactly error_crit_ratio (5 %)
    assert got.severity is Severity.CRIT
    (e,) = got.evidence
    assert e.value == 0.05 and e.threshold == 0.001 and e.op == ">"
    assert got.title == "error rate 5.0%"
    assert e.note.startswith("300 of 6000 requests in the last 60 s ended error")


# ---- DEC-005: the restart's evidence --------------------------------------------------------
def test_restart_on_the_second_scrape_names_the_old_and_new_values():
    f = Feed()
    f.tick({"server.generation_tokens_total": {E0: 50_000.0}})
    f.tick({"server.generation_tokens_total": {E0: 120.0}})
    (e,) = f.active("DEC-005")[0].evidence
    assert (e.key, e.value, e.threshold, e.op) == ("server.generation_tokens_total", 120.0,
                                                   50_000.0, "<")
    assert "counter went backwards" in e.note


def test_restart_evidence_is_the_value_just_before_the_drop():
    c = Restart()
    f = Feed()
    f.run(c.good, 10)                   # 50 300 ... 53 000
    before = c.gen
    f.tick(c.bad())
    (e,) = f.active("DEC-005")[0].evidence
    assert e.threshold == before and e.value == 300.0


def test_counters_that_drop_together_are_one_restart():
    """Generation and prompt counters both reset at the restart: one finding, its evidence
    the first counter's (no overwrite by the second)."""
    f = Feed()
    f.run(lambda: {"server.generation_tokens_total": {E0: 9000.0},
                   "server.prompt_tokens_total": {E0: 7000.0}}, 5)
    f.tick({"server.generation_tokens_total": {E0: 10.0},
            "server.prompt_tokens_total": {E0: 20.0}})
    (got,) = f.active("DEC-005")
    assert [e.key for e in got.evidence] == ["server.generation_tokens_total"]


@pytest.mark.parametrize("moved,want", [(1.5, True), (0.9, False), (900.0, True)])
def test_process_start_time_moving_more_than_a_second_is_a_restart(moved, want):
    f = Feed()
    f.tick({"server.process_start_seconds": 1_700_000_000.0})
    f.tick({"server.process_start_seconds": 1_700_000_000.0 + moved})
    got = f.active("DEC-005")
    assert bool(got) is want
    if want:
        (e,) = got[0].evidence
        assert e.op == ">" and e.threshold == 1_700_000_000.0 and "new process" in e.note


def test_another_sources_outage_is_not_the_servers_downtime():
    c = Restart()
    f = Feed()
    gpu = {"gpu.util_ratio": {"gpu=0": 0.5}}
    f.run(lambda: {**c.good(), **gpu}, 10)
    f.run(lambda: {"server.generation_tokens_total": {E0: c.gen},
                   "server.requests_running": {E0: 4}}, 5, status={"nvml": Status.ERROR})
    f.tick({**c.bad(), **gpu})         # the GPU probe is back as the server restarts
    assert f.diag._state["outages"]["nvml"]["last"] is not None
    got = f.active("DEC-005")[0]
    assert "between two scrapes" in got.title
    assert [e.key for e in got.evidence] == ["server.generation_tokens_total"]

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
