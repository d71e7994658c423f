"""NVIDIA Triton Inference Server (core ``nv_inference_*`` and the TensorRT-LLM backend's
``nv_trt_llm_*`` families): everything infertop knows about it (docs/metrics.md#triton;
facts in docs/reference/metrics.md section 5).

A module of its own, apart from trtllm.py: ``tritonserver`` and ``trtllm-serve`` are two
programs with their own /metrics pages (names, labels, suffixes), ports, flags and process
trees; only the engine underneath is shared.

Labels model, version.  Running/queued/KV from nv_trt_llm_* as llm-d's model-server
protocol names them (llm-d docs/architecture/core/model-servers.md @a628e04d).  The
fixture is written from that documentation, not captured
(tests/fixtures/metrics/triton-trtllm-documented.prom).
"""

from __future__ import annotations

from collections.abc import Sequence

from infertop.keys import SPECS
from infertop.model import Reading

from .flags import settings_from
from .mapping import Ctx, Dialect, gauge_configs
from .mapping import rule as _r
from .spec import ServerKind


def _triton_kv(ctx: Ctx) -> None:
    gauge_configs(ctx, (("nv_trt_llm_kv_cache_block_metrics", "num_gpu_blocks", "max"),
                        ("nv_trt_llm_kv_cache_block_metrics", "block_size", "tokens_per")))
    # no "fraction" sample: used / max blocks
    if any(k == "kv.usage_ratio" for k, _ in ctx.accs):
        return
    fam = ctx.by_name.get("nv_trt_llm_kv_cache_block_metrics")
    if fam is None:
        return
    used: dict[tuple, float] = {}
    most: dict[tuple, float] = {}
    for s in fam.samples:
        t = s.labels.get("kv_cache_block_type")
        lab = ctx.reading_labels(s.labels)
        if t == "used":
            used[lab] = used.get(lab, 0.0) + s.value
        elif t == "max":
            most[lab] = most.get(lab, 0.0) + s.value
    for lab, u in used.items():
        m = most.get(lab)
        if m:
            ctx.extra.append(Reading("kv.usage_ratio", u / m, SPECS["kv.usage_ratio"].unit, lab))


DIALECT = Dialect("triton", ("nv_inference_", "nv_trt_llm_"), "",
                  ("model", "model_name"), extras=(_triton_kv,),
                  extra_families=("nv_trt_llm_kv_cache_block_metrics",),
                  # a model version and the selector labels of its multi-purpose families
                  drop_labels=("version", "request_type", "kv_cache_block_type"),
                  # Triton core's nv_inference_* counters have no _total on the wire
                  bare_counter_prefixes=("nv_inference_",), rules=(
    _r("nv_trt_llm_request_metrics", "server.requests_running",
       select={"request_type": "scheduled"}),
    _r("nv_trt_llm_request_metrics", "server.requests_waiting",
       select={"request_type": "waiting"}),
    _r("nv_inference_pending_request_count", "server.requests_waiting",
       unless="nv_trt_llm_request_metrics"),
    _r("nv_trt_llm_kv_cache_block_metrics", "kv.usage_ratio", fraction=True,
       select={"kv_cache_block_type": "fraction"}),
    _r("nv_inference_request_success", "server.requests_finished_total",
       const={"reason": "success"}),
    _r("nv_inference_request_failure", "server.requests_finished_total",
       const={"reason": "error"}),
    _r("nv_inference_exec_count", "server.engine_steps_total"),
))


def _match_argv(how: str, prog: str, args: Sequence[str]) -> tuple[str, str] | None:
    return ("triton", "server") if how != "module" and prog == "tritonserver" else None


_VALUE = {"model_repository": ("--model-repository", "--model-store")}


def settings(args: list[str]) -> dict[str, str]:
    out, _ = settings_from(args, _VALUE)
    return out


KIND = ServerKind(
    name="triton", title="Triton", order=50, dialect=DIALECT,
    roles={"server": 2},
    match_argv=_match_argv, default_port=8000, port_flags=("--http-port",),
    settings=settings,
    python=False, preallocating=False,
    reference="docs/metrics.md#triton",
)
