import pytest

from infertop.model import Status
from infertop.pipeline import Pipeline
from helpers.snapkit import hist, reading, sample, snap


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
