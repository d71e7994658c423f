"""A scenario SimFrame as the /metrics text a real server would serve, in four dialects.

Names, labels, counter suffixes and number formats follow each server (docs/metrics.md#exposition and each server's section):
vLLM and SGLang render through prometheus_client (``_total`` counters, ``_created`` samples
in vLLM's single-process mode, Go-style float formatting), llama.cpp prints plain numbers
and no labels, TGI's Rust exporter prints counters without ``_total``.  The demo source
and the demo server both parse this text with the same dialect mapper as live scrapes.
"""

from __future__ import annotations

import bisect
import functools
import importlib
import math
import sys

from infertop.demo.hist import Hist, linear_buckets, tgi_duration_buckets
from infertop.demo.sim import EngineView, SimFrame
from infertop.servers import registry

VLLM_HIST = (
    ("request_prompt_tokens", "prompt_len", "Number of prefill tokens processed."),
    ("request_generation_tokens", "gen_len", "Number of generation tokens processed."),
    ("iteration_tokens_total", "iteration", "Histogram of number of tokens per engine_step."),
    ("time_to_first_token_seconds", "ttft", "Histogram of time to first token in seconds."),
    ("inter_token_latency_seconds", "itl", "Histogram of inter-token latency in seconds."),
    ("request_time_per_output_token_seconds", "tpot",
     "Histogram of time_per_output_token_seconds per request."),
    ("e2e_request_latency_seconds", "e2e", "Histogram of e2e request latency in seconds."),
    ("request_queue_time_seconds", "queue",
     "Histogram of time spent in WAITING phase for request."),
    ("request_inference_time_seconds", "inference",
     "Histogram of time spent in RUNNING phase for request."),
    ("request_prefill_time_seconds", "prefill",
     "Histogram of time spent in PREFILL phase for request."),
    ("request_decode_time_seconds", "decode",
     "Histogram of time spent in DECODE phase for request."),
)


def go_float(d: float) -> str:
    """prometheus_client's floatToGoString: how vLLM and SGLang print every number."""
    d = float(d)
    if 0 <= d < 1e6 and d.is_integer():
        return f"{int(d)}.0"   # the common case (counts), same text as the slow path
    if d == math.inf:
        return "+Inf"
    if d == -math.inf:
        return "-Inf"
    if math.isnan(d):
        return "NaN"
    s = repr(d)
    dot = s.find(".")
    if d > 0 and dot > 6:
        mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1:]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return s


def _plain(d: float) -> str:
    """llama.cpp / Rust style: integers without a decimal point."""
    d = float(d)
    if d.is_integer() and abs(d) < 1e15:
        return str(int(d))
    return f"{d:.6g}"


class _Text:
    def __init__(self, fmt=go_float) -> None:
        self.lines: list[str] = []
        self.fmt = fmt

    def family(self, name: str, typ: str, help: str) -> None:
        self.lines.append(f"# HELP {name} {help}")
        self.lines.append(f"# TYPE {name} {typ}")

    def sample(self, name: str, labels: dict[str, str], value: float,
               sort: bool = True) -> None:
        if labels:
            items = sorted(labels.items()) if sort else labels.items()
            lab = ",".join(f'{k}="{_esc(v)}"' for k, v in items)
            self.lines.append(f"{name}{{{lab}}} {self.fmt(value)}")
        else:
            self.lines.append(f"{name} {self.fmt(value)}")

    def hist(self, name: str, labels: dict[str, str], h: Hist, sort: bool = True,
             bounds_fmt=go_float) -> None:
        heads = _bucket_heads(f"{name}_bucket", tuple(labels.items()), h.bounds, sort,
                              bounds_fmt)
        fmt = self.fmt
        self.lines.extend(f"{head} {fmt(c)}" for head, (_, c) in zip(heads, h.cumulative()))
        self.sample(f"{name}_count", labels, float(h.total), sort)
        self.sample(f"{name}_sum", labels, h.sum, sort)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


