"""llama.cpp's ``llama-server --metrics``: everything infertop knows about it
(docs/metrics.md#llamacpp; facts in docs/reference/metrics.md section 4).

No labels.  prompt_tokens excludes cached tokens, so the prefix-cache lookups are
processed + cached.  One process serves HTTP and runs the model (role "server").
"""

from __future__ import annotations

from collections.abc import Sequence

from .flags import settings_from
from .mapping import Dialect
from .mapping import rule as _r
from .spec import ServerKind

DIALECT = Dialect("llamacpp", ("llamacpp:",), "", (), rules=(
    _r("llamacpp:requests_processing", "server.requests_running"),
    _r("llamacpp:requests_deferred", "server.requests_waiting"),
    _r("llamacpp:kv_cache_usage_ratio", "kv.usage_ratio", fraction=True,
       since="older builds"),
    _r("llamacpp:prompt_tokens", "server.prompt_tokens_total"),
    # moves only when a request finishes (docs/reference/realserver-notes.md)
    _r("llamacpp:tokens_predicted", "server.generation_tokens_total", on_finish=True),
    _r(("llamacpp:prompt_tokens", "llamacpp:prompt_tokens_cached"),
       "kv.prefix_cache_queries_total"),
    _r("llamacpp:prompt_tokens_cached", "kv.prefix_cache_hits_total"),
    _r("llamacpp:n_decode", "server.engine_steps_total"),
    _r("llamacpp:spec_decode_num_drafts", "spec.drafts_total"),
    _r("llamacpp:spec_decode_num_draft_tokens", "spec.draft_tokens_total"),
    _r("llamacpp:spec_decode_num_accepted_tokens", "spec.accepted_tokens_total"),
))


def _match_argv(how: str, prog: str, args: Sequence[str]) -> tuple[str, str] | None:
    if how == "module":   # llama-cpp-python's server
        return ("llamacpp", "server") if prog.startswith("llama_cpp.server") else None
    return ("llamacpp", "server") if prog in ("llama-server", "llama-server.exe") else None


_VALUE = {
    "model": ("-m", "--model"),
    "parallel": ("-np", "--parallel"),
    "ctx_size": ("-c", "--ctx-size"),
    "threads": ("-t", "--threads"),
    "n_gpu_layers": ("-ngl", "--gpu-layers", "--n-gpu-layers"),
    "batch_size": ("-b", "--batch-size"),
    "ubatch_size": ("-ub", "--ubatch-size"),
    "cache_type_k": ("-ctk", "--cache-type-k"),
}


def settings(args: list[str]) -> dict[str, str]:
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
    out, found = settings_from(rest, _VALUE, ("--cont-batching", "-cb",
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


KIND = ServerKind(
    name="llamacpp", title="llama.cpp", order=40, dialect=DIALECT,
    roles={"server": 2},
    match_argv=_match_argv, default_port=8080, settings=settings,
    python=False, preallocating=False,   # C++; allocates its context as it is sized, no pool
    demo_render="infertop.demo.exposition:render_llamacpp",
    demo_health='{"status":"ok"}',
    start_time_header="Process-Start-Time-Unix",
    reference="docs/metrics.md#llamacpp",
)
