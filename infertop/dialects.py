"""Inference-server /metrics dialects -> common Readings (keys from infertop.keys).

Each server names the same quantities differently (docs/metrics.md lists every name and its key; sources in ../shared/reference/metrics.md
§1 vLLM, §2 SGLang, §3 TGI, §4 llama.cpp, §5 Triton/TensorRT-LLM).  A dialect is a table of
rules "family -> key"; the dialect is picked by the family-name prefixes the page uses.

Raw values only (rates and quantiles are derived later from History): counters stay
cumulative, histograms keep their cumulative buckets.  Labels: every reading gets
``instance``; ``engine`` (vLLM data-parallel engine, SGLang dp_rank) and ``model`` when the
server reports them.  Other source labels are dropped; samples that then share a series
are summed (counters, histograms) or maxed (gauges: TP ranks repeat the same value).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterable

from .keys import SPECS
from .meta import ServerMeta
from .model import Kind, Reading, Status, make_labels
from .promtext import Family, FrozenLabels, ParseError, parse
from .units import natural_key

__all__ = ["Exposition", "ParseError", "readings_from_families", "readings_from_exposition",
           "detect_dialect"]


@dataclass
class Exposition:
    dialect: str
    readings: list[Reading]
    meta: ServerMeta
    family_count: int


@dataclass(frozen=True)
class FamilyMap:
    """Map the samples of one or more families (summed) onto a reading key."""

    families: tuple[str, ...]
    key: str
    select: tuple[tuple[str, str], ...] = ()   # only samples whose label has this value
    keep: tuple[tuple[str, str], ...] = ()     # (source label, reading label) kept
    const: tuple[tuple[str, str], ...] = ()    # constant reading labels (reason="success")
    rename: tuple[tuple[str, str], ...] = ()   # kept label values renamed (dropped->abort)
    part: str = ""       # read a histogram/summary family's "sum" or "count" as a counter
    unless: str = ""     # legacy name: skipped when this (newer) family is present
    agg: str = ""        # "max" or "sum"; default: sum for counters/histograms, max gauges
    fraction: bool = False  # documented 0..1; a value above 1 is taken as a percent
    scale: float = 1.0   # unit conversion: values, sums and bucket bounds times this (ms -> s)


def _r(families: str | tuple[str, ...], key: str, **kw) -> FamilyMap:
    fams = (families,) if isinstance(families, str) else families
    for k in ("select", "keep", "const", "rename"):
        if k in kw and isinstance(kw[k], dict):
            kw[k] = tuple(kw[k].items())
    assert key in SPECS, key
    return FamilyMap(fams, key, **kw)


@dataclass(frozen=True)
class Dialect:
    name: str
    prefixes: tuple[str, ...]
    engine_label: str
    model_labels: tuple[str, ...]
    rules: tuple[FamilyMap, ...]
    extras: tuple[Callable[["_Ctx"], None], ...] = ()  # facts that are not one series
    # the families the extras read (a fleet's Prometheus query asks for exactly these
    # and the rules' families: probes/prometheus/source.py)
    extra_families: tuple[str, ...] = ()


# ---- the mapping ----------------------------------------------------------------------------

@dataclass
class _Acc:
    """One output series being accumulated."""

    kind: Kind
    agg: str
    value: float = 0.0
    n: int = 0
    buckets: dict[float, float] = field(default_factory=dict)
    hist_sum: float = 0.0
    fraction: bool = False
    invalid: str = ""     # why the server's values cannot be used (NaN, Inf): never "ok"


@dataclass
class _Ctx:
    dialect: Dialect
    instance: str
    by_name: dict[str, Family]
    model: str
    accs: dict[tuple[str, tuple], _Acc] = field(default_factory=dict)
    extra: list[Reading] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def labels(self, src: dict[str, str], **more: str) -> dict[str, str]:
        out = {"instance": self.instance}
        d = self.dialect
        if d.engine_label and d.engine_label in src:
            out["engine"] = src[d.engine_label]
        model = next((src[m] for m in d.model_labels if m in src), self.model)
        if model:
            out["model"] = model
        out.update(more)
        return out


def detect_dialect(families: Iterable[Family]) -> str:
    """The dialect whose prefixes name the most families; "unknown" when none does."""
    counts = dict.fromkeys(DIALECTS, 0)
    for f in families:
        for d in DIALECTS.values():
            if f.name.startswith(d.prefixes):
                counts[d.name] += 1
                break
    best = max(counts, key=lambda n: counts[n])
    return best if counts[best] else "unknown"


def readings_from_exposition(text: str, instance: str) -> Exposition:
    """Parse /metrics text and map it; raises ParseError when it is not an exposition."""
    return readings_from_families(parse(text), instance)


def readings_from_families(families: list[Family], instance: str) -> Exposition:
    dialect = DIALECTS.get(detect_dialect(families), UNKNOWN)
    by_name: dict[str, Family] = {}
    for f in families:  # a family repeated further down the page: one family
        if f.name in by_name:
            prev = by_name[f.name]
            by_name[f.name] = Family(f.name, prev.type, prev.help, prev.samples + f.samples)
        else:
            by_name[f.name] = f
    dropped, worst_family = _cap_series(by_name)
    models, engines = _models_and_engines(dialect, by_name)
    model = models[0] if len(models) == 1 else ""
    ctx = _Ctx(dialect, instance, by_name, model)
    for rule in dialect.rules + GENERIC:
        if rule.unless and rule.unless in by_name:
            continue
        for fname in rule.families:
            fam = by_name.get(fname)
            if fam is not None:
                _apply(ctx, rule, fam)
    for extra in dialect.extras:
        extra(ctx)
    readings = _finish(ctx)
    readings += ctx.extra

    server_labels = make_labels({"instance": instance, **({"model": model} if model else {})})
    info = dialect.name if not models else f"{dialect.name} {', '.join(models)}"
    readings.append(Reading("server.info", 1.0, "", server_labels, kind=Kind.INFO, text=info))
    readings.append(Reading("server.families", float(len(families)), SPECS["server.families"].unit,
                            make_labels(instance=instance)))
    if dropped:
        ctx.notes.append(cardinality_note(dropped, worst_family))
    meta = ServerMeta(dialect=dialect.name, model=", ".join(models), engines=tuple(engines),
                      series_dropped=dropped, notes=tuple(ctx.notes))
    return Exposition(dialect.name, readings, meta, len(families))


# Cardinality caps: a page whose label values never repeat (a request id as a label, a
# broken exporter) must not cost seconds and megabytes per scrape downstream (mapping,
# History, rules, recordings).  Real servers stay far below: vLLM with 8 data-parallel
# engines has ~30 buckets x 8 engines x a few label sets per histogram family.
MAX_SERIES_PER_FAMILY = 5000
MAX_SERIES_PER_PAGE = 50_000


def cardinality_note(dropped: int, family: str) -> str:
    return (f"{dropped} series dropped above the cardinality cap ({MAX_SERIES_PER_FAMILY} per "
            f"family, {MAX_SERIES_PER_PAGE} per page; most in {family}: a label with "
            "unbounded values?)")


def _cap_series(by_name: dict[str, Family]) -> tuple[int, str]:
    """Cut families to the caps in place; (samples dropped, family that lost the most)."""
    dropped, worst, worst_n = 0, "", 0
    left = MAX_SERIES_PER_PAGE
    for name, f in by_name.items():
        keep = min(len(f.samples), MAX_SERIES_PER_FAMILY, max(0, left))
        if keep < len(f.samples):
            n = len(f.samples) - keep
            dropped += n
            if n > worst_n:
                worst, worst_n = name, n
            by_name[name] = Family(f.name, f.type, f.help, f.samples[:keep])
        left -= keep
    return dropped, worst


def _models_and_engines(d: Dialect, by_name: dict[str, Family]) -> tuple[list[str], list[str]]:
    models: set[str] = set()
    engines: set[str] = set()
    for name, fam in by_name.items():
        if not d.prefixes or not name.startswith(d.prefixes):
            continue
        for s in fam.samples:
            lab = s.labels
            for m in d.model_labels:
                if m in lab:
                    models.add(lab[m])
                    break
            if d.engine_label and d.engine_label in lab:
                engines.add(lab[d.engine_label])
    return sorted(models), sorted(engines, key=natural_key)


def _selected(rule: FamilyMap, lab: dict[str, str]) -> bool:
    return all(lab.get(k) == v for k, v in rule.select)


# What a rule makes of one series' labels, remembered across scrapes.  promtext hands out
# the same FrozenLabels object for a series on every scrape while its caches hold it, so
# the object is the key (by id, with the object kept in the entry so the id cannot be
# reused while remembered).  Mapping labels was ~90 % of a busy vLLM page's parse+map
# (1.06 of 1.18 ms per scrape, every second, on the event loop).  Bounded: cleared when
# full.  Only FrozenLabels are remembered (other mappings may be edited by their owner).
_MEMO_MAX = 4096     # a busy vLLM page needs 223, 8 engines ~1,800; ~600 B each
_memo: dict[tuple, tuple] = {}


def _mapped(ctx: _Ctx, rule: FamilyMap, lab, bucket: bool = False) -> tuple:
    """(selected, reading labels, le, le text) of one sample's labels under ``rule``; le
    only for a histogram bucket (``bucket``), whose ``le`` label is not a reading label."""
    key = (id(rule), id(lab), bucket, ctx.dialect.name, ctx.model, ctx.instance)
    hit = _memo.get(key)
    if hit is not None and hit[0] is lab:
        return hit[1]
    got = _map_labels(ctx, rule, lab, bucket)
    if isinstance(lab, FrozenLabels):
        if len(_memo) >= _MEMO_MAX:
            _memo.clear()
        _memo[key] = (lab, got)
    return got


def _map_labels(ctx: _Ctx, rule: FamilyMap, lab, bucket: bool) -> tuple:
    if not _selected(rule, lab):
        return False, (), None, None
    if not bucket:
        return True, _rule_labels(ctx, rule, lab), None, None
    lab = dict(lab)
    le_text = lab.pop("le", None)
    try:
        le = float(le_text) if le_text is not None else None
    except ValueError:
        le = None
    return True, _rule_labels(ctx, rule, lab), le, le_text


def _rule_labels(ctx: _Ctx, rule: FamilyMap, lab: dict[str, str]) -> tuple:
    more: dict[str, str] = {}
    if rule.keep:
        ren = dict(rule.rename)
        for src, dst in rule.keep:
            if src in lab:
                v = lab[src]
                more[dst] = ren.get(v, ren.get("*", v)) if ren else v
    for k, v in rule.const:
        more[k] = v
    return make_labels(ctx.labels(lab, **more))


def _acc(ctx: _Ctx, rule: FamilyMap, labels: tuple, kind: Kind) -> _Acc:
    key = (rule.key, labels)
    a = ctx.accs.get(key)
    if a is None:
        agg = rule.agg or ("max" if kind is Kind.GAUGE else "sum")
        a = ctx.accs[key] = _Acc(kind, agg, fraction=rule.fraction)
    return a


def _apply(ctx: _Ctx, rule: FamilyMap, fam: Family) -> None:
    kind = SPECS[rule.key].kind
    if rule.part:
        if fam.type not in ("histogram", "summary"):
            return
        suffix = "_" + rule.part
        for s in fam.samples:
            if s.name.endswith(suffix):
                ok, labels, _, _ = _mapped(ctx, rule, s.labels)
                if ok:
                    _add(_acc(ctx, rule, labels, kind), s.value * rule.scale)
        return
    if kind is Kind.HISTOGRAM:
        if fam.type == "histogram":
            _apply_histogram(ctx, rule, fam)
        return
    if fam.type in ("histogram", "summary"):
        return  # a scalar key needs a scalar family
    for s in fam.samples:
        if s.name.endswith("_created"):
            continue
        ok, labels, _, _ = _mapped(ctx, rule, s.labels)
        if ok:
            _add(_acc(ctx, rule, labels, kind), s.value * rule.scale)


def _add(a: _Acc, v: float) -> None:
    if not math.isfinite(v) and not a.invalid:
        a.invalid = f"the server reported {_spell(v)}"
    if a.n == 0:
        a.value = v
    elif a.agg == "max":
        a.value = max(a.value, v)
    else:
        a.value += v
    a.n += 1


def _apply_histogram(ctx: _Ctx, rule: FamilyMap, fam: Family) -> None:
    for s in fam.samples:
        name = s.name
        if name.endswith("_bucket"):
            ok, labels, le, le_text = _mapped(ctx, rule, s.labels, bucket=True)
            if not ok or le is None:
                continue
            a = _acc(ctx, rule, labels, Kind.HISTOGRAM)
            le *= rule.scale   # counts stay counts; the bounds change unit (inf stays inf)
            a.buckets[le] = a.buckets.get(le, 0.0) + s.value
            if not math.isfinite(s.value) and not a.invalid:
                a.invalid = f"bucket le={le_text} is {_spell(s.value)}"
        elif name.endswith("_sum"):
            ok, labels, _, _ = _mapped(ctx, rule, s.labels)
            if ok:
                _acc(ctx, rule, labels, Kind.HISTOGRAM).hist_sum += s.value * rule.scale
        elif name.endswith("_count"):
            ok, labels, _, _ = _mapped(ctx, rule, s.labels)
            if not ok:
                continue
            a = _acc(ctx, rule, labels, Kind.HISTOGRAM)
            a.value += s.value
            a.n += 1
            if not math.isfinite(s.value) and not a.invalid:
                a.invalid = f"_count is {_spell(s.value)}"


def _spell(v: float) -> str:
    return "NaN" if v != v else ("+Inf" if v > 0 else "-Inf")


def _histogram_problem(buckets: list[tuple[float, float]]) -> str:
    """Why cumulative buckets are not a histogram ("" when they are): counts must not
    fall as the bound grows, nor be negative.  Quantiles of such buckets would be
    nonsense shown as fact."""
    prev_le, prev = None, 0.0
    for le, c in buckets:
        if c < 0:
            return f"bucket le={le:g} is negative ({c:g})"
        if c < prev:
            return (f"bucket counts decrease (le={prev_le:g}: {prev:g}, "
                    f"le={le:g}: {c:g})")
        prev_le, prev = le, c
    return ""


def _finish(ctx: _Ctx) -> list[Reading]:
    out: list[Reading] = []
    for (key, labels), a in ctx.accs.items():
        spec = SPECS[key]
        if a.kind is Kind.HISTOGRAM:
            if not a.buckets and not a.n:
                continue
            buckets = sorted(a.buckets.items())
            count = a.value if a.n else (buckets[-1][1] if buckets else 0.0)
            if not buckets or not math.isinf(buckets[-1][0]):
                buckets.append((math.inf, count))
            problem = a.invalid or \
                ("" if math.isfinite(count) and all(math.isfinite(c) for _, c in buckets)
                 else "counts summed over series overflow") or \
                _histogram_problem(buckets) or \
                ("" if math.isfinite(a.hist_sum) else f"_sum is {_spell(a.hist_sum)}")
            if problem:
                out.append(Reading(key, None, spec.unit, labels, Status.ERROR,
                                   f"invalid histogram from the server: {problem}",
                                   kind=Kind.HISTOGRAM))
                continue
            out.append(Reading(key, count, spec.unit, labels, kind=Kind.HISTOGRAM,
                               buckets=tuple(buckets), hist_sum=a.hist_sum))
            continue
        if a.invalid:
            out.append(Reading(key, None, spec.unit, labels, Status.ERROR,
                               f"invalid value: {a.invalid}", kind=spec.kind))
            continue
        value = a.value
        if not math.isfinite(value):
            # each series finite, their sum not (two engines at 1.7e308): no number to show
            out.append(Reading(key, None, spec.unit, labels, Status.ERROR,
                               f"invalid value: the sum of {a.n} series overflows",
                               kind=spec.kind))
            continue
        if a.fraction and not 0.0 <= value <= 100.0:
            # a share of something cannot be negative or above 100 %: a broken server,
            # never a healthy one
            out.append(Reading(key, None, spec.unit, labels, Status.ERROR,
                               f"invalid value: a ratio of {value:.3g} (outside 0..1)",
                               kind=spec.kind))
            continue
        if a.fraction and value > 1.0 and value <= 100.0:
            # documented as 0..1 but reported as percent (some builds): normalise
            value /= 100.0
            note = f"{key} reported as a percent; divided by 100"
            if note not in ctx.notes:
                ctx.notes.append(note)
        out.append(Reading(key, value, spec.unit, labels, kind=spec.kind))
    return out


# ---- facts that are not one-number series -------------------------------------------------

# The CacheConfig fields worth showing (vllm:cache_config_info carries every field as a label)
VLLM_CACHE_FIELDS = ("block_size", "num_gpu_blocks", "gpu_memory_utilization", "cache_dtype",
                     "enable_prefix_caching", "kv_cache_size_tokens")


def _vllm_cache_config(ctx: _Ctx) -> None:
    fam = ctx.by_name.get("vllm:cache_config_info")
    if fam is None:
        return
    for s in fam.samples:
        for name in VLLM_CACHE_FIELDS:
            v = s.labels.get(name)
            if v is None or v == "None":
                continue
            ctx.extra.append(Reading("kv.config", 1.0, "",
                                     make_labels(ctx.labels(s.labels, name=name)),
                                     kind=Kind.INFO, text=v))


# vllm:engine_sleep_state{sleep_state}: one sample per state, 1 on the current one
# (awake = 1 when active; weights_offloaded = sleep level 1; discard_all = level 2)
VLLM_SLEEP_LEVELS = {"awake": 0.0, "weights_offloaded": 1.0, "discard_all": 2.0}


def _vllm_sleep_level(ctx: _Ctx) -> None:
    """One ``server.sleep_level`` per engine from the one-hot ``sleep_state`` samples: the
    deepest state flagged wins; an engine with no state flagged reports nothing (a page
    that says neither awake nor asleep is not read as awake)."""
    fam = ctx.by_name.get("vllm:engine_sleep_state")
    if fam is None:
        return
    levels: dict[tuple, float] = {}
    for s in fam.samples:
        level = VLLM_SLEEP_LEVELS.get(s.labels.get("sleep_state", ""))
        if level is None or not (math.isfinite(s.value) and s.value >= 0.5):
            continue
        lab = make_labels(ctx.labels(s.labels))
        levels[lab] = max(levels.get(lab, 0.0), level)
    for lab, level in levels.items():
        ctx.extra.append(Reading("server.sleep_level", level, SPECS["server.sleep_level"].unit,
                                 lab))


def _sglang_utilization(ctx: _Ctx) -> None:
    """sglang:utilization, except the -1 a prefill instance reports (not a load)."""
    fam = ctx.by_name.get("sglang:utilization")
    if fam is None:
        return
    seen: dict[tuple, float] = {}
    for s in fam.samples:
        if not math.isfinite(s.value) or s.value < 0:
            continue
        lab = make_labels(ctx.labels(s.labels))
        seen[lab] = max(seen.get(lab, 0.0), s.value)   # TP ranks repeat it
    for lab, v in seen.items():
        ctx.extra.append(Reading("server.utilization_ratio", v,
                                 SPECS["server.utilization_ratio"].unit, lab))


def _sglang_role(ctx: _Ctx) -> None:
    """The engine's part in disaggregated serving from SGLang's own engine_type label
    (prefill, decode, unified: DisaggregationMode.to_engine_type)."""
    fam = ctx.by_name.get("sglang:num_running_reqs")
    seen: set[tuple] = set()
    for s in fam.samples if fam is not None else ():
        role = s.labels.get("engine_type")
        if role not in ("prefill", "decode", "unified"):
            continue
        lab = make_labels(ctx.labels(s.labels))
        if lab not in seen:
            seen.add(lab)
            ctx.extra.append(Reading("server.disagg_role", 1.0, "", lab, kind=Kind.INFO,
                                     text=role))


def _sglang_kv_config(ctx: _Ctx) -> None:
    _gauge_configs(ctx, (("sglang:max_total_num_tokens", "kv_cache_size_tokens", None),
                         ("sglang:page_size", "block_size", None),
                         ("sglang:num_pages", "num_gpu_blocks", None)))


def _triton_kv(ctx: _Ctx) -> None:
    _gauge_configs(ctx, (("nv_trt_llm_kv_cache_block_metrics", "num_gpu_blocks", "max"),
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
        lab = make_labels(ctx.labels(s.labels))
        if t == "used":
            used[lab] = used.get(lab, 0.0) + s.value
        elif t == "max":
            most[lab] = most.get(lab, 0.0) + s.value
    for lab, u in used.items():
        m = most.get(lab)
        if m:
            ctx.extra.append(Reading("kv.usage_ratio", u / m, SPECS["kv.usage_ratio"].unit, lab))


def _gauge_configs(ctx: _Ctx, table) -> None:
    seen: set[tuple] = set()
    for fname, name, block_type in table:
        fam = ctx.by_name.get(fname)
        if fam is None:
            continue
        for s in fam.samples:
            if block_type is not None and s.labels.get("kv_cache_block_type") != block_type:
                continue
            lab = make_labels(ctx.labels(s.labels, name=name))
            if lab in seen:  # one fact per engine, not one per TP rank
                continue
            seen.add(lab)
            ctx.extra.append(Reading("kv.config", 1.0, "", lab, kind=Kind.INFO,
                                     text=_number_text(s.value)))


def _number_text(v: float) -> str:
    return str(int(v)) if math.isfinite(v) and v.is_integer() else f"{v:g}"


# ---- per-server tables ------------------------------------------------------------------

# vLLM V1 (0.33) names, with V0/early-V1 names as fallbacks (docs/metrics.md#vllm, #vllm-legacy).
# kv_cache_usage_perc / gpu_cache_usage_perc: "1 means 100 percent usage" -> a fraction.
VLLM = Dialect("vllm", ("vllm:",), "engine", ("model_name",),
               extras=(_vllm_cache_config, _vllm_sleep_level),
               extra_families=("vllm:cache_config_info", "vllm:engine_sleep_state"), rules=(
    _r("vllm:num_requests_running", "server.requests_running"),
    _r("vllm:num_requests_waiting", "server.requests_waiting"),
    _r("vllm:num_requests_swapped", "server.requests_swapped"),
    _r("vllm:kv_cache_usage_perc", "kv.usage_ratio", fraction=True),
    _r("vllm:gpu_cache_usage_perc", "kv.usage_ratio", fraction=True,
       unless="vllm:kv_cache_usage_perc"),
    _r("vllm:prompt_tokens", "server.prompt_tokens_total"),
    _r("vllm:generation_tokens", "server.generation_tokens_total"),
    _r("vllm:num_preemptions", "server.preemptions_total"),
    _r("vllm:prefix_cache_queries", "kv.prefix_cache_queries_total"),
    _r("vllm:prefix_cache_hits", "kv.prefix_cache_hits_total"),
    _r("vllm:gpu_prefix_cache_queries", "kv.prefix_cache_queries_total",
       unless="vllm:prefix_cache_queries"),
    _r("vllm:gpu_prefix_cache_hits", "kv.prefix_cache_hits_total",
       unless="vllm:prefix_cache_hits"),
    _r("vllm:request_success", "server.requests_finished_total",
       keep={"finished_reason": "reason"}),
    # what the queue waits on: reason=capacity (KV blocks, --max-num-seqs) or deferred
    # (LoRA budget, KV transfer from a remote prefill, blocked); waiting = their sum
    _r("vllm:num_requests_waiting_by_reason", "server.requests_deferred",
       select={"reason": "deferred"}),
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
    _r("vllm:inter_token_latency_seconds", "latency.itl_seconds"),
    # V0 and V1 <= 0.10: per-token latency under the old name
    _r("vllm:time_per_output_token_seconds", "latency.itl_seconds",
       unless="vllm:inter_token_latency_seconds"),
    _r("vllm:request_time_per_output_token_seconds", "latency.tpot_seconds"),
    _r("vllm:e2e_request_latency_seconds", "latency.e2e_seconds"),
    _r("vllm:request_queue_time_seconds", "latency.queue_seconds"),
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

# SGLang 0.5.23 (docs/metrics.md#sglang).  Scheduler metrics carry tp/pp/ep ranks (identical values
# when every scheduler reports): max over them; dp_rank is the engine.  The tokenizer's
# counters are bumped when a request finishes, so prompt tokens include cached ones and
# num_requests_total counts finished requests.
_SCHED = {"agg": "max"}
SGLANG = Dialect("sglang", ("sglang:",), "dp_rank", ("model_name",),
                 extras=(_sglang_kv_config, _sglang_utilization, _sglang_role),
                 extra_families=("sglang:max_total_num_tokens", "sglang:page_size",
                                 "sglang:num_pages", "sglang:utilization",
                                 "sglang:num_running_reqs"), rules=(
    _r("sglang:num_running_reqs", "server.requests_running"),
    _r("sglang:num_queue_reqs", "server.requests_waiting"),
    _r("sglang:token_usage", "kv.usage_ratio", fraction=True),
    _r("sglang:num_retracted_requests", "server.preemptions_total", **_SCHED),
    _r("sglang:prompt_tokens", "server.prompt_tokens_total"),
    _r("sglang:generation_tokens", "server.generation_tokens_total"),
    _r("sglang:prompt_tokens", "kv.prefix_cache_queries_total"),
    _r("sglang:cached_tokens", "kv.prefix_cache_hits_total"),
    _r("sglang:num_requests", "server.requests_finished_total", const={"reason": "finished"}),
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
    _r("sglang:scheduler_idle_seconds", "server.scheduler_idle_seconds_total", **_SCHED),
    _r("sglang:scheduler_process_cpu_seconds", "server.scheduler_cpu_seconds_total",
       **_SCHED),
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

# TGI (docs/metrics.md#tgi): counters without _total, no model label; token totals only exist as
# the sums of the per-request length histograms (counted when a request ends).
TGI = Dialect("tgi", ("tgi_",), "", (), rules=(
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

# llama.cpp llama-server --metrics (docs/metrics.md#llamacpp): no labels.  prompt_tokens excludes
# cached tokens, so the prefix-cache lookups are processed + cached.
LLAMACPP = Dialect("llamacpp", ("llamacpp:",), "", (), rules=(
    _r("llamacpp:requests_processing", "server.requests_running"),
    _r("llamacpp:requests_deferred", "server.requests_waiting"),
    _r("llamacpp:kv_cache_usage_ratio", "kv.usage_ratio", fraction=True),  # older builds
    _r("llamacpp:prompt_tokens", "server.prompt_tokens_total"),
    _r("llamacpp:tokens_predicted", "server.generation_tokens_total"),
    _r(("llamacpp:prompt_tokens", "llamacpp:prompt_tokens_cached"),
       "kv.prefix_cache_queries_total"),
    _r("llamacpp:prompt_tokens_cached", "kv.prefix_cache_hits_total"),
    _r("llamacpp:n_decode", "server.engine_steps_total"),
    _r("llamacpp:spec_decode_num_drafts", "spec.drafts_total"),
    _r("llamacpp:spec_decode_num_draft_tokens", "spec.draft_tokens_total"),
    _r("llamacpp:spec_decode_num_accepted_tokens", "spec.accepted_tokens_total"),
))

# Triton core + TensorRT-LLM backend (labels model, version) (docs/metrics.md#triton).
# Running/queued/KV from nv_trt_llm_* as llm-d's model-server protocol names them
# (llm-d docs/architecture/core/model-servers.md @a628e04d).
TRITON = Dialect("triton", ("nv_inference_", "nv_trt_llm_"), "",
                 ("model", "model_name"), extras=(_triton_kv,),
                 extra_families=("nv_trt_llm_kv_cache_block_metrics",), rules=(
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



def _trtllm_kv_config(ctx: _Ctx) -> None:
    _gauge_configs(ctx, (("trtllm_kv_cache_max_blocks", "num_gpu_blocks", None),
                         ("trtllm_kv_cache_tokens_per_block", "block_size", None)))


# trtllm-serve's Prometheus page (PyTorch backend; docs/metrics.md#trtllm): names from
# TensorRT-LLM tensorrt_llm/metrics/collector.py @050f80de (MetricsCollector's docstring and
# log_iteration_stats); running/waiting/KV/block size/blocks as llm-d maps them.  Labels are
# the server's own (model_name, engine_type); no engine index.
TRTLLM = Dialect("trtllm", ("trtllm_",), "", ("model_name",), extras=(_trtllm_kv_config,),
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

UNKNOWN = Dialect("unknown", (), "", (), rules=())

# prometheus_client's process collector (vLLM API server, others on Python)
GENERIC = (_r("process_start_time_seconds", "server.process_start_seconds", agg="max"),)

DIALECTS: dict[str, Dialect] = {d.name: d for d in (VLLM, SGLANG, TGI, LLAMACPP, TRITON,
                                                     TRTLLM)}
