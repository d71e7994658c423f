"""Hysteresis holds the level that is raised; it never lifts a subject to a higher level.

``Context.past`` relaxes a threshold by ``hold_margin`` while the rule's finding for that
subject is raised.  Issue 31: HW-006 went critical for a GPU held at a steady 91 C (warn
band 85-92 C) because, once the warning was raised, the critical limit 92 C relaxed to
82.8 C.  The hold is per level now, in ``Context.past`` (a rule passes the level a
comparison earns) and in the engine (an escalation that leaned on a relaxed threshold is
judged again strictly, for any rule that does not pass its level), and in the export
(each alert holds on its own ``ALERTS`` series, extra labels included).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.promtool_kit import PROMTOOL_HINT, check_alerts, promtool_binary
from helpers.rulekit import Feed
from infertop.config import config_from_dict
from infertop.findings import RuleSpec, Severity
from infertop.key_symbols import K
from infertop.model import Layer
from infertop.promtool_input import InputSeries
from infertop.rules.base import Candidate, Context, Rule, ev, sub

needs_promtool = pytest.mark.skipif(promtool_binary() is None, reason=PROMTOOL_HINT)
NO_DEADLINE = settings(max_examples=5, deadline=None,
                       suppress_health_check=[HealthCheck.too_slow])
# the holds shortened (warn 30 s, critical 20 s) so a long hold is a few hundred ticks
SHORT_HOLDS = config_from_dict({"thresholds": {"gpu_hot_seconds": 30,
                                               "gpu_very_hot_seconds": 20}})


# ---- in-process -------------------------------------------------------------------------
@NO_DEADLINE
@given(st.floats(min_value=85.5, max_value=92.0))
def test_a_core_held_in_the_warn_band_never_goes_critical(celsius):
    f = Feed(SHORT_HOLDS)
    worst = None
    for i in range(150):   # the warning raises at 30 s; then held 4 times as long
        for x in f.tick({"gpu.temp_celsius": {"gpu=0": celsius}}):
            if x.code == "HW-006":
                worst = x.severity if worst is None else max(worst, x.severity)
                assert x.severity is Severity.WARN, (i, celsius, x.summary())
                assert all(e.threshold == 85.0 for e in x.evidence), x.evidence
    assert worst is Severity.WARN
    assert not [e for e in f.diag.events if e.code == "HW-006" and e.kind == "escalated"]


def test_a_raised_critical_still_holds_relaxed():
    """The hold itself stays: critical at 93 C, then 90 C (above 92 C relaxed to 82.8 C)."""
    f = Feed(SHORT_HOLDS)
    f.run(lambda: {"gpu.temp_celsius": {"gpu=0": 93.0}}, 40)
    assert [x.severity for x in f.active("HW-006")] == [Severity.CRIT]
    f.run(lambda: {"gpu.temp_celsius": {"gpu=0": 90.0}}, 60)
    assert [x.severity for x in f.active("HW-006")] == [Severity.CRIT]


# A rule that picks its level through ``past`` without saying the level (as HW-006 did):
# the engine must not let the hold lift it.
def _levels_unsaid(ctx: Context) -> Iterator[Candidate]:
    for gpu, r in ctx.per_gpu("gpu.util_ratio").items():
        for sev, limit in ((Severity.CRIT, 0.9), (Severity.WARN, 0.5)):
            if ctx.past(r.value, ">=", limit, sub(gpu=gpu)):
                yield Candidate(sub(gpu=gpu), sev,
                                (ev(r, r.key, r.labels, r.value, limit, ">="),))
                break


TEST_RULE = Rule(RuleSpec("HW-901", Layer.HARDWARE, "test: two levels, level unsaid", "",
                          (K.gpu.util_ratio,), {}, "", raise_after=0.0), _levels_unsaid)


def _feed_with(rule: Rule) -> Feed:
    f = Feed()
    f.diag.rules = (*f.diag.rules, rule)
    f.diag._by_code[rule.code] = rule
    f.diag._timing[rule.code] = (0.0, 10.0)
    return f


@pytest.mark.parametrize("util", [0.5, 0.7, 0.85, 0.89])
def test_the_engine_does_not_let_a_hold_lift_a_rule_that_does_not_say_its_level(util):
    f = _feed_with(TEST_RULE)
    f.run(lambda: {"gpu.util_ratio": {"gpu=0": util}}, 60)
    got = f.active("HW-901")
    assert [x.severity for x in got] == [Severity.WARN], got
    assert got[0].evidence[0].threshold == 0.5    # the warning's own comparison


def test_the_engine_still_escalates_when_the_higher_level_is_earned():
    f = _feed_with(TEST_RULE)
    f.run(lambda: {"gpu.util_ratio": {"gpu=0": 0.7}}, 20)
    f.run(lambda: {"gpu.util_ratio": {"gpu=0": 0.95}}, 3)
    assert [x.severity for x in f.active("HW-901")] == [Severity.CRIT]
    # and holds it relaxed: 0.85 is above 0.9 relaxed (0.81)
    f.run(lambda: {"gpu.util_ratio": {"gpu=0": 0.85}}, 30)
    assert [x.severity for x in f.active("HW-901")] == [Severity.CRIT]


# ---- in the export (promtool) -----------------------------------------------------------
def _base(gpu: int) -> str:
    return f'{{gpu="{gpu}",instance="n1:9400",job="dcgm",node="n1"}}'


CRIT = 'alertname="HW-006", severity="crit"'
CORE_WARN = 'alertname="HW-006", severity="warn", sensor=""'
HBM_WARN = 'alertname="HW-006", severity="warn", sensor="memory"'


@pytest.mark.integration   # runs promtool
@needs_promtool
def test_exported_holds_stay_at_their_level_and_on_their_own_series(tmp_path):
    """One promtool run, one GPU per case:

    * GPUs 0-2: the core held at 86, 91, 92 C (warn band) for 15 minutes never goes
      critical;
    * GPU 3: HBM at 96 C raises the HBM warning; at 93 C (above 95 C relaxed) it holds,
      as on the screen, though no core alert fires (it held on the core's ALERTS series);
    * GPU 4: a core warning firing does not let the HBM rule fire on its relaxed limit
      (HBM at 90 C, under 95 C)."""
    steps = 900
    series = InputSeries(1.0, 0.0, steps)
    for i in range(steps):
        for gpu, celsius in enumerate((86.0, 91.0, 92.0)):
            series.put(f"DCGM_FI_DEV_GPU_TEMP{_base(gpu)}", i, celsius)
        series.put(f"DCGM_FI_DEV_GPU_TEMP{_base(3)}", i, 60.0)
        series.put(f"DCGM_FI_DEV_MEMORY_TEMP{_base(3)}", i, 96.0 if i < 400 else 93.0)
        series.put(f"DCGM_FI_DEV_GPU_TEMP{_base(4)}", i, 90.0)
        series.put(f"DCGM_FI_DEV_MEMORY_TEMP{_base(4)}", i, 90.0)
    checks = []
    for gpu in (0, 1, 2):
        g = f', gpu="{gpu}"'
        checks += [(CORE_WARN + g, 320, True), (CORE_WARN + g, 890, True)]
        checks += [(CRIT + g, at, False) for at in range(130, 900, 60)]
    g = ', gpu="3"'
    checks += [(HBM_WARN + g, 390, True), (HBM_WARN + g, 500, True), (HBM_WARN + g, 590, True),
               (CORE_WARN + g, 590, False)]
    g = ', gpu="4"'
    checks += [(CORE_WARN + g, 400, True)] + [(HBM_WARN + g, at, False) for at in (400, 550, 890)]
    check_alerts(tmp_path, series, checks)


# ---- every other leveled rule, held inside its lower band ------------------------------
E0 = "engine=0,model=m"


def _ttft(seconds: float):
    from helpers.rulekit import Hist
    h = Hist()

    def make():
        h.observe(seconds, 20)
        return {"latency.ttft_seconds": {E0: h.value()}}
    return make


def _errors(per_100: float):
    done = {"stop": 0.0, "error": 0.0}

    def make():
        done["stop"] += 100
        done["error"] += per_100
        return {"server.requests_finished_total": {f"{E0},reason={k}": v
                                                   for k, v in done.items()}}
    return make


def _preempting(per_s: float):
    pre = [40.0]

    def make():
        pre[0] += per_s
        return {"kv.usage_ratio": {E0: 0.97}, "server.requests_waiting": {E0: 3},
                "server.requests_running": {E0: 30}, "server.preemptions_total": {E0: pre[0]}}
    return make


# (code, tick data inside the warn band: above the warn level, under the critical one)
LOWER_BAND = [
    ("DEC-001", _ttft(0.45)),          # SLO 0.2 s, critical at 5 x SLO = 1 s
    ("DEC-004", _errors(2.0)),         # 2 % errors: warn over 0.1 %, critical at 5 %
    ("MEM-001", _preempting(0.95)),    # critical at 1 preemption/s (0.9/s relaxed)
]


@pytest.mark.parametrize("code, make", LOWER_BAND, ids=[c for c, _ in LOWER_BAND])
def test_a_leveled_rule_held_in_its_warn_band_never_goes_critical(code, make):
    f = Feed()
    seen = set()
    for _ in range(200):
        for x in f.tick(make()):
            if x.code == code:
                seen.add(x.severity)
    assert seen == {Severity.WARN}, (code, seen)


# ---- the engine's re-judgement, case by case -------------------------------------------
def _gate_then_level(ctx: Context) -> Iterator[Candidate]:
    """A gate through ``past`` (util or SM active at 0.5, either will do) and a level by a
    plain comparison (critical at 90 C), as MEM-001 gates on KV and picks crit by rate."""
    for gpu, r in ctx.per_gpu("gpu.util_ratio").items():
        sm = ctx.per_gpu("gpu.sm_active_ratio").get(gpu)
        temp = ctx.per_gpu("gpu.temp_celsius").get(gpu)
        s = sub(gpu=gpu)
        if ctx.past(r.value, ">=", 0.5, s):
            why = ev(r, r.key, r.labels, r.value, 0.5, ">=")
        elif sm is not None and ctx.past(sm.value, ">=", 0.5, s):
            why = ev(sm, sm.key, sm.labels, sm.value, 0.5, ">=")
        else:
            continue
        sev = Severity.CRIT if temp is not None and temp.value >= 90 else Severity.WARN
        yield Candidate(s, sev, (why,))


def _plain_hold(ctx: Context) -> Iterator[Candidate]:
    for gpu, r in ctx.per_gpu("gpu.util_ratio").items():
        if ctx.past(r.value, ">=", 0.5, sub(gpu=gpu)):
            yield Candidate(sub(gpu=gpu), Severity.WARN,
                            (ev(r, r.key, r.labels, r.value, 0.5, ">="),))


def _spec(code: str) -> RuleSpec:
    return RuleSpec(code, Layer.HARDWARE, f"test {code}", "", (K.gpu.util_ratio,), {}, "",
                    raise_after=0.0)


def _feed_rules(*rules: Rule) -> Feed:
    f = Feed()
    for rule in rules:
        f.diag.rules = (*f.diag.rules, rule)
        f.diag._by_code[rule.code] = rule
        f.diag._timing[rule.code] = (0.0, 10.0)
    return f


def _tick(util: float, sm: float, temp: float) -> dict:
    return {"gpu.util_ratio": {"gpu=0": util}, "gpu.sm_active_ratio": {"gpu=0": sm},
            "gpu.temp_celsius": {"gpu=0": temp}}


def test_a_level_on_a_gate_held_only_relaxed_is_not_earned():
    """Warning raised; then the gate holds only relaxed (util 0.47, SM idle) while the
    level's own comparison says critical: the hold keeps the warning, as the export's
    critical alert needs its gate strictly (it is not firing yet)."""
    f = _feed_rules(Rule(_spec("HW-903"), _gate_then_level))
    f.run(lambda: _tick(0.6, 0.1, 50.0), 5)
    assert [x.severity for x in f.active("HW-903")] == [Severity.WARN]
    f.run(lambda: _tick(0.47, 0.1, 95.0), 20)
    assert [x.severity for x in f.active("HW-903")] == [Severity.WARN]


def test_a_level_earned_strictly_escalates_on_the_strict_evidence():
    """The gate's first reading holds only relaxed (util 0.47) but another holds strictly
    (SM active 0.6): the strict judgement earns critical, with its own evidence."""
    f = _feed_rules(Rule(_spec("HW-903"), _gate_then_level))
    f.run(lambda: _tick(0.6, 0.1, 50.0), 5)
    f.tick(_tick(0.47, 0.6, 95.0))
    (got,) = f.active("HW-903")
    assert got.severity is Severity.CRIT
    assert got.evidence[0].key == "gpu.sm_active_ratio"
    # raised at critical now: the critical level holds relaxed on the util gate
    f.run(lambda: _tick(0.47, 0.1, 95.0), 20)
    assert [x.severity for x in f.active("HW-903")] == [Severity.CRIT]


def test_the_re_judgement_leaves_the_next_rules_holds_alone():
    """Another rule judged after a re-judgement in the same tick still holds relaxed."""
    f = _feed_rules(Rule(_spec("HW-903"), _gate_then_level), Rule(_spec("HW-904"), _plain_hold))
    f.run(lambda: _tick(0.6, 0.1, 50.0), 5)
    f.run(lambda: _tick(0.47, 0.1, 95.0), 30)
    assert [x.severity for x in f.active("HW-904")] == [Severity.WARN]
    assert not [e for e in f.diag.events if e.code == "HW-904" and e.kind == "cleared"]


def _both_levels(ctx: Context) -> Iterator[Candidate]:
    """As _gate_then_level, but a warning for the subject always, and a critical one
    besides when hot (two candidates for one subject, the lower first)."""
    for c in _gate_then_level(ctx):
        yield Candidate(c.subject, Severity.WARN, c.evidence)
        if c.severity is Severity.CRIT:
            yield c


def test_the_strict_judgement_keeps_the_worse_of_two_candidates():
    f = _feed_rules(Rule(_spec("HW-905"), _both_levels))
    f.run(lambda: _tick(0.6, 0.1, 50.0), 5)
    f.tick(_tick(0.47, 0.6, 95.0))
    assert [x.severity for x in f.active("HW-905")] == [Severity.CRIT]


def test_a_critical_hold_that_falls_to_a_warning_falls_after_clear_after():
    """Critical raised; then the gate holds relaxed and the level is a warning: the
    finding falls to warn after clear_after (10 s), never kept critical by the hold."""
    f = _feed_rules(Rule(_spec("HW-903"), _gate_then_level))
    f.run(lambda: _tick(0.6, 0.1, 95.0), 5)
    assert [x.severity for x in f.active("HW-903")] == [Severity.CRIT]
    f.run(lambda: _tick(0.47, 0.1, 50.0), 20)
    assert [x.severity for x in f.active("HW-903")] == [Severity.WARN]