@functools.lru_cache(maxsize=512)
def _bucket_heads(name: str, items: tuple, bounds: tuple, sort: bool, bounds_fmt) -> tuple:
    """'name{labels,le="..."}' for every bucket of a histogram: the same every tick."""
    out = []
    for le in bounds + (math.inf,):
        lab = dict(items)
        lab["le"] = bounds_fmt(le)
        pairs = sorted(lab.items()) if sort else lab.items()
        out.append(name + "{" + ",".join(f'{k}="{_esc(v)}"' for k, v in pairs) + "}")
    return tuple(out)


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render(frame: SimFrame, dialect: str | None = None) -> str:
    """The exposition text of ``frame``'s server in ``dialect`` (default: the frame's kind).

    Which function renders a server kind is the kind's ``demo_render`` (infertop/servers):
    the renderers below, or one a new kind's module points at."""
    d = dialect or frame.kind
    if d == "dcgm":
        return render_dcgm(frame)
    k = registry.kind(d)
    if k is None or not k.demo_render:
        raise ValueError(f"unknown dialect '{d}' "
                         f"({', '.join((*registry.demo_kinds(), 'dcgm'))})")
    return _renderer(k.demo_render)(frame)


def _renderer(pointer: str):
    """'module:function' -> the function (this module's own without an import)."""
    module, _, name = pointer.partition(":")
    mod = sys.modules[__name__] if module == __name__ else importlib.import_module(module)
    return getattr(mod, name)


def _uptime(frame: SimFrame) -> float:
    return max(0.0, frame.time - frame.start_time)


def _api_proc(frame: SimFrame):
    return next((p for p in frame.procs if p.ppid == 1 or p.role in ("api_server", "router",
                                                                      "server")), None)


