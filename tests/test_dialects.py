"""infertop.dialects: real fixtures and synthetic pages of each server -> common readings."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from infertop.dialects import (
    Exposition,
    ParseError,
    detect_dialect,
    readings_from_exposition,
    readings_from_families,
)
from infertop.keys import SPECS
from infertop.meta import ServerMeta
from infertop.model import Kind, Reading
from infertop.promtext import parse

METRICS = Path(__file__).parent / "fixtures" / "metrics"
INST = "127.0.0.1:8000"


def expo(name: str) -> Exposition:
    return readings_from_exposition((METRICS / name).read_text(), INST)


def one(e: Exposition, key: str, **labels: str) -> Reading:
    found = [r for r in e.readings
             if r.key == key and all(r.label(k) == v for k, v in labels.items())]
    assert len(found) == 1, (key, labels, found)
    return found[0]


def values(e: Exposition, key: str) -> dict[tuple, float | None]:
    return {r.labels: r.value for r in e.readings if r.key == key}


def assert_contract(e: Exposition) -> None:
    """Declared keys with their declared kind and unit, instance everywhere, sane buckets."""
    seen = set()
    for r in e.readings:
        spec = SPECS[r.key]
        assert r.kind is spec.kind, r.key
        assert r.unit == spec.unit, r.key
        assert r.label("instance") == INST, r
        assert r.series not in seen, r.series  # one reading per series
        seen.add(r.series)
        if r.kind is Kind.HISTOGRAM:
            assert r.buckets is not None, r.key
            bounds = [le for le, _ in r.buckets]
            counts = [c for _, c in r.buckets]
            assert bounds == sorted(bounds) and math.isinf(bounds[-1]), r.key
            assert counts == sorted(counts), r.key  # cumulative
            assert counts[-1] == r.value, r.key
        if r.kind is Kind.INFO:
            assert r.text, r.key


# ---- vLLM 0.32 (real pages) -------------------------------------------------------------

def test_vllm_busy_fixture():
    e = expo("vllm-0.32-busy.prom")
    assert_contract(e)
    assert e.dialect == "vllm" and e.family_count == 92
    assert e.meta == ServerMeta(dialect="vllm", model="tiny-llama", engines=("0",))
    lab = {"engine": "0", "model": "tiny-llama"}
    assert one(e, "server.requests_running", **lab).value == 8.0
    assert one(e, "server.requests_waiting", **lab).value == 0.0
    assert one(e, "kv.usage_ratio", **lab).value == pytest.approx(0.0039067268953729695)
    assert one(e, "server.prompt_tokens_total", **lab).value == 1754.0
    assert one(e, "server.generation_tokens_total", **lab).value == 61167.0
    assert one(e, "server.preemptions_total", **lab).value == 0.0
    assert one(e, "kv.prefix_cache_queries_total", **lab).value == 1754.0
    assert one(e, "kv.prefix_cache_hits_total", **lab).value == 0.0
    fin = {r.label("reason"): r.value for r in e.readings
           if r.key == "server.requests_finished_total"}
    assert fin == {"stop": 0.0, "length": 138.0, "abort": 0.0, "error": 0.0, "repetition": 0.0}
    ttft = one(e, "latency.ttft_seconds", **lab)
    assert ttft.kind is Kind.HISTOGRAM and ttft.value == 146.0
    assert ttft.hist_sum == pytest.approx(3.3272817134857178)
    assert ttft.buckets is not None
    assert ttft.buckets[:4] == ((0.001, 0.0), (0.005, 0.0), (0.01, 20.0), (0.02, 86.0))
    assert ttft.buckets[-1] == (math.inf, 146.0)
    it = one(e, "server.iteration_tokens", **lab)
    assert it.buckets is not None
    assert (it.value, it.hist_sum, it.buckets[1]) == (7766.0, 62921.0, (8.0, 7703.0))
    assert one(e, "server.engine_steps_total", **lab).value == 7766.0
    assert one(e, "latency.itl_seconds", **lab).value == 61021.0
    assert one(e, "latency.tpot_seconds", **lab).hist_sum == pytest.approx(0.4759354759035088)
    assert one(e, "latency.e2e_seconds", **lab).hist_sum == pytest.approx(200.4466519355774)
    assert one(e, "latency.queue_seconds", **lab).value == 138.0
    assert one(e, "latency.prefill_seconds", **lab).hist_sum == pytest.approx(1.0814542180005446)
    assert one(e, "latency.decode_seconds", **lab).hist_sum == pytest.approx(197.52961937899943)
    assert one(e, "request.prompt_tokens", **lab).hist_sum == 1658.0
    assert one(e, "request.generation_tokens", **lab).hist_sum == 57936.0
    assert one(e, "server.process_start_seconds").value == pytest.approx(1.79598003505e9)
    cfg = {r.label("name"): r.text for r in e.readings if r.key == "kv.config"}
    assert cfg == {"block_size": "128", "num_gpu_blocks": "8192", "gpu_memory_utilization": "0.92",
                   "cache_dtype": "auto", "enable_prefix_caching": "True",
                   "kv_cache_size_tokens": "1048576"}
    assert all(r.label("engine") == "0" for r in e.readings if r.key == "kv.config")
    info = one(e, "server.info")
    assert (info.kind, info.text) == (Kind.INFO, "vllm tiny-llama")
    assert info.label("model") == "tiny-llama"
    assert one(e, "server.families").value == 92.0
    assert not [r for r in e.readings if r.key.startswith("spec.")]  # no speculative config


def test_vllm_idle_fixture():
    e = expo("vllm-0.32-idle.prom")
    assert_contract(e)
    lab = {"engine": "0", "model": "tiny-llama"}
    assert one(e, "server.requests_running", **lab).value == 0.0
    assert one(e, "kv.usage_ratio", **lab).value == 0.0
    assert one(e, "server.prompt_tokens_total", **lab).value == 2042.0
    assert one(e, "server.generation_tokens_total", **lab).value == 72272.0
    assert one(e, "server.requests_finished_total", reason="length").value == 170.0
    assert one(e, "latency.ttft_seconds", **lab).value == 170.0
    assert one(e, "server.iteration_tokens", **lab).hist_sum == 74314.0
    assert one(e, "server.engine_steps_total", **lab).value == 9167.0


# ---- llama.cpp (real pages) ---------------------------------------------------------------

@pytest.mark.parametrize("name, want", [
    ("llamacpp-busy.prom", {"server.requests_running": 4.0, "server.requests_waiting": 4.0,
                            "server.prompt_tokens_total": 571.0,
                            "server.generation_tokens_total": 45824.0,
                            "kv.prefix_cache_hits_total": 265.0,
                            "kv.prefix_cache_queries_total": 571.0 + 265.0,
                            "server.engine_steps_total": 12665.0, "spec.drafts_total": 0.0,
                            "spec.draft_tokens_total": 0.0, "spec.accepted_tokens_total": 0.0,
                            "server.families": 15.0}),
    ("llamacpp-idle.prom", {"server.requests_running": 0.0, "server.requests_waiting": 0.0,
                            "server.prompt_tokens_total": 731.0,
                            "server.generation_tokens_total": 60224.0,
                            "kv.prefix_cache_hits_total": 345.0,
                            "kv.prefix_cache_queries_total": 731.0 + 345.0,
                            "server.engine_steps_total": 15835.0, "spec.drafts_total": 0.0,
                            "spec.draft_tokens_total": 0.0, "spec.accepted_tokens_total": 0.0,
                            "server.families": 15.0}),
])
def test_llamacpp_fixtures(name: str, want: dict[str, float]):
    e = expo(name)
    assert_contract(e)
    assert e.dialect == "llamacpp"
    assert e.meta == ServerMeta(dialect="llamacpp", model="")
    got = {r.key: r.value for r in e.readings if r.kind is not Kind.INFO}
    assert got == want
    assert one(e, "server.info").text == "llamacpp"
    # no labels on llama.cpp: only the instance (and the counter a counter_moves names)
    assert all(dict(r.labels) == {"instance": INST} for r in e.readings
               if r.key != "server.counter_moves")
    # tokens_predicted moves only when a request finishes (docs/reference/realserver-notes.md)
    assert {(r.label("counter"), r.text) for r in e.readings
            if r.key == "server.counter_moves"} == {
        ("server.generation_tokens_total", "on finish")}


# ---- synthetic pages for the other servers ---------------------------------------------------

VLLM_DP2 = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 5.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.75
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 100.0
vllm:generation_tokens_total{engine="1",model_name="m"} 300.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 2.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 2.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.5
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.1",model_name="m"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="+Inf",model_name="m"} 4.0
vllm:time_to_first_token_seconds_count{engine="1",model_name="m"} 4.0
vllm:time_to_first_token_seconds_sum{engine="1",model_name="m"} 2.0
"""


