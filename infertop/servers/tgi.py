"""Hugging Face TGI (text-generation-inference): everything infertop knows about it
(docs/metrics.md#tgi; facts in docs/reference/metrics.md section 3).

The router's Rust exporter writes counters without ``_total`` and no model label; token
totals only exist as the sums of the per-request length histograms (counted when a request
ends).  Names from router/src/server.rs; their first versions are not recorded.
"""

from __future__ import annotations

from collections.abc import Sequence

from .flags import settings_from
from .mapping import Dialect
from .mapping import rule as _r
from .spec import ServerKind

DIALECT = Dialect("tgi", ("tgi_",), "", (), bare_counters=True, rules=(
    _r("tgi_batch_current_size", "server.requests_running"),
    _r("tgi_queue_size", "server.requests_waiting"),
    _r("tgi_request_success", "server.requests_finished_total", const={"reason": "success"}),
    _r("tgi_request_failure", "server.requests_finished_total", keep={"err": "reason"},
       rename={"dropped": "abort", "*": "error"}),
    _r("tgi_batch_inference_count", "server.engine_steps_total"),
    _r("tgi_request_input_length", "server.prompt_tokens_total", part="sum"),
    _r("tgi_request_generated_tokens", "server.generation_tokens_total", part="sum"),
    _r("tgi_request_duration", "latency.e2e_seconds"),
    _r("tgi_request_queue_duration", "latency.queue_seconds"),
    _r("tgi_request_mean_time_per_token_duration", "latency.tpot_seconds"),
    _r("tgi_request_input_length", "request.prompt_tokens"),
    _r("tgi_request_generated_tokens", "request.generation_tokens"),
))


# ``text-generation-launcher`` -> ``text-generation-router`` + ``text-generation-server``
# shards (Python; their comm is cut to 'text-generation')
def _match_argv(how: str, prog: str, args: Sequence[str]) -> tuple[str, str] | None:
    if how == "module":
        return ("tgi", "shard") if prog.startswith("text_generation_server") else None
    return {"text-generation-launcher": ("tgi", "launcher"),
            "text-generation-router": ("tgi", "router"),
            "text-generation-server": ("tgi", "shard")}.get(prog)


_VALUE = {
    "model": ("--model-id",),
    "max_concurrent_requests": ("--max-concurrent-requests",),
    "tensor_parallel_size": ("--num-shard",),
    "max_batch_total_tokens": ("--max-batch-total-tokens",),
    "max_batch_prefill_tokens": ("--max-batch-prefill-tokens",),
    "max_input_tokens": ("--max-input-tokens", "--max-input-length"),
    "max_total_tokens": ("--max-total-tokens",),
    "quantize": ("--quantize",),
    "cuda_graphs": ("--cuda-graphs",),
}


def settings(args: list[str]) -> dict[str, str]:
    out, _ = settings_from(args, _VALUE)
    if out.get("cuda_graphs", "").strip() == "0":
        out["cuda_graphs"] = "off (--cuda-graphs 0)"
    return out


KIND = ServerKind(
    name="tgi", title="TGI", order=30, dialect=DIALECT,
    roles={"shard": 1, "router": 3, "launcher": 4},
    match_argv=_match_argv, default_port=3000, port_flags=("--port", "-p"), settings=settings,
    # the router and launcher are Rust; the shards run the model in Python
    python=False, python_roles=("shard",),
    preallocating=True,   # the shards size the KV cache to the free memory at warm-up
    demo_render="infertop.demo.exposition:render_tgi",
    reference="docs/metrics.md#tgi",
)
