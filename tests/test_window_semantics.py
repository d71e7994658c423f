"""One rate / window semantics for both engines (issue 31 item 2, docs/rules.md#windows).

On the real KV-exhaustion series, in-process MEM-001 went critical with "1.71 /s
preemptions (over the last 60 s)" while only 57 preemptions happened in the whole run:
the rate divided by the few seconds History covered.  Prometheus's ``rate()`` divides by
the whole window (extrapolating at most half a scrape interval beyond the samples).  The
judgement now uses Prometheus's rate (``Series.window_rate``), and evidence says the span
a count really covers.
"""

from __future__ import annotations

import subprocess

import pytest

from helpers.promtool_kit import PROMTOOL_HINT, promtool_binary
from helpers.rulekit import Feed, Hist, tick
from infertop.findings import Severity
from infertop.history import History
from infertop.promtool_input import InputSeries, render

E0 = "engine=0,model=m"
T0 = 1_000_000.0


def _counter(values: list[float]) -> History:
    h = History()
    for i, v in enumerate(values):
        h.add(tick(T0 + i, {"server.preemptions_total": {E0: v}}))
    return h


def _rate(values: list[float], window: float = 60.0):
    h = _counter(values)
    (s,) = h.find("server.preemptions_total")
    return s.window_rate(window, T0 + len(values) - 1)


def test_a_young_window_is_divided_by_the_whole_window_not_the_seconds_seen():
    # 40 preemptions from long ago, then 17 in the first 10 s seen
    values = [40.0] + [40.0 + 1.7 * i for i in range(1, 11)]
    rate, covered = _rate(values)
    assert covered == pytest.approx(10.0)
    # 17 over 10 s, extrapolated half a scrape interval: 17 * 10.5 / 10 / 60
    assert rate == pytest.approx(17 * 10.5 / 10 / 60)
    (s,) = _counter(values).find("server.preemptions_total")
    assert s.rate(60.0) == pytest.approx(1.7), "the screen's rate over the span seen stays"


def test_a_covered_window_is_the_increase_over_its_seconds():
    values = [float(i) for i in range(120)]
    rate, covered = _rate(values)
    assert covered == pytest.approx(60.0) and rate == pytest.approx(1.0)


def test_kv_exhaustion_at_start_up_is_not_critical_on_a_young_rate():
    """KV full and 2 preemptions a tick for the first 12 s (24 in all): 2/s over what was
    seen, 0.42/s over the 60 s window, under the 1/s critical rate."""
    f = Feed()
    pre = 40.0
    for i in range(13):
        pre += 2.0 if i else 0.0
        f.tick({"kv.usage_ratio": {E0: 0.97}, "server.requests_waiting": {E0: 3},
                "server.requests_running": {E0: 30}, "server.preemptions_total": {E0: pre}})
    for _ in range(5):
        f.tick({"kv.usage_ratio": {E0: 0.97}, "server.requests_waiting": {E0: 3},
                "server.requests_running": {E0: 30}, "server.preemptions_total": {E0: pre}})
    (fin,) = f.active("MEM-001")
    assert fin.severity is Severity.WARN, fin.summary()
    note = next(e.note for e in fin.evidence if e.key == "server.preemptions_per_second")
    assert "60 s window, of which 17 s covered" in note, note
    rate = fin.evidence[1]
    assert isinstance(rate.value, float) and rate.value < 1.0


def test_ttft_evidence_says_the_span_covered_not_the_whole_window():
    f = Feed()
    h = Hist()
    for _ in range(8):
        h.observe(3.0, 5)   # 5 first tokens a second, each 3 s: p99 3 s, over the SLO
        f.tick({"latency.ttft_seconds": {E0: h.value()}})
    got = f.active("DEC-001")
    assert got, "TTFT over the SLO must raise"
    note = got[0].evidence[0].note
    assert "covered of the 60 s window" in note and "in the last 60 s" not in note, note


@pytest.mark.integration   # runs promtool
@pytest.mark.skipif(promtool_binary() is None, reason=PROMTOOL_HINT)
def test_window_rate_is_prometheus_rate(tmp_path):
    """The in-process rate at each second of a series that starts mid-run, bursts, resets
    and goes quiet equals promtool's ``rate(c_total[60s])`` at the same time."""
    values = [40.0] + [40.0 + 1.7 * i for i in range(1, 11)] + [57.0] * 20 \
        + [3.0 * i for i in range(30)] + [90.0] * 40
    series = InputSeries(1.0, 0.0, len(values))
    for i, v in enumerate(values):
        series.put('c_total{job="x"}', i, v)
    tests = []
    for at in (1, 3, 5, 10, 20, 31, 45, 59, 60, 61, 75, 92, 100):
        got = _rate(values[:at + 1])
        assert got is not None
        tests.append(f"      - expr: 'abs(rate(c_total[60s]) - {got[0]!r}) < bool 1e-9'\n"
                     f"        eval_time: {at}s\n"
                     f"        exp_samples:\n          - labels: '{{job=\"x\"}}'\n"
                     f"            value: 1")
    (tmp_path / "rules.yml").write_text("groups: []\n")
    body = "    promql_expr_test:\n" + "\n".join(tests) + "\n"
    (tmp_path / "t.yml").write_text(render(series, ["rules.yml"], body))
    promtool = promtool_binary()
    assert promtool is not None
    r = subprocess.run([promtool, "test", "rules", str(tmp_path / "t.yml")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