# ---- vLLM 0.33 -------------------------------------------------------------------------
def render_vllm(frame: SimFrame) -> str:
    t = _Text()
    model = frame.model
    created = frame.start_time + 28.5  # engines register their metrics after loading
    api = _api_proc(frame)
    t.family("python_info", "gauge", "Python platform information")
    t.sample("python_info", {"implementation": "CPython", "major": "3", "minor": "12",
                             "patchlevel": "3", "version": "3.12.3"}, 1.0, sort=False)
    t.family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.")
    t.sample("process_virtual_memory_bytes", {}, 9.8e9)
    t.family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.")
    t.sample("process_resident_memory_bytes", {}, api.rss if api else 7.5e8)
    t.family("process_start_time_seconds", "gauge",
             "Start time of the process since unix epoch in seconds.")
    t.sample("process_start_time_seconds", {}, round(frame.start_time, 2))
    t.family("process_cpu_seconds_total", "counter",
             "Total user and system CPU time spent in seconds.")
    t.sample("process_cpu_seconds_total", {}, round(_uptime(frame) * 0.21 + 12.0, 2))
    t.family("process_open_fds", "gauge", "Number of open file descriptors.")
    t.sample("process_open_fds", {}, 64.0)
    t.family("process_max_fds", "gauge", "Maximum number of open file descriptors.")
    t.sample("process_max_fds", {}, 1048576.0)

    def lab(e: EngineView, **more: str) -> dict[str, str]:
        return {"engine": str(e.index), "model_name": model, **more}

    engines = frame.engines
    t.family("vllm:num_requests_running", "gauge",
             "Number of requests in model execution batches.")
    for e in engines:
        t.sample("vllm:num_requests_running", lab(e), float(e.running))
    t.family("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.")
    for e in engines:
        t.sample("vllm:num_requests_waiting", lab(e), float(e.waiting))
    t.family("vllm:num_requests_waiting_by_reason", "gauge",
             "Number of requests waiting to be processed, by reason.")
    for e in engines:
        t.sample("vllm:num_requests_waiting_by_reason", lab(e, reason="capacity"),
                 float(e.waiting))
        t.sample("vllm:num_requests_waiting_by_reason", lab(e, reason="deferred"), 0.0)
    t.family("vllm:engine_sleep_state", "gauge", "Engine sleep state; awake = 0 means engine "
             "is sleeping; awake = 1 means engine is awake.")
    for e in engines:
        for st, v in (("awake", 1.0), ("weights_offloaded", 0.0), ("discard_all", 0.0)):
            t.sample("vllm:engine_sleep_state", lab(e, sleep_state=st), v)
    t.family("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.")
    for e in engines:
        t.sample("vllm:kv_cache_usage_perc", lab(e), e.kv_usage)

    def counter(name: str, help: str, values) -> None:
        t.family(f"{name}_total", "counter", help)
        for labels, v in values:
            t.sample(f"{name}_total", labels, float(v))
        t.family(f"{name}_created", "gauge", help)
        for labels, _ in values:
            t.sample(f"{name}_created", labels, created)

    counter("vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
            [(lab(e), e.counters["prefix_queries"]) for e in engines])
    counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
            [(lab(e), e.counters["prefix_hits"]) for e in engines])
    counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
            [(lab(e), e.counters["preemptions"]) for e in engines])
    counter("vllm:prompt_tokens", "Number of prefill tokens processed.",
            [(lab(e), e.counters["prompt_tokens"]) for e in engines])
    by_source = []
    for e in engines:
        cached = e.counters["prompt_cached"]
        moved = e.counters.get("prompt_external", 0.0)
        by_source += [(lab(e, source="local_compute"),
                       e.counters["prompt_tokens"] - cached - moved),
                      (lab(e, source="local_cache_hit"), cached),
                      (lab(e, source="external_kv_transfer"), moved)]
    counter("vllm:prompt_tokens_by_source", "Number of prompt tokens by source.", by_source)
    counter("vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).",
            [(lab(e), e.counters["prompt_cached"]) for e in engines])
    counter("vllm:generation_tokens", "Number of generation tokens processed.",
            [(lab(e), e.counters["generation_tokens"]) for e in engines])
    success = []
    for e in engines:
        for reason in ("stop", "length", "abort", "error", "repetition"):
            success.append((lab(e, finished_reason=reason), e.finished.get(reason, 0.0)))
    counter("vllm:request_success", "Count of successfully processed requests.", success)
    if frame.setup["spec_tokens"]:
        counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.",
                [(lab(e), e.counters["spec_drafts"]) for e in engines])
        counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.",
                [(lab(e), e.counters["spec_draft_tokens"]) for e in engines])
        counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.",
                [(lab(e), e.counters["spec_accepted"]) for e in engines])
    flops, reads, writes = zip(*[_mfu_estimates(frame, e) for e in engines]) if engines \
        else ((), (), ())
    # on vLLM 0.32's page without --enable-mfu-metrics too, at 0 (docs/metrics.md#mfu)
    counter("vllm:estimated_flops_per_gpu", "Estimated number of floating point operations "
            "per GPU (for Model Flops Utilization calculations).",
            [(lab(e), v) for e, v in zip(engines, flops)])
    counter("vllm:estimated_read_bytes_per_gpu", "Estimated number of bytes read from memory "
            "per GPU (for Model Flops Utilization calculations).",
            [(lab(e), v) for e, v in zip(engines, reads)])
    counter("vllm:estimated_write_bytes_per_gpu", "Estimated number of bytes written to "
            "memory per GPU (for Model Flops Utilization calculations).",
            [(lab(e), v) for e, v in zip(engines, writes)])
    for name, key, help in VLLM_HIST:
        t.family(f"vllm:{name}", "histogram", help)
        for e in engines:
            t.hist(f"vllm:{name}", lab(e), e.hists[key])
        t.family(f"vllm:{name}_created", "gauge", help)
        for e in engines:
            t.sample(f"vllm:{name}_created", lab(e), created)
    if "kv_transfer_config" in frame.setup["settings"]:
        # --kv-transfer-config with the NixlConnector: vLLM's NixlPromMetrics, per engine
        for name, key, help in (
                ("nixl_xfer_time_seconds", "kv_xfer",
                 "Histogram of transfer duration for NIXL KV Cache transfers."),
                ("nixl_bytes_transferred", "kv_bytes",
                 "Histogram of bytes transferred per NIXL KV Cache transfers.")):
            t.family(f"vllm:{name}", "histogram", help)
            for e in engines:
                t.hist(f"vllm:{name}", lab(e), e.hists[key])
        counter("vllm:nixl_num_failed_transfers",
                "Number of failed NIXL KV Cache transfers.", [(lab(e), 0.0) for e in engines])
    s = frame.setup
    t.family("vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig")
    for e in engines:
        blocks = int(s["kv_capacity_tokens"]) // int(s["block_size"])
        t.sample("vllm:cache_config_info", {
            "block_size": str(s["block_size"]), "cache_dtype": "auto",
            "enable_prefix_caching": "True", "engine": str(e.index),
            "gpu_memory_utilization": str(s["gpu_memory_utilization"]),
            "kv_cache_size_tokens": str(s["kv_capacity_tokens"]),
            "num_cpu_blocks": "None", "num_gpu_blocks": str(blocks),
            "sliding_window": "None"}, 1.0)
    return t.text()


