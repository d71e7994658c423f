"""SGLang: everything infertop knows about it (docs/metrics.md#sglang; facts in
docs/reference/metrics.md section 2).

Metric names are SGLang 0.5.23's (the captured fixtures tests/fixtures/metrics/sglang-0.5.23-*);
their first versions are not recorded.  Scheduler metrics carry tp/pp/ep ranks (identical
values when every scheduler reports): max over them; dp_rank is the engine.  The tokenizer's
counters are bumped when a request finishes, so prompt tokens include cached ones and
num_requests_total counts finished requests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from infertop.keys import SPECS
from infertop.model import Kind, Reading

from .flags import settings_from
from .mapping import Ctx, Dialect, gauge_configs
from .mapping import rule as _r
from .spec import ProfilerEndpoint, ServerKind, Titles

# ---- /metrics ------------------------------------------------------------------------------


def _sglang_utilization(ctx: Ctx) -> None:
    """sglang:utilization, except the -1 a prefill instance reports (not a load)."""
    fam = ctx.by_name.get("sglang:utilization")
    if fam is None:
        return
    seen: dict[tuple, float] = {}
    for s in fam.samples:
        if not math.isfinite(s.value) or s.value < 0:
            continue
        lab = ctx.reading_labels(s.labels)
        seen[lab] = max(seen.get(lab, 0.0), s.value)   # TP ranks repeat it
    for lab, v in seen.items():
        ctx.extra.append(Reading("server.utilization_ratio", v,
                                 SPECS["server.utilization_ratio"].unit, lab))


def _sglang_role(ctx: Ctx) -> None:
    """The engine's part in disaggregated serving from SGLang's own engine_type label
    (prefill, decode, unified: DisaggregationMode.to_engine_type)."""
    fam = ctx.by_name.get("sglang:num_running_reqs")
    seen: set[tuple] = set()
    for s in fam.samples if fam is not None else ():
        role = s.labels.get("engine_type")
        if role not in ("prefill", "decode", "unified"):
            continue
        lab = ctx.reading_labels(s.labels)
        if lab not in seen:
            seen.add(lab)
            ctx.extra.append(Reading("server.disagg_role", 1.0, "", lab, kind=Kind.INFO,
                                     text=role))


def _sglang_kv_config(ctx: Ctx) -> None:
    gauge_configs(ctx, (("sglang:max_total_num_tokens", "kv_cache_size_tokens", None),
                        ("sglang:page_size", "block_size", None),
                        ("sglang:num_pages", "num_gpu_blocks", None)))


# sglang:realtime_tokens_total{mode}: tokens the scheduler processed, bumped on each log
# interval (every 40 decode steps, and on prefill) while the work is done: the live rate.
# The tokenizer's prompt/generation_tokens_total move only when a request finishes (steps
# of a whole batch's output): the fallback for an SGLang without the realtime family.
REALTIME = "sglang:realtime_tokens"
_PREFILL_MODES = ("prefill_compute", "prefill_cache")


def _sglang_prefill(ctx: Ctx) -> None:
    """Live prefill tokens: realtime prefill_compute + prefill_cache (prompt tokens computed
    and served from the cache, as vLLM's prompt_tokens counts both), each the max over the
    TP/PP/EP ranks that repeat it, then summed over the two modes."""
    fam = ctx.by_name.get(REALTIME)
    if fam is None:
        return
    per: dict[tuple, dict[str, float]] = {}
    for s in fam.samples:
        mode = s.labels.get("mode")
        if mode not in _PREFILL_MODES or not math.isfinite(s.value) or s.value < 0:
            continue
        modes = per.setdefault(ctx.reading_labels(s.labels), {})
        modes[mode] = max(modes.get(mode, 0.0), s.value)
    for lab, modes in per.items():
        ctx.extra.append(Reading("server.prompt_tokens_total", sum(modes.values()),
                                 SPECS["server.prompt_tokens_total"].unit, lab,
                                 kind=Kind.COUNTER))


def _sglang_http_active(ctx: Ctx) -> None:
    """Requests the HTTP server is serving now, summed over endpoints but for the scrape
    itself (/metrics) and health checks (sglang:http_requests_active{endpoint,method})."""
    fam = ctx.by_name.get("sglang:http_requests_active")
    if fam is None:
        return
    total, seen = 0.0, False
    for s in fam.samples:
        if s.labels.get("endpoint") in ("/metrics", "/health", "/health_generate") or \
                not math.isfinite(s.value) or s.value < 0:
            continue
        total += s.value
        seen = True
    if seen:
        ctx.extra.append(Reading("server.http_requests_active", total,
                                 SPECS["server.http_requests_active"].unit,
                                 ctx.reading_labels({})))


_SCHED = {"agg": "max"}
DIALECT = Dialect("sglang", ("sglang:",), "dp_rank", ("model_name",),
                  extras=(_sglang_kv_config, _sglang_utilization, _sglang_role,
                          _sglang_prefill, _sglang_http_active),
                  extra_families=("sglang:max_total_num_tokens", "sglang:page_size",
                                  "sglang:num_pages", "sglang:utilization",
                                  "sglang:num_running_reqs", REALTIME,
                                  "sglang:http_requests_active"),
                  # SGLang repeats scheduler gauges per TP/PP/EP rank (promrules.py); its
                  # num_retracted_reqs and num_paused_reqs carry the scheduler's pid
                  drop_labels=("tp_rank", "pp_rank", "ep_rank", "moe_ep_rank", "engine_type",
                               "pid"),
                  rules=(
    _r("sglang:num_running_reqs", "server.requests_running"),
    _r("sglang:num_queue_reqs", "server.requests_waiting"),
    _r("sglang:token_usage", "kv.usage_ratio", fraction=True),
    _r("sglang:num_retracted_requests", "server.preemptions_total", **_SCHED),
    # live: the scheduler's decode tokens (prefill: _sglang_prefill); the tokenizer's
    # counters only when the realtime family is missing, and they move on finish
    _r(REALTIME, "server.generation_tokens_total", select={"mode": "decode"}, **_SCHED),
    _r("sglang:prompt_tokens", "server.prompt_tokens_total", unless=REALTIME, on_finish=True),
    _r("sglang:generation_tokens", "server.generation_tokens_total", unless=REALTIME,
       on_finish=True),
    _r("sglang:gen_throughput", "throughput.server_generation_tokens_per_second"),
    _r("sglang:prompt_tokens", "kv.prefix_cache_queries_total", on_finish=True),
    _r("sglang:cached_tokens", "kv.prefix_cache_hits_total", on_finish=True),
    _r("sglang:num_requests", "server.requests_finished_total", const={"reason": "finished"},
       on_finish=True),
    _r("sglang:spec_verify_calls", "spec.drafts_total"),
    _r("sglang:time_to_first_token_seconds", "latency.ttft_seconds"),
    _r("sglang:inter_token_latency_seconds", "latency.itl_seconds"),
    _r("sglang:request_time_per_output_token_seconds", "latency.tpot_seconds"),
    _r("sglang:e2e_request_latency_seconds", "latency.e2e_seconds"),
    _r("sglang:queue_time_seconds", "latency.queue_seconds"),
    _r("sglang:prompt_tokens_histogram", "request.prompt_tokens"),
    _r("sglang:generation_tokens_histogram", "request.generation_tokens"),
    # KV pool in tokens: used by requests, free, held only by the radix cache (SGLang's
    # answer to token_usage misreporting hybrid models)
    _r("sglang:kv_used_tokens", "kv.used_tokens"),
    _r("sglang:kv_available_tokens", "kv.available_tokens"),
    _r("sglang:kv_evictable_tokens", "kv.evictable_tokens"),
    _r("sglang:cache_hit_rate", "kv.batch_prefix_hit_ratio", fraction=True),
    _r("sglang:spec_accept_rate", "spec.batch_acceptance_ratio", fraction=True),
    _r("sglang:num_retracted_reqs", "server.requests_retracted"),
    _r("sglang:num_paused_reqs", "server.requests_paused"),
    _r("sglang:num_grammar_queue_reqs", "server.requests_grammar_queued"),
    _r("sglang:decode_sum_seq_lens", "server.running_context_tokens"),
    _r("sglang:is_cuda_graph", "server.cuda_graph_active"),
    _r("sglang:scheduler_idle_seconds", "server.scheduler_idle_seconds_total", **_SCHED),
    _r("sglang:scheduler_process_cpu_seconds", "server.scheduler_cpu_seconds_total",
       **_SCHED),
    # where the scheduler loop's wall time goes (run_batch, idle, process_input_requests...)
    _r("sglang:scheduler_stage_seconds", "server.scheduler_stage_seconds_total",
       keep={"category": "stage"}, **_SCHED),
    # disaggregated prefill/decode queues (0 on a unified engine)
    _r("sglang:num_prefill_bootstrap_queue_reqs", "disagg.queue_requests",
       const={"queue": "prefill_bootstrap"}),
    _r("sglang:num_prefill_inflight_queue_reqs", "disagg.queue_requests",
       const={"queue": "prefill_inflight"}),
    _r("sglang:num_decode_prealloc_queue_reqs", "disagg.queue_requests",
       const={"queue": "decode_prealloc"}),
    _r("sglang:num_decode_transfer_queue_reqs", "disagg.queue_requests",
       const={"queue": "decode_transfer"}),
    _r("sglang:per_stage_req_latency_seconds", "latency.stage_seconds",
       keep={"stage": "stage"}),
    # PD disaggregation's KV transfer (ms and MB on the wire)
    _r("sglang:kv_transfer_latency_ms", "latency.kv_transfer_seconds", scale=0.001),
    _r("sglang:kv_transfer_total_mb", "kv.transfer_bytes_total", part="sum",
       scale=float(1 << 20)),
    _r(("sglang:num_transfer_failed_reqs", "sglang:num_bootstrap_failed_reqs"),
       "kv.transfer_failures_total"),
    _r("sglang:estimated_flops_per_gpu", "server.estimated_flops_per_gpu_total", **_SCHED),
    _r("sglang:estimated_read_bytes_per_gpu", "server.estimated_read_bytes_per_gpu_total",
       **_SCHED),
    _r("sglang:estimated_write_bytes_per_gpu", "server.estimated_write_bytes_per_gpu_total",
       **_SCHED),
))


# ---- processes -----------------------------------------------------------------------------

# ``python -m sglang.launch_server`` (or ``sglang serve``) with ``sglang::scheduler[_DPn_TPn]``
# and ``sglang::detokenizer`` children (tests/fixtures/processes/sglang-0.5.23-tree.txt)
TITLES = Titles("sglang", (("scheduler", "scheduler"), ("semi_pd_scheduler", "scheduler"),
                           ("detokenizer", "detokenizer"),
                           ("data_parallel_controller", "router"),
                           ("gpu_worker", "worker")), default_role="helper")


def _match_argv(how: str, prog: str, args: Sequence[str]) -> tuple[str, str] | None:
    first = args[0] if args else ""
    if how == "module":
        if prog in ("sglang.launch_server", "sglang.srt.server") or \
                (prog in ("sglang", "sglang.cli.main") and first == "serve"):
            return "sglang", "api_server"
        if prog.startswith("sglang_router"):
            return "sglang", "router"
        return None
    if prog == "sglang":
        return ("sglang", "api_server") if first == "serve" else ("unknown", "")
    return None


# ---- settings from the command line --------------------------------------------------------

_VALUE = {
    "model": ("--model-path", "--model"),
    "tensor_parallel_size": ("--tp-size", "--tp", "--tensor-parallel-size"),
    "data_parallel_size": ("--dp-size", "--dp", "--data-parallel-size"),
    "pipeline_parallel_size": ("--pp-size", "--pp", "--pipeline-parallel-size"),
    "mem_fraction_static": ("--mem-fraction-static",),
    "max_running_requests": ("--max-running-requests",),
    "chunked_prefill_size": ("--chunked-prefill-size",),
    "context_length": ("--context-length",),
    "kv_cache_dtype": ("--kv-cache-dtype",),
    "max_total_tokens": ("--max-total-tokens",),
    "speculative_algorithm": ("--speculative-algorithm",),
    "schedule_policy": ("--schedule-policy",),
    # disaggregated prefill/decode: prefill | decode | null (unified)
    "disagg_role": ("--disaggregation-mode",),
    "disaggregation_transfer_backend": ("--disaggregation-transfer-backend",),
}


def settings(args: list[str]) -> dict[str, str]:
    out, found = settings_from(args, _VALUE, ("--disable-cuda-graph", "--disable-radix-cache"))
    out["cuda_graphs"] = ("off (--disable-cuda-graph)" if "--disable-cuda-graph" in found
                          else "on (default)")
    if "--disable-radix-cache" in found:
        out["prefix_caching"] = "off (--disable-radix-cache)"
    if out.get("disagg_role") not in ("prefill", "decode"):
        out.pop("disagg_role", None)   # "null": a unified engine
    return out


# ---- profiler endpoint (reference section 2) -----------------------------------------------

# POST /start_profile with {"num_steps": N} profiles the next N forward steps and stops by
# itself; the route is always there.
DEFAULT_STEPS = 32


def _confirm(seconds: float, num_steps: int | None) -> str:
    n = num_steps or DEFAULT_STEPS
    return (f"Start SGLang's torch profiler for the next {n} forward steps? It slows those "
            f"steps down and writes traces on the server host.")


def _trace_dir(cmdline: Sequence[str]) -> str | None:
    return "SGLANG_TORCH_PROFILER_DIR on the server host (default /tmp)"


KIND = ServerKind(
    name="sglang", title="SGLang", order=20, dialect=DIALECT,
    roles={"scheduler": 0, "worker": 1, "api_server": 3, "router": 3, "detokenizer": 4,
           "helper": 5},
    match_argv=_match_argv, titles=TITLES, default_port=30000, settings=settings,
    python=True, preallocating=True,   # --mem-fraction-static of the card, at start-up
    profiler=ProfilerEndpoint(_confirm, _trace_dir,
                              "upgrade SGLang (the endpoint is missing)", steps=DEFAULT_STEPS),
    demo_render="infertop.demo.exposition:render_sglang",
    reference="docs/metrics.md#sglang",
)
