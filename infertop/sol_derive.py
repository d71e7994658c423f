"""Speed-of-light readings each tick: GPU peaks, MFU, MBU and the decode roofline.

Inputs, all from History (raw readings only, so a recording is re-derived by today's code):
NVML's GPU name, bus width, max clocks, CUDA cores and compute capability (peaks,
infertop.peaks); the engine's ``estimated_*_per_gpu`` counters when they count (source 1);
else the model's shape from config.json (``model.*``) with the token rates (source 2);
the running batch and the mean prompt and generation lengths (roofline).

Every value's ``reason`` says where it came from, every missing one why it is missing.
Values are per GPU of one server engine: the engines' counters are per-GPU averages, and
the estimate splits the model over tensor_parallel_size x pipeline_parallel_size GPUs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from .history import History, Series
from .keys import SPECS
from .model import Labels, Reading, Status, make_labels
from .peaks import dtype_family, peak_bandwidth, peak_flops
from .speedoflight import (
    decode_step,
    estimated_bytes_per_gpu,
    estimated_flops_per_gpu,
    utilisation,
)
from .units import fmt_si

PEAK_KEYS = ("gpu.peak_flops", "gpu.peak_mem_bandwidth_bytes_per_second")
SERVER_COUNTERS = ("server.estimated_flops_per_gpu_total",
                   "server.estimated_read_bytes_per_gpu_total",
                   "server.estimated_write_bytes_per_gpu_total")


def _reading(key: str, labels: Labels, value: float | None, reason: str = "") -> Reading:
    status = Status.OK if value is not None else Status.NODATA
    return Reading(key, value, SPECS[key].unit, labels, status, reason[:300])


def _settings(history: History) -> dict[str, str]:
    out: dict[str, str] = {}
    for s in history.find("server.setting"):
        name = s.label("name")
        if name and s.text is not None and name not in out:
            out[name] = s.text
    return out


def _int_setting(settings: dict[str, str], name: str) -> int:
    m = re.match(r"\s*(\d+)", settings.get(name, ""))
    return max(1, int(m.group(1))) if m else 1


def _model(history: History) -> dict:
    """The model facts (first model seen), or {"why": reason}."""
    got: dict = {}
    for key in ("model.params", "model.active_params", "model.weight_bytes",
                "model.kv_bytes_per_token"):
        for s in history.find(key):
            v = s.last()
            if v is not None and s.status is Status.OK:
                got[key] = v
                break
            got.setdefault("why", s.reason)
    for s in history.find("model.info"):
        got["dtype"] = s.label("dtype")
        break
    return got


def compute_dtype(settings: dict[str, str], model: dict) -> str:
    """The dtype family the GEMMs run in: fp8 when the weights are fp8 (W8A8), else the
    model's dtype, else the server's --dtype."""
    if "fp8" in settings.get("quantization", "").lower():
        return "fp8"
    return dtype_family(model.get("dtype") or settings.get("dtype"))


@lru_cache(maxsize=1024)
def _gpu_labels(gpu: str, dtype: str | None) -> Labels:
    """gpu_peaks' labels (gpu=, and dtype= for the FLOPs), the same every tick: memoised."""
    return make_labels(gpu=gpu) if dtype is None else make_labels(gpu=gpu, dtype=dtype)


def gpu_peaks(history: History, family: str) -> tuple[list[Reading], dict[str, tuple]]:
    out: list[Reading] = []
    peaks: dict[str, tuple] = {}
    gpus = history.find("gpu.info")
    if not gpus:
        return out, peaks
    # each input for every GPU in one pass a key (history.latest per GPU and key was 40
    # lookups a tick on 8 GPUs)
    cores, sm_max, bus, mem_max = (history.latest_by(key, "gpu") for key in (
        "gpu.cuda_cores", "gpu.sm_clock_max_hz", "gpu.mem_bus_width_bits",
        "gpu.mem_clock_max_hz"))
    ccs: dict[str, str] = {}
    for c in history.find("gpu.compute_capability"):
        if c.text:
            ccs.setdefault(c.label("gpu"), c.text)
    for s in gpus:
        g = s.label("gpu")
        if not g or s.status not in (Status.OK, Status.STALE):
            continue  # a lost GPU has no peak worth showing
        pf = peak_flops(s.text, family, compute_capability=ccs.get(g),
                        cuda_cores=cores.get(g), sm_clock_max_hz=sm_max.get(g))
        pb = peak_bandwidth(s.text, bus_width_bits=bus.get(g), mem_clock_max_hz=mem_max.get(g))
        out.append(_reading("gpu.peak_flops", _gpu_labels(g, family), pf.value, pf.how))
        out.append(_reading("gpu.peak_mem_bandwidth_bytes_per_second", _gpu_labels(g, None),
                            pb.value, pb.how))
        peaks[g] = (pf, pb)
    return out, peaks


def _mean(values: Iterable[float | None]) -> float | None:
    vs = [v for v in values if v is not None]
    return sum(vs) / len(vs) if vs else None


def _hist_mean(history: History, key: str, labels: Labels, window: float) -> float | None:
    s = history.get(key, labels)
    if s is None:
        return None
    m = s.mean(window)
    return m if m is not None else s.mean(None)   # quiet window: the whole run's mean


def mean_context(history: History, labels: Labels, window: float) -> float | None:
    """Mean tokens of context a decoding sequence holds: its prompt plus half its output
    (on average a sequence is half way through its generation)."""
    p = _hist_mean(history, "request.prompt_tokens", labels, window)
    g = _hist_mean(history, "request.generation_tokens", labels, window)
    if p is None and g is None:
        return None
    return (p or 0.0) + (g or 0.0) / 2


