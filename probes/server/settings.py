"""Execution settings a server was started with, read from its command line.

``server_settings(kind, cmdline)`` turns e.g. ``vllm serve m --max-num-seqs 64 -tp 2``
into ``{"model": "m", "max_num_seqs": "64", "tensor_parallel_size": "2", ...}``, for
vLLM, SGLang, llama.cpp, TGI and Triton.  Most of this module is the per-server tables
of which flags (long and short spellings) give which setting, plus the small flag reader
(argparse rules) they share with discovery's ``port_from_cmdline``.

Split out of discovery.py (which finds the server processes) to keep that module about
finding processes; discovery re-exports ``server_settings``.  Pure: no I/O, no psutil.
"""

from __future__ import annotations

import json
import re
from typing import Iterable, Mapping


def _norm_flag(tok: str) -> str:
    """'--max_num_seqs' -> '--max-num-seqs' (vLLM and SGLang accept both spellings)."""
    if tok.startswith("--"):
        return "--" + tok[2:].replace("_", "-")
    return tok


def parse_flags(args: list[str], with_value: Iterable[str],
                boolean: Iterable[str] = ()) -> dict[str, str]:
    """Flag -> value for ``--flag value`` and ``--flag=value``; boolean flags map to "".

    The last occurrence wins, as with argparse.  Unknown flags are skipped without taking
    the next token, so a positional after an unknown boolean flag is not swallowed.
    """
    takes = {_norm_flag(f) for f in with_value}
    flags = {_norm_flag(f) for f in boolean}
    out: dict[str, str] = {}
    i = 0
    while i < len(args):
        tok = args[i]
        if tok.startswith("-") and "=" in tok:
            k, v = tok.split("=", 1)
            k = _norm_flag(k)
            if k in takes or k in flags:
                out[k] = v
            i += 1
            continue
        k = _norm_flag(tok)
        if k in takes and i + 1 < len(args):
            out[k] = args[i + 1]
            i += 2
            continue
        if k in flags:
            out[k] = ""
        i += 1
    return out


def _pick(found: Mapping[str, str], *flags: str) -> str | None:
    for f in flags:
        if f in found:
            return found[f]
    return None


