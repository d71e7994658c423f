"""TensorRT-LLM's ``trtllm-serve`` (PyTorch backend): everything infertop knows about it
(docs/metrics.md#trtllm; facts in docs/reference/metrics.md section 5).  Triton with
the TensorRT-LLM backend is triton.py (another program, another page: see there).

Names from TensorRT-LLM tensorrt_llm/metrics/collector.py @050f80de (MetricsCollector's
docstring and log_iteration_stats); running/waiting/KV/block size/blocks as llm-d maps
them.  Labels are the server's own (model_name, engine_type); no engine index.  The
fixture is written from that source, not captured
(tests/fixtures/metrics/trtllm-serve-documented.prom).
"""

from __future__ import annotations

from collections.abc import Sequence

from .mapping import Ctx, Dialect, gauge_configs
from .mapping import rule as _r
from .spec import ServerKind


def _trtllm_kv_config(ctx: Ctx) -> None:
    gauge_configs(ctx, (("trtllm_kv_cache_max_blocks", "num_gpu_blocks", None),
                        ("trtllm_kv_cache_tokens_per_block", "block_size", None)))


DIALECT = Dialect("trtllm", ("trtllm_",), "", ("model_name",), extras=(_trtllm_kv_config,),
                  extra_families=("trtllm_kv_cache_max_blocks",
                                  "trtllm_kv_cache_tokens_per_block"), rules=(
    _r("trtllm_num_requests_running", "server.requests_running"),
    _r("trtllm_num_requests_waiting", "server.requests_waiting"),
    _r("trtllm_num_paused_requests", "server.requests_paused"),
    # usedNumBlocks / maxNumBlocks, set per iteration (a fraction)
    _r("trtllm_kv_cache_utilization", "kv.usage_ratio", fraction=True),
    _r("trtllm_prompt_tokens", "server.prompt_tokens_total"),
    _r("trtllm_generation_tokens", "server.generation_tokens_total"),
    # prompt tokens include the ones served from the KV cache: they are the lookups
    _r("trtllm_prompt_tokens", "kv.prefix_cache_queries_total"),
    _r("trtllm_prompt_cached_tokens", "kv.prefix_cache_hits_total"),
    _r("trtllm_request_success", "server.requests_finished_total",
       keep={"finished_reason": "reason"}),
    _r("trtllm_spec_decode_num_draft_tokens", "spec.draft_tokens_total"),
    _r("trtllm_spec_decode_num_accepted_tokens", "spec.accepted_tokens_total"),
    _r("trtllm_time_to_first_token_seconds", "latency.ttft_seconds"),
    _r("trtllm_time_per_output_token_seconds", "latency.tpot_seconds"),
    _r("trtllm_e2e_request_latency_seconds", "latency.e2e_seconds"),
    _r("trtllm_request_queue_time_seconds", "latency.queue_seconds"),
    _r("trtllm_request_prefill_time_seconds", "latency.prefill_seconds"),
    _r("trtllm_request_decode_time_seconds", "latency.decode_seconds"),
))


def _match_argv(how: str, prog: str, args: Sequence[str]) -> tuple[str, str] | None:
    return ("trtllm", "api_server") if how != "module" and prog == "trtllm-serve" else None


KIND = ServerKind(
    name="trtllm", title="TensorRT-LLM", order=60, dialect=DIALECT,
    roles={"api_server": 3},
    match_argv=_match_argv, default_port=8000,
    settings=None,   # no flag table yet: the settings pane shows nothing for it
    python=True,
    preallocating=True,   # the KV cache manager takes a share of free memory at start-up
    reference="docs/metrics.md#trtllm",
)