def _mfu_estimates(frame: SimFrame, e: EngineView) -> tuple[float, float, float]:
    """What vLLM's --enable-mfu-metrics counts, per GPU (0 when the scenario's server runs
    without the flag): 2 FLOPs per active parameter per token; every engine step reads the
    weights, every generated token its sequence's KV cache; KV is written once per token."""
    s = frame.setup
    if not s["mfu_metrics"]:
        return 0.0, 0.0, 0.0
    gpus = max(1, len(e.gpus))
    active = (s["active_params_b"] or s["model_params_b"]) * 1e9
    tokens = e.counters["prompt_tokens"] + e.counters["generation_tokens"]
    steps = e.hists["iteration"].total
    prompt = e.hists["prompt_len"]
    context = prompt.sum / prompt.total if prompt.total else 0.0
    kv = float(s["kv_bytes_per_token"])
    reads = steps * s["weights_gib"] * 2**30 + e.counters["generation_tokens"] * context * kv
    return 2 * active * tokens / gpus, reads / gpus, tokens * kv / gpus


# ---- SGLang 0.5 ------------------------------------------------------------------------
def render_sglang(frame: SimFrame) -> str:
    t = _Text()
    model = frame.model
    dp = len(frame.engines) > 1

    def sched(e: EngineView) -> dict[str, str]:
        d = {"engine_type": "unified", "model_name": model, "moe_ep_rank": "0", "pp_rank": "0",
             "tp_rank": "0"}
        if dp:
            d["dp_rank"] = str(e.index)
        return d

    tok = {"engine_type": "unified", "model_name": model}
    engines = frame.engines
    gauges = (
        ("sglang:num_running_reqs", "The number of running requests.", lambda e: e.running),
        ("sglang:num_queue_reqs", "The number of requests in the waiting queue.",
         lambda e: e.waiting),
        ("sglang:token_usage", "The token usage.", lambda e: e.kv_usage),
        ("sglang:num_used_tokens", "The number of used tokens.",
         lambda e: round(e.kv_usage * frame.setup["kv_capacity_tokens"])),
        ("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.",
         lambda e: float(frame.setup["kv_capacity_tokens"])),
        ("sglang:gen_throughput", "The generation throughput (token/s).", lambda e: e.gen_rate),
        ("sglang:cache_hit_rate", "The prefix cache hit rate.", lambda e: e.hit_rate),
    )
    for name, help, f in gauges:
        t.family(name, "gauge", help)
        for e in engines:
            t.sample(name, sched(e), float(f(e)))
    if frame.setup["spec_tokens"]:
        t.family("sglang:spec_accept_rate", "gauge", "The average acceptance rate of drafts.")
        for e in engines:
            t.sample("sglang:spec_accept_rate", sched(e), e.spec_accept)
        t.family("sglang:spec_accept_length", "gauge",
                 "The average acceptance length of speculative decoding.")
        for e in engines:
            t.sample("sglang:spec_accept_length", sched(e),
                     1.0 + e.spec_accept * frame.setup["spec_tokens"])
    t.family("sglang:num_retracted_requests_total", "counter",
             "Total number of retracted (preempted) requests.")
    for e in engines:
        t.sample("sglang:num_retracted_requests_total", sched(e), e.counters["preemptions"])
    # the scheduler's live token counter (0.5.23): the tokenizer's counters below move only
    # when a request finishes on a real server; this one moves while the work is done
    t.family("sglang:realtime_tokens_total", "counter",
             "Total number of tokens processed (updated on each log interval). mode: "
             "prefill_compute, prefill_cache, decode.")
    for e in engines:
        c = e.counters
        for mode, v in (("prefill_compute", c["prompt_tokens"] - c["prompt_cached"]),
                        ("decode", c["generation_tokens"]),
                        ("prefill_cache", c["prompt_cached"])):
            t.sample("sglang:realtime_tokens_total", {**sched(e), "mode": mode}, max(0.0, v))
    t.family("sglang:queue_time_seconds", "histogram",
             "Histogram of queueing time in seconds.")
    for e in engines:
        t.hist("sglang:queue_time_seconds", sched(e), e.hists["queue"])

    def total(key: str) -> float:
        return sum(e.counters[key] for e in engines)

    def fin(reason: str) -> float:
        return sum(e.finished.get(reason, 0.0) for e in engines)

    counters = (
        ("sglang:prompt_tokens_total", "Number of prefill tokens processed.",
         total("prompt_tokens")),
        ("sglang:generation_tokens_total", "Number of generation tokens processed.",
         total("generation_tokens")),
        ("sglang:cached_tokens_total", "Number of cached prompt tokens.",
         total("prompt_cached")),
        ("sglang:num_requests_total", "Number of requests processed.",
         sum(fin(r) for r in ("stop", "length", "abort", "error"))),
        ("sglang:num_aborted_requests_total", "Number of requests aborted.", fin("abort")),
    )
    for name, help, v in counters:
        t.family(name, "counter", help)
        t.sample(name, tok, v)
    if frame.setup["spec_tokens"]:
        t.family("sglang:spec_verify_calls_total", "counter", "Number of verify calls.")
        t.sample("sglang:spec_verify_calls_total", tok, total("spec_drafts"))
    t.family("sglang:http_responses_total", "counter", "Total number of HTTP responses.")
    ok = sum(fin(r) for r in ("stop", "length", "abort"))
    for code, v in (("200", ok), ("500", fin("error"))):
        t.sample("sglang:http_responses_total", {"endpoint": "/v1/chat/completions",
                                                 "method": "POST", "status_code": code}, v)
    merged = {key: _merge([e.hists[key] for e in engines])
              for key in ("ttft", "itl", "tpot", "e2e")}
    for name, key, help in (
            ("sglang:time_to_first_token_seconds", "ttft",
             "Histogram of time to first token in seconds."),
            ("sglang:inter_token_latency_seconds", "itl",
             "Histogram of inter-token latency in seconds."),
            ("sglang:request_time_per_output_token_seconds", "tpot",
             "Histogram of time per output token in seconds."),
            ("sglang:e2e_request_latency_seconds", "e2e",
             "Histogram of End-to-end request latency in seconds")):
        t.family(name, "histogram", help)
        t.hist(name, tok, merged[key])
    return t.text()