_VLLM_VALUE = {
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
_SGLANG_VALUE = {
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
_LLAMA_VALUE = {
    "model": ("-m", "--model"),
    "parallel": ("-np", "--parallel"),
    "ctx_size": ("-c", "--ctx-size"),
    "threads": ("-t", "--threads"),
    "n_gpu_layers": ("-ngl", "--gpu-layers", "--n-gpu-layers"),
    "batch_size": ("-b", "--batch-size"),
    "ubatch_size": ("-ub", "--ubatch-size"),
    "cache_type_k": ("-ctk", "--cache-type-k"),
}
_TGI_VALUE = {
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
_TRITON_VALUE = {"model_repository": ("--model-repository", "--model-store")}


# vLLM KVTransferConfig.kv_role -> the engine's part in disaggregated serving
_KV_ROLES = {"kv_producer": "prefill", "kv_consumer": "decode", "kv_both": "both"}


def _vllm_disagg_role(config: str | None) -> str:
    """'prefill' / 'decode' / 'both' from a --kv-transfer-config JSON value ('' if none:
    no connector, or not JSON).  kv_both (NIXL's usual role) lets the router pick the
    side per request."""
    if not config:
        return ""
    try:
        cfg = json.loads(config)
    except (ValueError, RecursionError):
        return ""
    role = cfg.get("kv_role") if isinstance(cfg, dict) else None
    return _KV_ROLES.get(role, "") if isinstance(role, str) else ""


def _settings_from(args: list[str], table: Mapping[str, tuple[str, ...]],
                   boolean: Iterable[str] = ()) -> tuple[dict[str, str], dict[str, str]]:
    flags = [f for fs in table.values() for f in fs]
    found = parse_flags(args, flags, boolean)
    out = {}
    for name, fs in table.items():
        v = _pick(found, *(_norm_flag(f) for f in fs))
        if v is not None:
            out[name] = v
    return out, found


def server_settings(kind: str, cmdline: Iterable[str] | None) -> dict[str, str]:
    """Execution settings a server was started with, as name -> text.

    Names shared between servers (model, cuda_graphs, tensor/pipeline/data_parallel_size,
    kv_cache_dtype, prefix_caching) mean the same thing everywhere; the others keep the
    server's own flag name.  Only what the command line says, plus cuda_graphs (and for
    llama.cpp cont_batching) whose default is worth showing.  ``-O3`` style (vLLM) is read
    as compilation_config.
    """
    # at call time: discovery imports this module while it loads, so a top-level import
    # of discovery here would be circular
    from infertop.probes.server.discovery import split_program

    how, prog, args = split_program(cmdline)
    if how == "exe" and prog == "" and not args:
        return {}
    if kind == "vllm":
        # vLLM's -O takes '-O3', '-O 3', '-O.level=3' forms
        extra: dict[str, str] = {}
        rest = []
        for a in args:
            m = re.match(r"^-O\.?(.+)$", a)
            if m:
                extra["compilation_config"] = m.group(1)
            else:
                rest.append(a)
        out, found = _settings_from(rest, _VLLM_VALUE, (
            "--enforce-eager", "--enable-prefix-caching", "--no-enable-prefix-caching",
            "--enable-chunked-prefill", "--no-enable-chunked-prefill", "--enable-lora",
            "--enable-sleep-mode"))
        out.update(extra)
        for flag, name in (("--enable-lora", "enable_lora"),
                           ("--enable-sleep-mode", "sleep_mode")):
            if flag in found:
                out[name] = "on"
        role = _vllm_disagg_role(out.get("kv_transfer_config"))
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
    if kind == "sglang":
        out, found = _settings_from(args, _SGLANG_VALUE, ("--disable-cuda-graph",
                                                            "--disable-radix-cache"))
        out["cuda_graphs"] = ("off (--disable-cuda-graph)" if "--disable-cuda-graph" in found
                              else "on (default)")
        if "--disable-radix-cache" in found:
            out["prefix_caching"] = "off (--disable-radix-cache)"
        if out.get("disagg_role") not in ("prefill", "decode"):
            out.pop("disagg_role", None)   # "null": a unified engine
        return out
    if kind == "llamacpp":
        rest, fa = [], None
        for i, a in enumerate(args):
            # -fa is a bare flag in older builds and takes on|off|auto in newer ones
            if a in ("-fa", "--flash-attn"):
                nxt = args[i + 1] if i + 1 < len(args) else ""
                fa = nxt if nxt in ("on", "off", "auto") else "on"
            elif a in ("on", "off", "auto") and i and args[i - 1] in ("-fa", "--flash-attn"):
                continue
            else:
                rest.append(a)
        out, found = _settings_from(rest, _LLAMA_VALUE, ("--cont-batching", "-cb",
                                                         "--no-cont-batching", "-nocb"))
        if fa is not None:
            out["flash_attn"] = fa
        if "--no-cont-batching" in found or "-nocb" in found:
            out["cont_batching"] = "off (--no-cont-batching)"
        elif "--cont-batching" in found or "-cb" in found:
            out["cont_batching"] = "on (--cont-batching)"
        else:
            out["cont_batching"] = "on (default)"
        # llama.cpp splits the context among its slots: what one request can use
        try:
            ctx, np_ = int(out["ctx_size"]), int(out.get("parallel", "1"))
            if ctx > 0 and np_ > 0:
                out["ctx_per_slot"] = str(ctx // np_)
        except (KeyError, ValueError):
            pass
        return out
    if kind == "tgi":
        out, _ = _settings_from(args, _TGI_VALUE)
        if out.get("cuda_graphs", "").strip() == "0":
            out["cuda_graphs"] = "off (--cuda-graphs 0)"
        return out
    if kind == "triton":
        out, _ = _settings_from(args, _TRITON_VALUE)
        return out
    return {}