def test_vllm_data_parallel_engines_stay_separate():
    e = readings_from_exposition(VLLM_DP2, INST)
    assert_contract(e)
    assert e.meta.engines == ("0", "1")
    assert one(e, "server.requests_running", engine="1").value == 5.0
    assert one(e, "kv.usage_ratio", engine="0").value == 0.25
    assert one(e, "server.generation_tokens_total", engine="1").value == 300.0
    t1 = one(e, "latency.ttft_seconds", engine="1")
    assert (t1.value, t1.hist_sum, t1.buckets) == (4.0, 2.0, ((0.1, 0.0), (math.inf, 4.0)))
    assert len([r for r in e.readings if r.key == "latency.ttft_seconds"]) == 2


VLLM_V0 = """\
# HELP vllm:num_requests_swapped Number of requests swapped to CPU.
# TYPE vllm:num_requests_swapped gauge
vllm:num_requests_swapped{model_name="old"} 2.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="old"} 7.0
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="old"} 0.5
# TYPE vllm:gpu_prefix_cache_queries_total counter
vllm:gpu_prefix_cache_queries_total{model_name="old"} 40.0
# TYPE vllm:gpu_prefix_cache_hits_total counter
vllm:gpu_prefix_cache_hits_total{model_name="old"} 10.0
# TYPE vllm:time_per_output_token_seconds histogram
vllm:time_per_output_token_seconds_bucket{le="0.05",model_name="old"} 9.0
vllm:time_per_output_token_seconds_bucket{le="+Inf",model_name="old"} 10.0
vllm:time_per_output_token_seconds_count{model_name="old"} 10.0
vllm:time_per_output_token_seconds_sum{model_name="old"} 0.4
"""


