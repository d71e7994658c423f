import pytest

from helpers.snapkit import hist, reading, sample, snap
from infertop.history import History
from infertop.model import Status
from infertop.pipeline import Pipeline


def run(ticks):
    p = Pipeline()
    frame = None
    for t, readings in ticks:
        frame = p.feed(snap(t, sample("server:a", t, readings)))
    return frame


def find(frame, key, **labels):
    return [r for r in frame.derived if r.key == key and
            all(r.label(k) == str(v) for k, v in labels.items())]


def test_rates_and_error_ratio():
    ticks = []
    for t in range(0, 11):
        ticks.append((t, [
            reading("server.generation_tokens_total", 50 * t, instance="a", engine=0),
            reading("server.requests_finished_total", 9 * t, instance="a", engine=0, reason="stop"),
            reading("server.requests_finished_total", t, instance="a", engine=0, reason="error"),
        ]))
    f = run(ticks)
    assert find(f, "throughput.generation_tokens_per_second")[0].value == pytest.approx(50)
    assert find(f, "server.requests_per_second")[0].value == pytest.approx(10)
    assert find(f, "server.error_ratio")[0].value == pytest.approx(0.1)
    # labels keep engine but drop the reason
    assert find(f, "server.error_ratio")[0].label("engine") == "0"
    assert find(f, "server.error_ratio")[0].label("reason") == ""


def test_first_tick_has_nodata_not_zero():
    f = run([(0, [reading("server.prompt_tokens_total", 500, instance="a")])])
    r = find(f, "throughput.prompt_tokens_per_second")[0]
    assert r.status is Status.NODATA and r.value is None


def test_prefix_hit_ratio_is_windowed():
    ticks = [(t, [reading("kv.prefix_cache_queries_total", 100 * t, instance="a"),
                  reading("kv.prefix_cache_hits_total", 25 * t, instance="a")]) for t in range(5)]
    f = run(ticks)
    assert find(f, "kv.prefix_cache_hit_ratio")[0].value == pytest.approx(0.25)


def test_quantiles_per_engine_with_quantile_label():
    ticks = []
    for t in range(3):
        n = 10 * t
        ticks.append((t, [hist("latency.ttft_seconds", {0.1: n, 0.5: 2 * n}, 0.5 * n,
                               instance="a", engine=e) for e in (0, 1)]))
    f = run(ticks)
    p50 = find(f, "latency.ttft_seconds", engine=0, quantile=0.5)
    assert len(p50) == 1 and p50[0].value == pytest.approx(0.1)
    assert len(find(f, "latency.ttft_seconds", quantile=0.99)) == 2


def test_quantile_nodata_when_no_requests_in_window():
    ticks = [(t, [hist("latency.ttft_seconds", {0.1: 5}, 0.2, instance="a")]) for t in range(3)]
    r = find(run(ticks), "latency.ttft_seconds", quantile=0.5)[0]
    assert r.status is Status.NODATA and "no request" in r.reason


def test_frame_layers_hold_gauges_and_derived_not_raw_counters():
    ticks = [(t, [reading("server.generation_tokens_total", 10 * t, instance="a"),
                  reading("kv.usage_ratio", 0.4, instance="a")]) for t in range(3)]
    layers = run(ticks).layers()
    assert set(layers) == {"hardware", "kernels", "memory", "scheduling", "parallelism", "decoding"}
    keys = {r.key for rs in layers.values() for r in rs}
    assert "kv.usage_ratio" in keys and "throughput.generation_tokens_per_second" in keys
    assert "server.generation_tokens_total" not in keys


def test_quantile_in_lowest_bucket_is_shown_as_an_upper_bound():
    from infertop.units import fmt_reading
    ticks = [(t, [hist("latency.queue_seconds", {0.3: 20 * t, 0.5: 20 * t}, 0.5 * t,
                       instance="a")]) for t in range(3)]
    r = find(run(ticks), "latency.queue_seconds", quantile=0.99)[0]
    # the bound itself, not Prometheus' interpolation (297 ms): a value that no rule,
    # compare or report may read as a measurement (issue 21)
    assert r.value == pytest.approx(0.3)
    assert "below the first bucket bound 0.3" in r.reason
    assert fmt_reading(r) == "<300 ms"               # the screen does not invent precision