def _merge(hs: list[Hist]) -> Hist:
    if len(hs) == 1:
        return hs[0]
    out = Hist(hs[0].bounds)
    for h in hs:
        out.counts = [a + b for a, b in zip(out.counts, h.counts)]
        out.total += h.total
        out.sum += h.sum
    return out


# ---- llama.cpp llama-server --metrics -----------------------------------------------------
def render_llamacpp(frame: SimFrame) -> str:
    t = _Text(_plain)
    engines = frame.engines

    def total(key: str) -> float:
        return sum(e.counters[key] for e in engines)

    cached = total("prompt_cached")
    steps = total("engine_steps")
    running = sum(e.running for e in engines)
    rows = (
        ("prompt_tokens_total", "counter",
         "Number of prompt tokens processed, excluding cached tokens",
         total("prompt_tokens") - cached),
        ("prompt_tokens_cached_total", "counter", "Number of prompt tokens reused from the cache",
         cached),
        ("prompt_seconds_total", "counter", "Total time spent processing prompts",
         round(total("prompt_seconds"), 6)),
        ("tokens_predicted_total", "counter", "Number of generation tokens processed",
         total("generation_tokens")),
        ("tokens_predicted_seconds_total", "counter", "Total time spent generating tokens",
         round(total("gen_seconds"), 3)),
        ("n_decode_total", "counter", "Total number of llama_decode() calls, excluding "
         "speculative decoding and multimodal decoding", steps),
        ("n_tokens_max", "counter", "Largest observed sequence length (prompt + generation)",
         max((e.max_tokens_seen for e in engines), default=0.0)),
        ("spec_decode_num_draft_tokens_total", "counter",
         "Speculative: Total draft tokens generated", total("spec_draft_tokens")),
        ("spec_decode_num_accepted_tokens_total", "counter",
         "Speculative: Total draft tokens accepted by the target model", total("spec_accepted")),
        ("spec_decode_num_drafts_total", "counter",
         "Speculative: Total speculative decoding verification steps", total("spec_drafts")),
        ("prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s",
         round(sum(e.prompt_rate for e in engines), 2)),
        ("predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s",
         round(sum(e.gen_rate for e in engines), 2)),
        ("requests_processing", "gauge", "Number of requests processing", running),
        ("requests_deferred", "gauge", "Number of requests deferred",
         sum(e.waiting for e in engines)),
        ("n_busy_slots_per_decode", "gauge",
         "Average number of busy slots per llama_decode() call", round(float(running), 4)),
    )
    for name, typ, help, v in rows:
        t.family(f"llamacpp:{name}", typ, help)
        t.sample(f"llamacpp:{name}", {}, float(v))
    return t.text()


