"""TensorRT-LLM: trtllm-serve's trtllm_* page and Triton's nv_trt_llm_* page, written from
the documentation (each name cited in the fixture: TensorRT-LLM metrics/collector.py and
llm-d's model-server protocol table), mapped to the common keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from infertop.dialects import readings_from_exposition

METRICS = Path(__file__).parent / "fixtures" / "metrics"
INST = "127.0.0.1:8000"


def page(name: str):
    return readings_from_exposition((METRICS / name).read_text(), INST)


def value(e, key: str, **labels: str):
    got = [r for r in e.readings
           if r.key == key and all(r.label(k) == v for k, v in labels.items())]
    assert len(got) == 1, (key, labels, got)
    return got[0].value if got[0].text is None else got[0].text


def test_trtllm_serve_is_its_own_dialect():
    e = page("trtllm-serve-documented.prom")
    assert e.dialect == "trtllm" and e.meta.model == "llama-3-8b"
    assert value(e, "server.info") == "trtllm llama-3-8b"
    assert value(e, "server.requests_running") == 12.0
    assert value(e, "server.requests_waiting") == 3.0
    assert value(e, "server.requests_paused") == 1.0
    assert value(e, "kv.usage_ratio") == pytest.approx(0.4)
    assert value(e, "kv.config", name="num_gpu_blocks") == "4096"
    assert value(e, "kv.config", name="block_size") == "32"
    assert value(e, "kv.prefix_cache_queries_total") == 120000.0
    assert value(e, "kv.prefix_cache_hits_total") == 30000.0
    assert value(e, "server.requests_finished_total", reason="length") == 20.0
    assert value(e, "spec.accepted_tokens_total") == 6300.0
    assert value(e, "latency.ttft_seconds") == 500.0
    assert value(e, "latency.queue_seconds") == 500.0


def test_triton_tensorrt_llm_documented_page():
    e = page("triton-trtllm-documented.prom")
    assert e.dialect == "triton"
    trt = {"model": "tensorrt_llm"}
    assert value(e, "server.requests_running", **trt) == 10.0
    assert value(e, "server.requests_waiting", **trt) == 4.0   # not 4 + pending 4
    assert value(e, "kv.usage_ratio", **trt) == pytest.approx(0.75)
    assert value(e, "kv.config", name="block_size") == "64"
    assert value(e, "kv.config", name="num_gpu_blocks") == "1200"
    assert value(e, "server.requests_finished_total", reason="error") == 3.0