def test_quantile_past_the_last_finite_bound_is_a_lower_bound():
    from infertop.units import fmt_reading
    ticks = [(t, [hist("latency.queue_seconds", {0.3: 0, 60.0: 0, float("inf"): 20 * t},
                       100.0 * t, instance="a")]) for t in range(3)]
    r = find(run(ticks), "latency.queue_seconds", quantile=0.5)[0]
    assert r.value == pytest.approx(60.0)
    assert fmt_reading(r) == ">1.0 min"

# ---- throughput trend (SCH-001's input): newest 10 s step against the best of 2 min ------
def _trend(values):
    """Feed generation counter values one a second (None: no reading that tick) and return
    (recent, peak) of the last tick, or None when derive made no trend readings."""
    f = run([(t, [reading("server.generation_tokens_total", v, instance="a")]
                  if v is not None else [])
             for t, v in enumerate(values)])
    recent = find(f, "throughput.generation_recent_tokens_per_second")
    peak = find(f, "throughput.generation_peak_tokens_per_second")
    assert len(recent) == len(peak)
    return (recent[0].value, peak[0].value) if recent else None


def test_throughput_trend_newest_step_against_the_best():
    # 100 tokens/s for 50 s, then 20 tokens/s: the newest step (50..60] is 20, the best 100
    vals = [100.0 * t if t <= 50 else 5000.0 + 20.0 * (t - 50) for t in range(61)]
    assert _trend(vals) == (pytest.approx(20.0), pytest.approx(100.0))


def test_throughput_trend_idle_step_is_a_rate_of_zero():
    vals = [100.0 * min(t, 50) for t in range(61)]      # nothing generated after t=50
    assert _trend(vals) == (pytest.approx(0.0), pytest.approx(100.0))


def test_throughput_trend_counter_reset_inside_the_newest_step_gives_no_trend():
    # the server restarted at t=55: the step (50..60] has no rate, so no trend at all
    vals = [100.0 * t if t < 55 else 20.0 * (t - 55) for t in range(61)]
    assert _trend(vals) is None


def test_throughput_trend_counter_reset_in_an_older_step_drops_only_that_step():
    # a restart at t=35 voids the step (30..40]; before it the server ran at 300/s
    vals = [300.0 * t if t < 35 else 50.0 * (t - 35) for t in range(61)]
    # steps: (50,60] 50/s, (40,50] 50/s, (30,40] void, (20,30] and older 300/s
    assert _trend(vals) == (pytest.approx(50.0), pytest.approx(300.0))


def test_throughput_trend_needs_three_valid_steps():
    assert _trend([10.0 * t for t in range(31)]) == (pytest.approx(10.0), pytest.approx(10.0))
    assert _trend([10.0 * t for t in range(21)]) is None         # 20 s: two steps
    # 30 s of history but a reset voids one of the three steps: two left, no trend
    assert _trend([10.0 * t if t < 15 else 10.0 * (t - 15) for t in range(31)]) is None


def test_throughput_trend_allows_a_second_of_slack_at_the_oldest_step():
    # first reading at t=1, now t=30: the oldest step (0, 10] starts 1 s before the
    # series (tick jitter), and still counts: three steps
    assert _trend([None] + [10.0 * t for t in range(1, 31)]) == \
        (pytest.approx(10.0), pytest.approx(10.0))
    # first reading at t=2: that step starts 2 s early, two steps are left
    assert _trend([None, None] + [10.0 * t for t in range(2, 31)]) is None


def test_throughput_trend_sums_engines():
    ticks = [(t, [reading("server.generation_tokens_total", 10.0 * t, instance="a", engine=0),
                  reading("server.generation_tokens_total", 30.0 * t, instance="a", engine=1)])
             for t in range(31)]
    f = run(ticks)
    assert find(f, "throughput.generation_recent_tokens_per_second")[0].value == \
        pytest.approx(40.0)


# ---- uptime --------------------------------------------------------------------------------
def test_uptime_from_the_process_start_time():
    f = run([(t, [reading("server.process_start_seconds", 1000.0, instance="a")])
             for t in (1000.0, 1005.0, 1012.5)])
    got = find(f, "server.uptime_seconds")
    assert len(got) == 1 and got[0].value == pytest.approx(12.5)
    assert got[0].label("instance") == "a"


def test_uptime_never_negative_and_absent_without_a_start_time():
    # a start time ahead of our clock (clock skew) reads 0, not a negative uptime
    f = run([(100.0, [reading("server.process_start_seconds", 160.0, instance="a")])])
    assert find(f, "server.uptime_seconds")[0].value == 0.0
    f = run([(100.0, [reading("server.process_start_seconds", 0.0, instance="a")])])
    assert find(f, "server.uptime_seconds") == []