# ---- Hugging Face TGI --------------------------------------------------------------------
_TGI_DUR = tgi_duration_buckets()


def render_tgi(frame: SimFrame) -> str:
    t = _Text(_plain)
    engines = frame.engines
    s = frame.setup

    def fin(reason: str) -> float:
        return sum(e.finished.get(reason, 0.0) for e in engines)

    ok = fin("stop") + fin("length")
    done = ok + fin("abort") + fin("error")
    t.lines.append("# TYPE tgi_request_count counter")
    t.sample("tgi_request_count", {}, done)
    t.lines.append("# TYPE tgi_request_success counter")
    t.sample("tgi_request_success", {}, ok)
    t.lines.append("# TYPE tgi_request_failure counter")
    t.sample("tgi_request_failure", {"err": "generation"}, fin("error"), sort=False)
    t.sample("tgi_request_failure", {"err": "dropped"}, fin("abort"), sort=False)
    t.lines.append("# TYPE tgi_queue_size gauge")
    t.sample("tgi_queue_size", {}, float(sum(e.waiting for e in engines)))
    t.lines.append("# TYPE tgi_batch_current_size gauge")
    t.sample("tgi_batch_current_size", {}, float(sum(e.running for e in engines)))
    t.lines.append("# TYPE tgi_batch_current_max_tokens gauge")
    t.sample("tgi_batch_current_max_tokens", {},
             float(round(sum(e.kv_usage for e in engines) / len(engines)
                         * s["kv_capacity_tokens"])))
    t.lines.append("# TYPE tgi_batch_inference_count counter")
    t.sample("tgi_batch_inference_count", {"method": "decode"},
             sum(e.counters["engine_steps"] for e in engines))
    t.sample("tgi_batch_inference_count", {"method": "prefill"},
             sum(e.hists["prefill"].total for e in engines))
    hists = (
        ("tgi_request_duration", "e2e", _TGI_DUR),
        ("tgi_request_queue_duration", "queue", _TGI_DUR),
        ("tgi_request_inference_duration", "inference", _TGI_DUR),
        ("tgi_request_mean_time_per_token_duration", "tpot", _TGI_DUR),
        ("tgi_request_input_length", "prompt_len", linear_buckets(float(s["max_model_len"]))),
        ("tgi_request_generated_tokens", "gen_len", linear_buckets(float(s["max_model_len"]))),
    )
    for name, key, bounds in hists:
        h = _rebucket([e.hists[key] for e in engines], bounds)
        t.lines.append(f"# TYPE {name} histogram")
        t.hist(name, {}, h, bounds_fmt=_plain)
    return t.text()