def test_vllm_legacy_v0_names_map():
    e = readings_from_exposition(VLLM_V0, INST)
    assert_contract(e)
    assert e.meta == ServerMeta(dialect="vllm", model="old")
    assert one(e, "server.requests_swapped").value == 2.0
    assert one(e, "server.requests_waiting").value == 7.0
    assert one(e, "kv.usage_ratio").value == 0.5
    assert one(e, "kv.prefix_cache_queries_total").value == 40.0
    assert one(e, "kv.prefix_cache_hits_total").value == 10.0
    itl = one(e, "latency.itl_seconds")
    assert itl.buckets is not None
    assert (itl.value, itl.buckets[0]) == (10.0, (0.05, 9.0))
    assert one(e, "server.requests_waiting").labels == (("instance", INST), ("model", "old"))


def test_vllm_new_name_wins_over_deprecated_one():
    text = ('# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{engine="0"} 0.3\n'
            '# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc{engine="0"} 0.9\n')
    e = readings_from_exposition(text, INST)
    assert [r.value for r in e.readings if r.key == "kv.usage_ratio"] == [0.3]


SGLANG = """\
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{dp_rank="0",engine_type="unified",model_name="q",tp_rank="0"} 4.0
sglang:num_running_reqs{dp_rank="0",engine_type="unified",model_name="q",tp_rank="1"} 4.0
sglang:num_running_reqs{dp_rank="1",engine_type="unified",model_name="q",tp_rank="0"} 6.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{dp_rank="0",engine_type="unified",model_name="q",tp_rank="0"} 1.0
# TYPE sglang:token_usage gauge
sglang:token_usage{dp_rank="0",engine_type="unified",model_name="q",tp_rank="0"} 0.42
# TYPE sglang:max_total_num_tokens gauge
sglang:max_total_num_tokens{dp_rank="0",engine_type="unified",model_name="q",tp_rank="0"} 50000.0
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{engine_type="unified",is_streaming="true",model_name="q"} 100.0
sglang:prompt_tokens_total{engine_type="unified",is_streaming="false",model_name="q"} 20.0
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{engine_type="unified",is_streaming="true",model_name="q"} 900.0
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{cache_source="device",engine_type="unified",model_name="q"} 30.0
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{engine_type="unified",is_streaming="true",model_name="q"} 12.0
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="true",le="0.5",model_name="q"} 3.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="true",le="+Inf",model_name="q"} 5.0
sglang:time_to_first_token_seconds_count{engine_type="unified",is_streaming="true",model_name="q"} 5.0
sglang:time_to_first_token_seconds_sum{engine_type="unified",is_streaming="true",model_name="q"} 2.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="false",le="0.5",model_name="q"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="false",le="+Inf",model_name="q"} 1.0
sglang:time_to_first_token_seconds_count{engine_type="unified",is_streaming="false",model_name="q"} 1.0
sglang:time_to_first_token_seconds_sum{engine_type="unified",is_streaming="false",model_name="q"} 0.1
"""


