"""vLLM: everything infertop knows about it (docs/metrics.md#vllm; facts in
docs/reference/metrics.md section 1).

Metric names are vLLM V1's (0.33, the reference version) with the V0 / early-V1 names as
fallbacks (``unless`` the new name is on the page).  ``since`` records the version a name
appeared or was renamed in where the reference says; a rule without it is a 0.33 name
whose first version is not recorded.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence

from infertop.keys import SPECS
from infertop.model import Kind, Reading

from .flags import settings_from
from .mapping import Ctx, Dialect
from .mapping import rule as _r
from .spec import ProfilerEndpoint, ServerKind, Titles

# ---- /metrics ------------------------------------------------------------------------------

# The CacheConfig fields worth showing (vllm:cache_config_info carries every field as a label)
VLLM_CACHE_FIELDS = ("block_size", "num_gpu_blocks", "gpu_memory_utilization", "cache_dtype",
                     "enable_prefix_caching", "kv_cache_size_tokens")


def _vllm_cache_config(ctx: Ctx) -> None:
    fam = ctx.by_name.get("vllm:cache_config_info")
    if fam is None:
        return
    for s in fam.samples:
        for name in VLLM_CACHE_FIELDS:
            v = s.labels.get(name)
            if v is None or v == "None":
                continue
            ctx.extra.append(Reading("kv.config", 1.0, "",
                                     ctx.reading_labels(s.labels, name=name),
                                     kind=Kind.INFO, text=v))


# vllm:engine_sleep_state{sleep_state}: one sample per state, 1 on the current one
# (awake = 1 when active; weights_offloaded = sleep level 1; discard_all = level 2)
VLLM_SLEEP_STATE = "vllm:engine_sleep_state"
VLLM_SLEEP_LEVELS = {"awake": 0.0, "weights_offloaded": 1.0, "discard_all": 2.0}


def _vllm_sleep_level(ctx: Ctx) -> None:
    """One ``server.sleep_level`` per engine from the one-hot ``sleep_state`` samples: the
    deepest state flagged wins; an engine with no state flagged reports nothing (a page
    that says neither awake nor asleep is not read as awake)."""
    fam = ctx.by_name.get(VLLM_SLEEP_STATE)
    if fam is None:
        return
    levels: dict[tuple, float] = {}
    for s in fam.samples:
        level = VLLM_SLEEP_LEVELS.get(s.labels.get("sleep_state", ""))
        if level is None or not (math.isfinite(s.value) and s.value >= 0.5):
            continue
        lab = ctx.reading_labels(s.labels)
        levels[lab] = max(levels.get(lab, 0.0), level)
    for lab, level in levels.items():
        ctx.extra.append(Reading("server.sleep_level", level, SPECS["server.sleep_level"].unit,
                                 lab))


# kv_cache_usage_perc / gpu_cache_usage_perc: "1 means 100 percent usage" -> a fraction.
DIALECT = Dialect("vllm", ("vllm:",), "engine", ("model_name",),
                  extras=(_vllm_cache_config, _vllm_sleep_level),
                  extra_families=("vllm:cache_config_info", VLLM_SLEEP_STATE), rules=(
    _r("vllm:num_requests_running", "server.requests_running"),
    _r("vllm:num_requests_waiting", "server.requests_waiting"),
    _r("vllm:num_requests_swapped", "server.requests_swapped", since="V0 only"),
    _r("vllm:kv_cache_usage_perc", "kv.usage_ratio", fraction=True, since="0.9.2"),
    _r("vllm:gpu_cache_usage_perc", "kv.usage_ratio", fraction=True,
       unless="vllm:kv_cache_usage_perc", since="V0; deprecated 0.9.2, hidden 0.11"),
    _r("vllm:prompt_tokens", "server.prompt_tokens_total"),
    _r("vllm:generation_tokens", "server.generation_tokens_total"),
    _r("vllm:num_preemptions", "server.preemptions_total"),
    _r("vllm:prefix_cache_queries", "kv.prefix_cache_queries_total", since="0.9.2"),
    _r("vllm:prefix_cache_hits", "kv.prefix_cache_hits_total", since="0.9.2"),
    _r("vllm:gpu_prefix_cache_queries", "kv.prefix_cache_queries_total",
       unless="vllm:prefix_cache_queries", since="early V1; deprecated 0.9.2"),
    _r("vllm:gpu_prefix_cache_hits", "kv.prefix_cache_hits_total",
       unless="vllm:prefix_cache_hits", since="early V1; deprecated 0.9.2"),
    _r("vllm:request_success", "server.requests_finished_total",
       keep={"finished_reason": "reason"}),
    # what the queue waits on: reason=capacity (KV blocks, --max-num-seqs) or deferred
    # (LoRA budget, KV transfer from a remote prefill, blocked); waiting = their sum
    _r("vllm:num_requests_waiting_by_reason", "server.requests_deferred",
       select={"reason": "deferred"}),
    _r("vllm:num_requests_waiting_by_reason", "server.requests_waiting_capacity",
       select={"reason": "capacity"}),
    # no engine label on the page: refused before any engine saw the request
    _r("vllm:admission_rejections", "server.admission_rejections_total",
       keep={"reason": "reason"}),
    _r("vllm:prompt_tokens_by_source", "kv.prompt_tokens_by_source_total",
       keep={"source": "source"}),
    _r("vllm:prompt_tokens_cached_by_source", "kv.cached_tokens_by_source_total",
       keep={"source": "source"}),
    _r("vllm:external_prefix_cache_queries", "kv.external_prefix_cache_queries_total"),
    _r("vllm:external_prefix_cache_hits", "kv.external_prefix_cache_hits_total"),
    _r("vllm:request_prefill_kv_computed_tokens", "request.prefill_computed_tokens"),
    # disaggregated prefill/decode over NIXL (only with --kv-transfer-config NixlConnector)
    _r("vllm:nixl_xfer_time_seconds", "latency.kv_transfer_seconds"),
    _r("vllm:nixl_bytes_transferred", "kv.transfer_bytes_total", part="sum"),
    _r("vllm:nixl_num_failed_transfers", "kv.transfer_failures_total"),
    _r("vllm:spec_decode_num_drafts", "spec.drafts_total"),
    _r("vllm:spec_decode_num_draft_tokens", "spec.draft_tokens_total"),
    _r("vllm:spec_decode_num_accepted_tokens", "spec.accepted_tokens_total"),
    _r("vllm:time_to_first_token_seconds", "latency.ttft_seconds"),
    _r("vllm:inter_token_latency_seconds", "latency.itl_seconds", since="0.11"),
    # V0 and V1 <= 0.10: per-token latency under the old name
    _r("vllm:time_per_output_token_seconds", "latency.itl_seconds",
       unless="vllm:inter_token_latency_seconds", since="V0, V1 <= 0.10; deprecated 0.11"),
    _r("vllm:request_time_per_output_token_seconds", "latency.tpot_seconds"),
    _r("vllm:e2e_request_latency_seconds", "latency.e2e_seconds"),
    _r("vllm:request_queue_time_seconds", "latency.queue_seconds"),
    _r("vllm:request_inference_time_seconds", "latency.inference_seconds"),
    _r("vllm:request_num_preemptions", "request.preemptions"),
    _r("vllm:prompt_tokens_cached", "kv.prompt_tokens_cached_total"),
    _r("vllm:request_prefill_time_seconds", "latency.prefill_seconds"),
    _r("vllm:request_decode_time_seconds", "latency.decode_seconds"),
    _r("vllm:request_prompt_tokens", "request.prompt_tokens"),
    _r("vllm:request_generation_tokens", "request.generation_tokens"),
    # one observation per engine step: its count is the number of steps
    _r("vllm:iteration_tokens_total", "server.iteration_tokens"),
    _r("vllm:iteration_tokens_total", "server.engine_steps_total", part="count"),
    # MFU estimates (docs/metrics.md#mfu): exposed at 0 without --enable-mfu-metrics, so
    # sol_derive treats an all-zero counter as absent
    _r("vllm:estimated_flops_per_gpu", "server.estimated_flops_per_gpu_total"),
    _r("vllm:estimated_read_bytes_per_gpu", "server.estimated_read_bytes_per_gpu_total"),
    _r("vllm:estimated_write_bytes_per_gpu", "server.estimated_write_bytes_per_gpu_total"),
))


# ---- processes -----------------------------------------------------------------------------

# The API server is ``python -m vllm.entrypoints.openai.api_server ...`` or ``vllm serve
# MODEL``; its children rename themselves with setproctitle to ``VLLM::EngineCore[_DPn]`` /
# ``VLLM::Worker[_DPn][_PPn][_TPn]...`` / ``VLLM::APIServer_n`` / ``VLLM::DPCoordinator``
# (prefix from VLLM_PROCESS_NAME_PREFIX, so the names match under any prefix).
TITLES = Titles("VLLM", (("EngineCore", "engine_core"), ("Worker", "worker"),
                         ("APIServer", "api_server")), default_role="helper", any_prefix=True)


def _match_argv(how: str, prog: str, args: Sequence[str]) -> tuple[str, str] | None:
    first = args[0] if args else ""
    if how == "module":
        if prog.startswith("vllm.entrypoints"):
            # the CLI module runs other subcommands too (bench, chat): only serve serves
            return ("vllm", "api_server") if "cli" not in prog or first == "serve" else \
                ("vllm", "")
        return None
    if prog == "vllm":
        return ("vllm", "api_server") if first == "serve" else ("unknown", "")
    return None


# ---- settings from the command line --------------------------------------------------------

_VALUE = {
    "max_num_seqs": ("--max-num-seqs",),
    "max_num_batched_tokens": ("--max-num-batched-tokens",),
    "tensor_parallel_size": ("--tensor-parallel-size", "-tp"),
    "pipeline_parallel_size": ("--pipeline-parallel-size", "-pp"),
    "data_parallel_size": ("--data-parallel-size", "-dp"),
    "gpu_memory_utilization": ("--gpu-memory-utilization",),
    "max_model_len": ("--max-model-len",),
    "kv_cache_dtype": ("--kv-cache-dtype",),
    "speculative_config": ("--speculative-config",),
    "compilation_config": ("--compilation-config", "-O"),
    "dtype": ("--dtype",),
    "quantization": ("--quantization", "-q"),
    "block_size": ("--block-size",),
    "model": ("--model",),
    "served_model_name": ("--served-model-name",),
    # what deferred requests wait on (SCH-005) and where KV events are published
    "kv_transfer_config": ("--kv-transfer-config",),
    "kv_events_config": ("--kv-events-config",),
    "max_loras": ("--max-loras",),
}

# vLLM KVTransferConfig.kv_role -> the engine's part in disaggregated serving
_KV_ROLES = {"kv_producer": "prefill", "kv_consumer": "decode", "kv_both": "both"}


def disagg_role(config: str | None) -> str:
    """'prefill' / 'decode' / 'both' from a --kv-transfer-config JSON value ('' if none:
    no connector, or not JSON).  kv_both (NIXL's usual role) lets the router pick the
    side per request.  Pure (no process needed): the demo's pair reads its roles from
    its setup's settings with it (probes/sources/demo.with_role)."""
    if not config:
        return ""
    try:
        cfg = json.loads(config)
    except (ValueError, RecursionError):
        return ""
    role = cfg.get("kv_role") if isinstance(cfg, dict) else None
    return _KV_ROLES.get(role, "") if isinstance(role, str) else ""


def settings(args: list[str]) -> dict[str, str]:
    # vLLM's -O takes '-O3', '-O 3', '-O.level=3' forms
    extra: dict[str, str] = {}
    rest = []
    for a in args:
        m = re.match(r"^-O\.?(.+)$", a)
        if m:
            extra["compilation_config"] = m.group(1)
        else:
            rest.append(a)
    out, found = settings_from(rest, _VALUE, (
        "--enforce-eager", "--enable-prefix-caching", "--no-enable-prefix-caching",
        "--enable-chunked-prefill", "--no-enable-chunked-prefill", "--enable-lora",
        "--enable-sleep-mode"))
    out.update(extra)
    for flag, name in (("--enable-lora", "enable_lora"),
                       ("--enable-sleep-mode", "sleep_mode")):
        if flag in found:
            out[name] = "on"
    role = disagg_role(out.get("kv_transfer_config"))
    if role:
        out["disagg_role"] = role
    positional = args[1] if args[:1] == ["serve"] and len(args) > 1 else "-"
    if "model" not in out and not positional.startswith("-"):
        out["model"] = positional
    cc = out.get("compilation_config", "")
    if "--enforce-eager" in found:
        out["cuda_graphs"] = "off (--enforce-eager)"
    elif re.search(r"cudagraph_mode\W+\W*none", cc, re.I):
        out["cuda_graphs"] = "off (compilation-config cudagraph_mode NONE)"
    else:
        out["cuda_graphs"] = "on (default)"
    if "--no-enable-prefix-caching" in found:
        out["prefix_caching"] = "off (--no-enable-prefix-caching)"
    elif "--enable-prefix-caching" in found:
        out["prefix_caching"] = "on (--enable-prefix-caching)"
    if "--no-enable-chunked-prefill" in found:
        out["chunked_prefill"] = "off (--no-enable-chunked-prefill)"
    elif "--enable-chunked-prefill" in found:
        out["chunked_prefill"] = "on (--enable-chunked-prefill)"
    return out


# ---- profiler endpoint (reference section 1.5) ---------------------------------------------

# POST /start_profile, wait, POST /stop_profile (blocks until the traces are flushed:
# minutes on big models).  The routes exist only with --profiler-config (since 0.13; before:
# VLLM_TORCH_PROFILER_DIR); otherwise 404.
ENABLE_FIX = ("restart vLLM with --profiler-config '{\"profiler\": \"torch\", "
              "\"torch_profiler_dir\": \"/tmp/vllm-profile\"}' (vLLM < 0.13: "
              "VLLM_TORCH_PROFILER_DIR=/tmp/vllm-profile)")


def _confirm(seconds: float, num_steps: int | None) -> str:
    return (f"Start vLLM's profiler for {seconds:g} s? Requests run slower meanwhile, and "
            f"/stop_profile can take minutes while traces are written on the server host.")


def _trace_dir(cmdline: Sequence[str]) -> str | None:
    args = [str(a) for a in cmdline]
    for i, a in enumerate(args):
        val = None
        if a.startswith("--profiler-config.torch_profiler_dir"):
            nxt = args[i + 1] if i + 1 < len(args) else None
            val = a.split("=", 1)[1] if "=" in a else nxt
        elif (a == "--profiler-config" and i + 1 < len(args)) \
                or a.startswith("--profiler-config="):
            raw = a.split("=", 1)[1] if "=" in a else args[i + 1]
            try:
                cfg = json.loads(raw)
            except ValueError:
                cfg = {}
            if isinstance(cfg, dict):
                if cfg.get("profiler") == "cuda":
                    return ("the nsys report of the session the server runs under "
                            "(profiler=cuda)")
                val = cfg.get("torch_profiler_dir")
        if val:
            return str(val)
    return None


KIND = ServerKind(
    name="vllm", title="vLLM", order=10, dialect=DIALECT,
    roles={"engine_core": 0, "worker": 1, "api_server": 3, "helper": 5},
    match_argv=_match_argv, titles=TITLES, default_port=8000, settings=settings,
    python=True, preallocating=True,   # --gpu-memory-utilization of the card, at start-up
    profiler=ProfilerEndpoint(_confirm, _trace_dir, ENABLE_FIX,
                              enabled_by="--profiler-config"),
    # vLLM's profiling docs: spawn workers so nsys follows them reliably
    nsys_env="VLLM_WORKER_MULTIPROC_METHOD=spawn",
    demo_render="infertop.demo.exposition:render_vllm",
    reference="docs/metrics.md#vllm",
)