# ---- finished requests by reason ----------------------------------------------------------
def test_requests_per_second_with_reason_series_of_different_ages():
    # "stop" counted for 10 s (10/s); the first "error" came at t=6 (1/s since): the rate is
    # over the oldest series' span, not the youngest's
    ticks = []
    for t in range(11):
        rs = [reading("server.requests_finished_total", 10.0 * t, instance="a", reason="stop")]
        if t >= 6:
            rs.append(reading("server.requests_finished_total", float(t - 6), instance="a",
                              reason="error"))
        ticks.append((t, rs))
    f = run(ticks)
    assert find(f, "server.requests_finished")[0].value == pytest.approx(104.0)
    assert find(f, "server.requests_per_second")[0].value == pytest.approx(10.4)
    assert find(f, "server.error_ratio")[0].value == pytest.approx(4 / 104)


def test_abort_ratio_and_an_idle_window():
    ticks = [(t, [reading("server.requests_finished_total", 6.0 * t, instance="a",
                          reason="stop"),
                  reading("server.requests_finished_total", 2.0 * t, instance="a",
                          reason="abort")]) for t in range(5)]
    f = run(ticks)
    assert find(f, "server.abort_ratio")[0].value == pytest.approx(0.25)
    assert find(f, "server.error_ratio")[0].value == 0.0
    idle = [(t, [reading("server.requests_finished_total", 7.0, instance="a", reason="stop")])
            for t in range(5)]
    f = run(idle)
    err = find(f, "server.error_ratio")[0]
    assert err.value is None and err.reason == "no request finished in the window"
    assert find(f, "server.requests_per_second")[0].value == 0.0


def _history(ticks):
    h = History()
    for t, readings in ticks:
        h.add(snap(t, sample("server:a", t, readings)))
    return h


def test_aborts_counted_as_errors_are_not_also_aborts():
    from infertop.derive import derive
    h = _history([(t, [reading("server.requests_finished_total", 6.0 * t, instance="a",
                               reason="stop"),
                       reading("server.requests_finished_total", 2.0 * t, instance="a",
                               reason="abort")]) for t in range(5)])
    out = {r.key: r.value for r in derive(h, error_reasons=("error", "abort"))}
    assert out["server.error_ratio"] == pytest.approx(0.25)
    assert out["server.abort_ratio"] == 0.0
    out = {r.key: r.value for r in derive(h)}
    assert out["server.error_ratio"] == 0.0 and out["server.abort_ratio"] == pytest.approx(0.25)


# ---- GPU error events: new ones over their own window ---------------------------------
def _xid(ticks):
    return _history([(t, [reading("gpu.xid_total", v, gpu=0)]) for t, v in ticks])


def test_new_xid_counts_inside_the_event_window_only():
    from infertop.derive import derive
    h = _xid([(0.0, 0.0), (1.0, 2.0)] + [(float(t), 2.0) for t in range(2, 302)])
    # now = 301: the rise at t=1 is exactly 300 s old, the edge of the default window
    new = [r for r in derive(h) if r.key == "gpu.xid_new"]
    assert len(new) == 1 and new[0].value == 0.0 and new[0].label("gpu") == "0"
    assert [r.value for r in derive(h, event_window=400.0) if r.key == "gpu.xid_new"] == [2.0]
    h = _xid([(0.0, 0.0), (1.0, 2.0), (2.0, 3.0)])
    assert [r.value for r in derive(h) if r.key == "gpu.xid_new"] == [3.0]


def test_an_xid_on_the_newest_tick_is_new_at_once():
    from infertop.derive import derive
    h = _xid([(0.0, 0.0), (1.0, 0.0), (2.0, 1.0)])
    assert [r.value for r in derive(h) if r.key == "gpu.xid_new"] == [1.0]
    h = _xid([(0.0, 0.0), (1.0, 1.0)])
    assert [r.value for r in derive(h) if r.key == "gpu.xid_new"] == [1.0]


def test_an_xid_counter_that_never_moved_has_no_new_events():
    from infertop.derive import derive
    h = _xid([(float(t), 7.0) for t in range(5)])      # old Xids from before we started
    assert [r.value for r in derive(h) if r.key == "gpu.xid_new"] == [0.0]
    h = _xid([(0.0, 7.0)])
    assert [r.value for r in derive(h) if r.key == "gpu.xid_new"] == [0.0]