def test_sglang():
    e = readings_from_exposition(SGLANG, INST)
    assert_contract(e)
    assert e.meta == ServerMeta(dialect="sglang", model="q", engines=("0", "1"))
    # dp_rank is the engine; TP ranks repeat one scheduler's value (max, not sum)
    assert one(e, "server.requests_running", engine="0").value == 4.0
    assert one(e, "server.requests_running", engine="1").value == 6.0
    assert one(e, "server.requests_waiting").value == 1.0
    assert one(e, "kv.usage_ratio").value == 0.42
    # tokenizer counters: is_streaming dropped, summed
    assert one(e, "server.prompt_tokens_total").value == 120.0
    assert one(e, "kv.prefix_cache_queries_total").value == 120.0
    assert one(e, "kv.prefix_cache_hits_total").value == 30.0
    assert one(e, "server.generation_tokens_total").value == 900.0
    assert one(e, "server.requests_finished_total").value == 12.0
    ttft = one(e, "latency.ttft_seconds")
    assert (ttft.value, ttft.hist_sum, ttft.buckets) == (6.0, 2.1, ((0.5, 4.0), (math.inf, 6.0)))
    assert one(e, "kv.config", name="kv_cache_size_tokens").text == "50000"
    assert one(e, "server.info").text == "sglang q"


TGI = """\
# TYPE tgi_request_count counter
tgi_request_count 10
# TYPE tgi_request_success counter
tgi_request_success 7
# TYPE tgi_request_failure counter
tgi_request_failure{err="generation"} 2
tgi_request_failure{err="validation"} 0
tgi_request_failure{err="dropped"} 1

# TYPE tgi_queue_size gauge
tgi_queue_size 3
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 8
# TYPE tgi_batch_inference_count counter
tgi_batch_inference_count{method="decode"} 500
tgi_batch_inference_count{method="prefill"} 10
# TYPE tgi_request_input_length histogram
tgi_request_input_length_bucket{le="100"} 6
tgi_request_input_length_bucket{le="+Inf"} 7
tgi_request_input_length_sum 450
tgi_request_input_length_count 7
# TYPE tgi_request_mean_time_per_token_duration histogram
tgi_request_mean_time_per_token_duration_bucket{le="0.02"} 7
tgi_request_mean_time_per_token_duration_bucket{le="+Inf"} 7
tgi_request_mean_time_per_token_duration_sum 0.1
tgi_request_mean_time_per_token_duration_count 7
"""


def test_tgi_counters_without_total():
    e = readings_from_exposition(TGI, INST)
    assert_contract(e)
    assert e.meta == ServerMeta(dialect="tgi", model="")
    assert one(e, "server.requests_running").value == 8.0
    assert one(e, "server.requests_waiting").value == 3.0
    fin = {r.label("reason"): r.value for r in e.readings
           if r.key == "server.requests_finished_total"}
    assert fin == {"success": 7.0, "error": 2.0, "abort": 1.0}
    assert one(e, "server.engine_steps_total").value == 510.0
    assert one(e, "server.prompt_tokens_total").value == 450.0  # histogram sum as a counter
    assert one(e, "request.prompt_tokens").buckets == ((100.0, 6.0), (math.inf, 7.0))
    assert one(e, "latency.tpot_seconds").hist_sum == pytest.approx(0.1)