def _rebucket(hs: list[Hist], bounds) -> Hist:
    """Move counts onto another server's bucket bounds (each old bucket at its upper bound)."""
    out = Hist(bounds)
    for h in hs:
        for b, c in zip(h.bounds + (math.inf,), h.counts):
            if c:
                out.counts[bisect.bisect_left(out.bounds, b)] += c
        out.total += h.total
        out.sum += h.sum
    return out


# ---- NVIDIA dcgm-exporter (docs/metrics.md#dcgm) ------------------------------------------
# (name, type, help, value of a GpuView, factor to the exported unit); the PROF fields are
# only on GPUs with GPM (Hopper+), as dcgm-exporter only exports what DCGM collects.
_DCGM_DEV = (
    ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", "sm_clock", 1e-6),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "temp", 1.0),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "power", 1.0),
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "util", 100.0),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "mem_used", 1.0 / (1 << 20)),
)
_DCGM_PROF = (
    ("DCGM_FI_PROF_SM_ACTIVE", "The ratio of cycles an SM has at least 1 warp assigned.",
     "sm_active"),
    ("DCGM_FI_PROF_SM_OCCUPANCY", "The ratio of number of warps resident on an SM.",
     "occupancy"),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
     "Ratio of cycles the tensor (HMMA) pipe is active.", "tensor"),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "Ratio of cycles the device memory interface is active.",
     "dram"),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "The rate of data transmitted over the PCIe bus.",
     "pcie_tx"),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "The rate of data received over the PCIe bus.", "pcie_rx"),
)


def render_dcgm(frame: SimFrame, hostname: str = "demo-node") -> str:
    """What dcgm-exporter 3.x serves for the frame's GPUs: gauges with ``gpu``, ``UUID``,
    ``device``, ``modelName``, ``Hostname`` and ``pci_bus_id`` labels; a lost GPU is absent
    (the exporter stops exporting it); the Xid gauge only after an Xid."""
    from infertop.demo.readings import gpu_uuid

    t = _Text(fmt=_plain)
    s = frame.setup
    gpus = [g for g in frame.gpus if not g.lost]

    def lab(g) -> dict[str, str]:
        return {"gpu": str(g.index), "UUID": gpu_uuid(g.index), "device": f"nvidia{g.index}",
                "modelName": str(s["gpu_name"]), "Hostname": hostname,
                "pci_bus_id": f"00000000:{0x18 + 0x10 * g.index:02X}:00.0"}

    for name, help, field, factor in _DCGM_DEV:
        t.family(name, "gauge", help)
        for g in gpus:
            t.sample(name, lab(g), round(g.values[field] * factor, 3))
    t.family("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).")
    for g in gpus:
        free = (g.values["mem_total"] - g.values["mem_used"]) / (1 << 20)
        t.sample("DCGM_FI_DEV_FB_FREE", lab(g), round(max(0.0, free)))
    xid = [g for g in gpus if g.xid_total]
    if xid:
        t.family("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.")
        for g in xid:
            t.sample("DCGM_FI_DEV_XID_ERRORS", {**lab(g), "err_code": str(g.xid_last),
                                                "err_msg": "Graphics Engine Exception"},
                     float(g.xid_last))
    if s["gpm"]:
        for name, help, field in _DCGM_PROF:
            t.family(name, "gauge", help)
            for g in gpus:
                v = g.values[field]
                t.sample(name, lab(g), round(v) if "PCIE" in name else round(v, 6))
    return t.text()