def _gauge_mean(history: History, key: str, labels: Labels, window: float) -> float | None:
    s = history.get(key, labels)
    if s is None:
        return None
    vals = s.values(window)
    return sum(vals) / len(vals) if vals else None


def _server_counters_on(history: History,
                        labels: Labels) -> tuple[Series, list[Series]] | None:
    """The engine's estimated_* counters when they count: present and not all zero (vLLM
    0.32 exposes them at 0 without --enable-mfu-metrics): (FLOPs, the byte counters present)."""
    flops, *byte_keys = SERVER_COUNTERS
    fs = history.get(flops, labels)
    if fs is None or not fs.any_nonzero():
        return None
    return fs, [s for k in byte_keys if (s := history.get(k, labels)) is not None]


def derive_sol(history: History, derived: list[Reading], window: float) -> list[Reading]:
    settings = _settings(history)
    model = _model(history)
    family = compute_dtype(settings, model)
    out, peaks = gpu_peaks(history, family)
    engines = history.find("server.generation_tokens_total")
    if not engines:
        return out
    gpus = _int_setting(settings, "tensor_parallel_size") * \
        _int_setting(settings, "pipeline_parallel_size")
    flops_peak = _mean(pf.value for pf, _ in peaks.values())
    bw_peak = _mean(pb.value for _, pb in peaks.values())
    if not peaks:
        no_peak = "no GPU readings (NVML): the GPUs' peaks are unknown"
    else:
        no_peak = next((pf.how for pf, _ in peaks.values() if pf.value is None), "")
        no_bw = next((pb.how for _, pb in peaks.values() if pb.value is None), "")
    idx = {(r.key, r.labels): r for r in derived}

    def rate(key: str, labels: Labels) -> float | None:
        r = idx.get((key, labels))
        return r.value if r is not None and r.ok else None

    for eng in engines:
        lab = eng.labels
        gen = rate("throughput.generation_tokens_per_second", lab)
        prompt = rate("throughput.prompt_tokens_per_second", lab)
        ctx_tokens = mean_context(history, lab, window)
        counters = _server_counters_on(history, lab)
        # ---- MFU / MBU -----------------------------------------------------------------
        if counters is not None:
            fr = counters[0].rate(window)
            br = [c.rate(window) for c in counters[1]]
            how = "the engine's estimated_*_per_gpu counters"
            flops = fr
            bytes_ = sum(b for b in br if b is not None) if any(b is not None for b in br) \
                else None
        elif "model.weight_bytes" in model and gen is not None:
            tokens = gen + (prompt or 0.0)
            flops = estimated_flops_per_gpu(active_params=model["model.active_params"],
                                            tokens_per_second=tokens, gpus=gpus)
            steps = rate("server.engine_steps_per_second", lab)
            if steps is None:
                running = _gauge_mean(history, "server.requests_running", lab, window)
                steps = gen / max(1.0, running or 1.0)
            bytes_ = estimated_bytes_per_gpu(
                weight_bytes=model["model.weight_bytes"],
                kv_bytes_per_token=model["model.kv_bytes_per_token"], steps_per_second=steps,
                generation_tokens_per_second=gen, context_tokens=ctx_tokens or 0.0, gpus=gpus)
            how = (f"infertop's estimate: 2 FLOP x {model['model.active_params'] / 1e9:.1f} B "
                   f"params x {fmt_si(tokens, 'tok/s')} / {gpus} GPU")
        else:
            flops = bytes_ = None
            how = ("no estimate: the engine's estimated_* counters are absent or 0 "
                   "(--enable-mfu-metrics off) and " +
                   (f"the model's shape is unknown ({model.get('why') or 'no model.* readings'})"
                    if "model.weight_bytes" not in model else "no token rate yet"))
        mfu = utilisation(flops, flops_peak) if flops is not None else None
        mbu = utilisation(bytes_, bw_peak) if bytes_ is not None else None
        out.append(_reading("sol.mfu_ratio", lab, mfu, how if mfu is not None or flops is None
                            else f"{no_peak}"))
        out.append(_reading("sol.mbu_ratio", lab, mbu, how if mbu is not None or bytes_ is None
                            else f"{no_bw if peaks else no_peak}"))
        # ---- decode roofline -------------------------------------------------------------
        batch = _gauge_mean(history, "server.requests_running", lab, window)
        why = ""
        if "model.weight_bytes" not in model:
            why = f"model shape unknown ({model.get('why') or 'no model.* readings'})"
        elif bw_peak is None:
            why = no_peak if not peaks else no_bw
        elif not batch or batch < 0.5:
            why = "no request running in the window"
        if why or batch is None or bw_peak is None:   # (no batch or bandwidth: why is set)
            out.append(_reading("sol.decode_roofline_tokens_per_second", lab, None, why))
            out.append(_reading("sol.decode_roofline_ratio", lab, None, why))
            continue
        step = decode_step(weight_bytes=model["model.weight_bytes"],
                           kv_bytes_per_token=model["model.kv_bytes_per_token"],
                           active_params=model["model.active_params"], batch=batch,
                           context_tokens=ctx_tokens or 0.0, gpus=gpus, bandwidth=bw_peak,
                           peak_flops=flops_peak)
        ceiling = step.tokens_per_second(batch)
        note = (f"{step.bound}-bound at batch {batch:.1f}, "
                f"{ctx_tokens or 0:.0f} tokens of context, {gpus} GPU; step >= "
                f"{step.seconds * 1e3:.2f} ms")
        if ctx_tokens is None:
            note += " (context unknown: KV reads left out)"
        out.append(_reading("sol.decode_roofline_tokens_per_second", lab, ceiling, note))
        out.append(_reading("sol.decode_roofline_ratio", lab,
                            gen / ceiling if gen is not None and ceiling > 0 else None,
                            note if gen is not None else "no generation rate yet"))
    return out