TRITON = """\
# HELP nv_inference_request_success Number of successful inference requests
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="ensemble",version="1"} 40
nv_inference_request_success{model="tensorrt_llm",version="1"} 40
# TYPE nv_inference_request_failure counter
nv_inference_request_failure{model="tensorrt_llm",version="1"} 2
# TYPE nv_inference_exec_count counter
nv_inference_exec_count{model="tensorrt_llm",version="1"} 33
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model="tensorrt_llm",version="1"} 9
# TYPE nv_trt_llm_request_metrics gauge
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="scheduled",version="1"} 6
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="waiting",version="1"} 2
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="max",version="1"} 64
# TYPE nv_trt_llm_kv_cache_block_metrics gauge
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="used",model="tensorrt_llm",version="1"} 300
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="max",model="tensorrt_llm",version="1"} 1200
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="tokens_per",model="tensorrt_llm",version="1"} 64
"""


def test_triton_tensorrt_llm():
    e = readings_from_exposition(TRITON, INST)
    assert_contract(e)
    assert e.dialect == "triton"
    assert e.meta.model == "ensemble, tensorrt_llm"
    trt = {"model": "tensorrt_llm"}
    assert one(e, "server.requests_running", **trt).value == 6.0
    # nv_trt_llm's waiting wins over Triton's pending count (same quantity, one reading)
    assert one(e, "server.requests_waiting", **trt).value == 2.0
    assert one(e, "server.requests_finished_total", reason="success", **trt).value == 40.0
    assert one(e, "server.requests_finished_total", reason="error", **trt).value == 2.0
    assert one(e, "server.requests_finished_total", model="ensemble").value == 40.0
    assert one(e, "server.engine_steps_total", **trt).value == 33.0
    # no "fraction" sample: KV usage is used / max blocks
    assert one(e, "kv.usage_ratio", **trt).value == pytest.approx(0.25)
    assert one(e, "kv.config", name="num_gpu_blocks").text == "1200"
    assert one(e, "kv.config", name="block_size").text == "64"


def test_triton_fraction_sample_is_used_as_is():
    text = ('# TYPE nv_trt_llm_kv_cache_block_metrics gauge\n'
            'nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction",model="t"} 0.6\n'
            'nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="used",model="t"} 1\n'
            'nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="max",model="t"} 10\n')
    e = readings_from_exposition(text, INST)
    assert [r.value for r in e.readings if r.key == "kv.usage_ratio"] == [0.6]


# ---- units ----------------------------------------------------------------------------------

def test_vllm_perc_names_are_fractions_not_percent():
    # "KV-cache usage. 1 means 100 percent usage.": 0.39 is 39 %, never divided by 100
    text = ('# TYPE vllm:kv_cache_usage_perc gauge\n'
            'vllm:kv_cache_usage_perc{engine="0"} 0.39\n')
    e = readings_from_exposition(text, INST)
    assert one(e, "kv.usage_ratio").value == 0.39
    assert e.meta.notes == ()


def test_a_fraction_reported_as_percent_is_normalised():
    text = ('# TYPE sglang:token_usage gauge\nsglang:token_usage{model_name="q"} 39.0\n'
            '# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{model_name="q"} 39.0\n')
    e = readings_from_exposition(text, INST)
    assert one(e, "kv.usage_ratio").value == pytest.approx(0.39)
    assert one(e, "server.requests_running").value == 39.0  # counts are not ratios
    assert e.meta.notes == ("kv.usage_ratio reported as a percent; divided by 100",)


# ---- detection, unknown pages, garbage ------------------------------------------------------

def test_unknown_dialect_still_reports_families_and_info():
    text = ("# TYPE python_info gauge\npython_info{version=\"3.11\"} 1\n"
            "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1700000000\n"
            "# TYPE my_app_requests_total counter\nmy_app_requests_total 5\n")
    e = readings_from_exposition(text, INST)
    assert_contract(e)
    assert e.dialect == "unknown" and e.family_count == 3
    assert one(e, "server.info").text == "unknown"
    assert one(e, "server.families").value == 3.0
    assert one(e, "server.process_start_seconds").value == 1700000000.0
    assert e.meta == ServerMeta(dialect="unknown", model="")