# ---- speculative decoding -----------------------------------------------------------------
def test_spec_acceptance_and_drafted_tokens_over_the_window():
    ticks = [(t, [reading("spec.draft_tokens_total", 100.0 * t, instance="a"),
                  reading("spec.accepted_tokens_total", 60.0 * t, instance="a")])
             for t in range(11)]
    f = run(ticks)
    assert find(f, "spec.acceptance_ratio")[0].value == pytest.approx(0.6)
    assert find(f, "spec.draft_tokens_window")[0].value == pytest.approx(1000.0)
    one = run(ticks[:1])
    assert find(one, "spec.draft_tokens_window")[0].value is None
    assert find(one, "spec.acceptance_ratio")[0].reason == "needs two samples"


def test_spec_acceptance_without_drafts_is_no_data_and_never_above_one():
    idle = [(t, [reading("spec.draft_tokens_total", 50.0, instance="a"),
                 reading("spec.accepted_tokens_total", 20.0, instance="a")]) for t in range(4)]
    r = find(run(idle), "spec.acceptance_ratio")[0]
    assert r.value is None and r.reason == "no traffic in the window"
    odd = [(t, [reading("spec.draft_tokens_total", 10.0 * t, instance="a"),
                reading("spec.accepted_tokens_total", 12.0 * t, instance="a")]) for t in range(4)]
    assert find(run(odd), "spec.acceptance_ratio")[0].value == 1.0


# ---- histograms ----------------------------------------------------------------------------
def test_latency_observations_and_iteration_tokens_mean():
    ticks = [(t, [hist("latency.ttft_seconds", {0.1: t, 1.0: 6 * t}, 1.5 * t, instance="a"),
                  hist("server.iteration_tokens", {64: 2 * t, 512: 4 * t}, 600.0 * t,
                       instance="a")]) for t in range(6)]
    f = run(ticks)
    obs = find(f, "latency.observations", of="latency.ttft_seconds")
    assert len(obs) == 1 and obs[0].value == pytest.approx(30.0)
    assert find(f, "server.iteration_tokens_mean")[0].value == pytest.approx(150.0)
    # the iteration-size histogram has a mean, not latency quantiles
    assert find(f, "server.iteration_tokens", quantile=0.5) == []
    p50 = find(f, "latency.ttft_seconds", quantile=0.5)[0]
    # rank 15 of 30: 5 in the first bucket, 10 of the 25 in (0.1, 1.0]
    assert p50.value == pytest.approx(0.1 + 0.9 * 10 / 25) and p50.reason == ""


def test_a_quantile_at_the_first_bound_is_shown_as_a_bound():
    ticks = [(t, [hist("latency.ttft_seconds", {0.1: 10 * t, 1.0: 20 * t}, 5.0 * t,
                       instance="a")]) for t in range(3)]
    r = find(run(ticks), "latency.ttft_seconds", quantile=0.5)[0]
    assert r.value == pytest.approx(0.1)    # rank 20 of 40: all of the first bucket
    assert r.reason == "below the first bucket bound 0.1"


def test_only_latency_histograms_get_quantiles():
    ticks = [(t, [hist("request.prompt_tokens", {128: 2 * t, 1024: 4 * t}, 900.0 * t,
                       instance="a")]) for t in range(3)]
    f = run(ticks)
    assert [r for r in f.derived if r.key == "request.prompt_tokens"] == []
    assert find(f, "latency.observations") == []


def test_a_ratio_with_a_single_query_in_the_window():
    ticks = [(t, [reading("kv.prefix_cache_queries_total", q, instance="a"),
                  reading("kv.prefix_cache_hits_total", 5.0, instance="a")])
             for t, q in enumerate((10.0, 10.0, 11.0))]
    r = find(run(ticks), "kv.prefix_cache_hit_ratio")[0]
    assert r.value == 0.0 and r.status is Status.OK


def test_quantiles_need_two_scrapes():
    f = run([(0, [hist("latency.ttft_seconds", {0.1: 5}, 0.2, instance="a")])])
    r = find(f, "latency.ttft_seconds", quantile=0.99)[0]
    assert r.status is Status.NODATA and r.reason == "needs two scrapes"
    assert find(f, "latency.observations")[0].value is None
