"""Speed of light: how close a server runs to what its GPUs can do.

The arithmetic only (pure; ``infertop.sol_derive`` applies it to History each tick):

- ``model_facts(config)``: parameters (total and, for mixture-of-experts, active per
  token), bytes per weight and KV-cache bytes per token from a Hugging Face
  ``config.json`` dict.  Norms and biases are left out (well under 0.1 % of a 7B model).
- ``decode_step``: the time one decode step needs at least.  Decode reads every weight
  once per step plus the KV cache of every running sequence, and does 2 FLOPs per active
  parameter per token; the step takes the longer of bytes / bandwidth and FLOPs / peak.
  Tokens per second at batch B is then at most B / step time: the roofline.
- ``mfu`` / ``mbu``: achieved FLOP/s and bytes/s over the GPU's peaks.

Worked example (tests/test_speedoflight.py): a 7B fp16 model (14 GB of weights) on one
H100 SXM (3.35 TB/s): batch 1 needs 14e9 / 3.35e12 = 4.18 ms per step, at most 239 tok/s;
batch 32 with 1000 tokens of context each also reads 32 x 1000 x 0.5 MiB = 16.8 GB of
KV: 9.18 ms per step, at most 3485 tok/s.  Both are memory-bound: 2 x 7e9 x 32 FLOPs
take 0.45 ms at 989 TFLOP/s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, overload

# bytes per element of the dtypes a config or a server flag names
DTYPE_BYTES = {"float32": 4.0, "fp32": 4.0, "float": 4.0, "bfloat16": 2.0, "bf16": 2.0,
               "float16": 2.0, "fp16": 2.0, "half": 2.0, "fp8": 1.0, "float8": 1.0,
               "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "int8": 1.0, "int4": 0.5}

# architectures whose MLP has no gate projection (two matrices, not three)
_UNGATED = ("gpt2", "gpt_neox", "gptj", "opt", "bloom", "falcon", "phi", "gpt_bigcode",
            "starcoder2")


@dataclass(frozen=True, slots=True)
class ModelFacts:
    params: float                    # all parameters
    active_params: float             # parameters used per token (MoE: top-k experts)
    weight_bytes: float
    kv_bytes_per_token: float
    dtype: str                       # what the weights are computed in
    architecture: str
    notes: tuple[str, ...] = ()


class ConfigError(ValueError):
    """The config lacks what the estimate needs (the reason is shown as is)."""


@overload
def _num(cfg: Mapping[str, Any], *names: str, default: float) -> float: ...
@overload
def _num(cfg: Mapping[str, Any], *names: str, default: None = None) -> float | None: ...


def _num(cfg: Mapping[str, Any], *names: str, default: float | None = None) -> float | None:
    """The first of ``names`` holding a non-negative number (a bool is not one), else
    ``default`` (a float default: the answer is always a float)."""
    for n in names:
        v = cfg.get(n)
        if isinstance(v, bool):
            continue
        if isinstance(v, (int, float)) and v >= 0:
            return float(v)
    return default


def dtype_bytes(dtype: str | None) -> float | None:
    if not dtype:
        return None
    d = dtype.strip().lower().replace("torch.", "")
    if d in DTYPE_BYTES:
        return DTYPE_BYTES[d]
    if d.startswith("fp8") or d.startswith("float8"):
        return 1.0
    return None


def model_facts(config: Mapping[str, Any], *, served_dtype: str | None = None,
                kv_cache_dtype: str | None = None) -> ModelFacts:
    """Parameters, weight bytes and KV bytes per token from a HF config.json dict.

    ``served_dtype`` is the server's --dtype (``auto`` or absent: the config's own);
    ``kv_cache_dtype`` its --kv-cache-dtype (``auto`` or absent: the compute dtype).
    Raises ConfigError when the shape is missing."""
    if not isinstance(config, Mapping):
        raise ConfigError("config.json is not a JSON object")
    notes: list[str] = []
    top = config
    text_config = config.get("text_config")
    cfg: Mapping[str, Any] = text_config if isinstance(text_config, Mapping) else config
    if cfg is not config:
        notes.append("language model part of a multimodal config (text_config)")
    hidden = _num(cfg, "hidden_size", "n_embd", "d_model")
    layers = _num(cfg, "num_hidden_layers", "n_layer", "num_layers")
    heads = _num(cfg, "num_attention_heads", "n_head", "num_heads")
    if not hidden or not layers or not heads:
        raise ConfigError("config.json has no hidden_size / num_hidden_layers / "
                          "num_attention_heads")
    kv_heads = _num(cfg, "num_key_value_heads", "num_kv_heads", "n_head_kv")
    if kv_heads is None:
        kv_heads = 1.0 if cfg.get("multi_query") else heads
    head_dim = _num(cfg, "head_dim", default=hidden / heads) or hidden / heads
    inter = _num(cfg, "intermediate_size", "ffn_dim", "n_inner", default=4 * hidden)
    vocab = _num(cfg, "vocab_size", default=0.0) or 0.0
    model_type = str(cfg.get("model_type") or top.get("model_type") or "")
    gated = not any(model_type == u or model_type.startswith(u + "_") for u in _UNGATED)
    mats = 3.0 if gated else 2.0
    tie = cfg.get("tie_word_embeddings", top.get("tie_word_embeddings", True))

    attn = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2  # q,o + k,v
    experts = _num(cfg, "num_local_experts", "num_experts", "n_routed_experts")
    if experts and experts > 1:
        top_k = _num(cfg, "num_experts_per_tok", "moe_top_k", default=2.0) or 2.0
        moe_inter = _num(cfg, "moe_intermediate_size", default=inter) or inter
        shared = _num(cfg, "n_shared_experts", "num_shared_experts", default=0.0) or 0.0
        expert = mats * hidden * moe_inter
        mlp_all = experts * expert + shared * expert + hidden * experts
        mlp_active = top_k * expert + shared * expert + hidden * experts
        notes.append(f"mixture of experts: {experts:.0f} experts, {top_k:.0f} per token")
    else:
        mlp_all = mlp_active = mats * hidden * inter
    emb = vocab * hidden * (1.0 if tie else 2.0)
    params = layers * (attn + mlp_all) + emb
    active = layers * (attn + mlp_active) + emb

    cfg_dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or top.get("torch_dtype")
                    or top.get("dtype") or "")
    dtype = served_dtype if served_dtype and served_dtype.lower() != "auto" else cfg_dtype
    compute_bytes = dtype_bytes(dtype)
    if compute_bytes is None:
        compute_bytes = 2.0
        notes.append(f"dtype {dtype or 'not given'}: assumed 16-bit")
        dtype = dtype or "bfloat16"
    weight_bpp = compute_bytes
    q = top.get("quantization_config") or cfg.get("quantization_config")
    if isinstance(q, Mapping):
        bits = _num(q, "bits", "w_bit", "weight_bits")
        method = str(q.get("quant_method") or "")
        if bits:
            weight_bpp = bits / 8
        elif "fp8" in method:
            weight_bpp = 1.0
        notes.append(f"quantized weights ({method or 'quantization_config'}): "
                     f"{weight_bpp:g} bytes per weight")
    kv_bytes = dtype_bytes(kv_cache_dtype) if kv_cache_dtype and \
        kv_cache_dtype.lower() != "auto" else None
    if kv_bytes is None:
        kv_bytes = compute_bytes
    kv_per_token = 2 * layers * kv_heads * head_dim * kv_bytes
    arch = cfg.get("architectures") or top.get("architectures") or [model_type or "unknown"]
    arch_name = str(arch[0]) if isinstance(arch, list) and arch else str(arch)
    return ModelFacts(params, active, params * weight_bpp, kv_per_token, dtype,
                      arch_name[:80], tuple(notes))


@dataclass(frozen=True, slots=True)
class Step:
    seconds: float                   # the least time one decode step takes, per GPU
    bytes: float                     # bytes each GPU reads per step
    flops: float                     # FLOPs each GPU does per step
    bound: str                       # "memory" or "compute"

    def tokens_per_second(self, batch: float) -> float:
        return batch / self.seconds if self.seconds > 0 else 0.0


def decode_step(*, weight_bytes: float, kv_bytes_per_token: float, active_params: float,
                batch: float, context_tokens: float, gpus: int, bandwidth: float,
                peak_flops: float | None) -> Step:
    """The bandwidth (and compute) bound of one decode step of ``batch`` sequences with
    ``context_tokens`` each, split over ``gpus`` tensor/pipeline-parallel GPUs."""
    n = max(1, gpus)
    bytes_ = (weight_bytes + batch * context_tokens * kv_bytes_per_token) / n
    flops = 2.0 * active_params * batch / n
    t_mem = bytes_ / bandwidth
    t_cmp = flops / peak_flops if peak_flops else 0.0
    return Step(max(t_mem, t_cmp), bytes_, flops, "compute" if t_cmp > t_mem else "memory")


def estimated_flops_per_gpu(*, active_params: float, tokens_per_second: float,
                            gpus: int) -> float:
    """Model FLOP/s per GPU: 2 FLOPs per active parameter per token (prefill and decode);
    attention's own FLOPs are left out (small next to the weights below ~8k context)."""
    return 2.0 * active_params * tokens_per_second / max(1, gpus)


def estimated_bytes_per_gpu(*, weight_bytes: float, kv_bytes_per_token: float,
                            steps_per_second: float, generation_tokens_per_second: float,
                            context_tokens: float, gpus: int) -> float:
    """Bytes/s per GPU: every step reads the weights once; every generated token reads
    its sequence's KV cache."""
    return (steps_per_second * weight_bytes +
            generation_tokens_per_second * context_tokens * kv_bytes_per_token) / max(1, gpus)


def utilisation(achieved: float, peak: float | None) -> float | None:
    if not peak or peak <= 0:
        return None
    return max(0.0, achieved / peak)