def test_detection_counts_prefixes():
    fams = parse("# TYPE vllm:a gauge\nvllm:a 1\n# TYPE tgi_b gauge\ntgi_b 1\n"
                 "# TYPE tgi_c gauge\ntgi_c 1\n")
    assert detect_dialect(fams) == "tgi"
    assert detect_dialect(parse("up 1\n")) == "unknown"
    assert readings_from_families(fams, INST).dialect == "tgi"


def test_empty_page_is_an_unknown_server_with_no_families():
    e = readings_from_exposition("", INST)
    assert (e.dialect, e.family_count, one(e, "server.families").value) == ("unknown", 0, 0.0)


def test_garbage_raises_parse_error():
    with pytest.raises(ParseError, match="HTML"):
        readings_from_exposition("<html><body>login</body></html>\n", INST)
    with pytest.raises(ParseError, match="line 1"):
        readings_from_exposition('{"detail":"Not Found"}', INST)


# -- the label memo (a series' labels are mapped once, then remembered across scrapes) ----

def _mapped_fresh(text: str, instance: str) -> list[Reading]:
    """The oracle: the same page mapped with the memo and promtext's caches emptied."""
    import infertop.dialects as d
    from infertop.promtext import clear_caches
    d._memo.clear()
    clear_caches()
    return readings_from_families(parse(text), instance).readings


@pytest.mark.parametrize("page", ["vllm-0.32-busy.prom", "llamacpp-busy.prom"])
def test_remembered_label_mapping_gives_the_readings_of_a_fresh_mapping(page):
    import infertop.dialects as d
    text = (METRICS / page).read_text()
    fresh = _mapped_fresh(text, INST)
    readings_from_families(parse(text), INST)          # fills the memo
    assert d._memo, "the busy page's series were not remembered"
    # the next scrape: every value moved, the series are the same objects
    moved = "\n".join(_bump(line) for line in text.splitlines()) + "\n"
    warm = readings_from_families(parse(moved), INST).readings
    cold = _mapped_fresh(moved, INST)
    assert warm == cold
    assert warm != fresh                                # the values did move
    assert [(r.key, r.labels) for r in warm] == [(r.key, r.labels) for r in fresh]


def _bump(line: str) -> str:
    """A sample line with its value plus one (comments and empty lines as they are)."""
    if not line or line.startswith("#"):
        return line
    head, _, value = line.rpartition(" ")
    try:
        return f"{head} {float(value) + 1:g}"
    except ValueError:
        return line


def test_remembered_labels_follow_the_instance_and_the_model():
    text = (METRICS / "vllm-0.32-busy.prom").read_text()
    a = readings_from_families(parse(text), "10.0.0.1:8000").readings
    b = readings_from_families(parse(text), "10.0.0.2:8000").readings
    assert {r.label("instance") for r in a} == {"10.0.0.1:8000"}
    assert {r.label("instance") for r in b} == {"10.0.0.2:8000"}
    # the same series under another model name (a redeploy): new labels, not remembered ones
    renamed = text.replace('model_name="', 'model_name="other-')
    c = readings_from_families(parse(renamed), INST).readings
    models = {r.label("model") for r in c if r.label("model")}
    assert models and all(m.startswith("other-") for m in models)


def test_labels_the_caller_may_edit_are_not_remembered():
    import infertop.dialects as d
    from infertop.promtext import Family, PromSample
    d._memo.clear()
    lab = {"model_name": "m", "engine": "0"}
    fam = Family("vllm:num_requests_running", "gauge", "",
                 [PromSample("vllm:num_requests_running", lab, 3.0, None)])
    first = readings_from_families([fam], INST).readings
    assert not d._memo
    lab["engine"] = "1"                                  # same dict object, edited
    second = readings_from_families([fam], INST).readings
    key = "server.requests_running"
    assert {r.label("engine") for r in first if r.key == key} == {"0"}
    assert {r.label("engine") for r in second if r.key == key} == {"1"}
