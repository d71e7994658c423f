"""Inference-server /metrics dialects -> common Readings (keys from infertop.keys).

Each server names the same quantities differently (docs/metrics.md lists every name and its key; sources in docs/reference/metrics.md
§1 vLLM, §2 SGLang, §3 TGI, §4 llama.cpp, §5 Triton/TensorRT-LLM).  A dialect is a table of
rules "family -> key"; the dialect is picked by the family-name prefixes the page uses.
The tables live with everything else about each server in infertop/servers/<kind>.py; this
module is the engine that applies them and names no server.

Raw values only (rates and quantiles are derived later from History): counters stay
cumulative, histograms keep their cumulative buckets.  Labels: every reading gets
``instance``; ``engine`` (vLLM data-parallel engine, SGLang dp_rank) and ``model`` when the
server reports them.  Other source labels are dropped; samples that then share a series
are summed (counters, histograms) or maxed (gauges: TP ranks repeat the same value).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import chain, repeat
from math import isfinite
from operator import add, attrgetter, is_, itemgetter
from operator import le as _not_above

from . import mapping_plan
from .keys import ON_FINISH, SPECS
from .mapping_plan import ADD as _ADD
from .mapping_plan import BUCKET as _BUCKET
from .mapping_plan import HCOUNT as _HCOUNT
from .mapping_plan import HSUM as _HSUM
from .meta import ServerMeta
from .model import Kind, Reading, Status, make_labels
from .promtext import Family, FrozenLabels, ParseError, parse
from .servers import registry
from .servers.mapping import Acc as _Acc
from .servers.mapping import Ctx as _Ctx
from .servers.mapping import Dialect, FamilyMap
from .servers.mapping import rule as _r
from .units import natural_key

__all__ = ["Exposition", "ParseError", "readings_from_families", "readings_from_exposition",
           "detect_dialect", "Dialect", "FamilyMap", "DIALECTS", "GENERIC"]


@dataclass
class Exposition:
    dialect: str
    readings: list[Reading]
    meta: ServerMeta
    family_count: int


def detect_dialect(families: Iterable[Family]) -> str:
    """The dialect whose prefixes name the most families; "unknown" when none does."""
    dialects = registry.dialects()
    counts = dict.fromkeys(dialects, 0)
    for f in families:
        for d in dialects.values():
            if f.name.startswith(d.prefixes):
                counts[d.name] += 1
                break
    if not counts:
        return "unknown"
    best = max(counts, key=lambda n: counts[n])
    return best if counts[best] else "unknown"


def readings_from_exposition(text: str, instance: str) -> Exposition:
    """Parse /metrics text and map it; raises ParseError when it is not an exposition."""
    return readings_from_families(parse(text), instance)


def readings_from_families(families: list[Family], instance: str) -> Exposition:
    dialects = registry.dialects()
    samples = list(chain.from_iterable(f.samples for f in families))
    shape = mapping_plan.shape_of(families, samples, instance, dialects)
    plan = mapping_plan.known(shape)
    dialect = plan.dialect if plan is not None else \
        dialects.get(detect_dialect(families), UNKNOWN)
    if plan is not None and plan.plain:
        by_name = dict(zip(shape.families, families))
        dropped, worst_family = 0, ""
    else:
        by_name = {}
        for f in families:  # a family repeated further down the page: one family
            if f.name in by_name:
                prev = by_name[f.name]
                by_name[f.name] = Family(f.name, prev.type, prev.help, prev.samples + f.samples)
            else:
                by_name[f.name] = f
        dropped, worst_family = _cap_series(by_name)
    if plan is not None:
        models, engines = plan.models, plan.engines
    else:
        models, engines = _models_and_engines(dialect, by_name)
    model = models[0] if len(models) == 1 else ""
    ctx = _Ctx(dialect, instance, by_name, model)
    if plan is None:
        # a page of a new shape: which sample feeds which series, kept for the next page
        plan = _compile(ctx, samples, models, engines,
                        plain=not dropped and len(by_name) == len(families))
        mapping_plan.remember(shape, plan)
    fresh = _run(ctx, plan, samples)
    for extra in dialect.extras:
        extra(ctx)
    readings = _finish(ctx, plan, fresh)
    readings += ctx.extra

    if plan.tail is None:   # facts of the page's shape: made once per plan
        server_labels = make_labels({"instance": instance, **({"model": model} if model else {})})
        info = dialect.name if not models else f"{dialect.name} {', '.join(models)}"
        plan.tail = (
            Reading("server.info", 1.0, "", server_labels, kind=Kind.INFO, text=info),
            Reading("server.families", float(len(families)), SPECS["server.families"].unit,
                    make_labels(instance=instance)),
            *_finish_driven(dialect, by_name, instance))
    readings += plan.tail
    if dropped:
        ctx.notes.append(cardinality_note(dropped, worst_family))
    meta = ServerMeta(dialect=dialect.name, model=", ".join(models), engines=tuple(engines),
                      series_dropped=dropped, notes=tuple(ctx.notes))
    return Exposition(dialect.name, readings, meta, len(families))


def _finish_driven(dialect: Dialect, by_name: Mapping[str, Family],
                   instance: str) -> tuple[Reading, ...]:
    """``server.counter_moves`` "on finish" for each counter key that only rules marked
    ``on_finish`` feed on this page (SGLang before realtime_tokens_total, llama.cpp's
    tokens_predicted): its rate between two finishes reads 0, not a stall."""
    live: set[str] = set()
    finish: set[str] = set()
    for rule in dialect.rules:
        if rule.unless and rule.unless in by_name:
            continue
        if any(f in by_name for f in rule.families):
            (finish if rule.on_finish else live).add(rule.key)
    return tuple(Reading("server.counter_moves", 1.0, "",
                         make_labels(instance=instance, counter=key), kind=Kind.INFO,
                         text=ON_FINISH)
                 for key in sorted(finish - live))


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


_value = attrgetter("value")
_second = itemgetter(1)


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


# ---- the rule loop: a page's shape -> a plan; a plan + the page's values -> the series ----
#
# Which sample feeds which output series, and how, depends only on the page's shape (its
# families, and each sample's name and labels); the values only move the sums.  So the rule
# loop below decides once per shape and writes its decisions down as operations on sample
# positions (a Plan, kept by mapping_plan.py for the next page of the same shape), and
# ``_run`` applies them to the page's values.  A page of a new shape is compiled first and
# then run the same way: there is one way to sum, and a kept plan can only differ from a
# fresh one if the shape check is wrong (tests/test_mapping_plan.py).



def _compile(ctx: _Ctx, samples: list, models: list[str], engines: list[str],
             plain: bool) -> mapping_plan.Plan:
    """The operations of today's rule loop over this page, in the order it visits them."""
    pos = {id(s): i for i, s in enumerate(samples)}
    index: dict[tuple[str, tuple], int] = {}
    accs: list[tuple] = []     # (key, kind, agg, fraction), in the order first fed
    ops: list[tuple] = []      # (acc, op, sample position, argument)
    by_name = ctx.by_name

    def acc(rule: FamilyMap, labels: tuple, kind: Kind) -> int:
        key = (rule.key, labels)
        n = index.get(key)
        if n is None:
            agg = rule.agg or ("max" if kind is Kind.GAUGE else "sum")
            n = index[key] = len(accs)
            accs.append((key, kind, agg, rule.fraction))
        return n

    for rule in ctx.dialect.rules + GENERIC:
        if rule.unless and rule.unless in by_name:
            continue
        for fname in rule.families:
            fam = by_name.get(fname)
            if fam is None:
                continue
            kind = SPECS[rule.key].kind
            if rule.part:
                if fam.type not in ("histogram", "summary"):
                    continue
                suffix = "_" + rule.part
                for s in fam.samples:
                    if s.name.endswith(suffix):
                        ok, labels, _, _ = _mapped(ctx, rule, s.labels)
                        if ok:
                            ops.append((acc(rule, labels, kind), _ADD, pos[id(s)], rule.scale))
            elif kind is Kind.HISTOGRAM:
                if fam.type == "histogram":
                    _compile_histogram(ctx, rule, fam, pos, acc, ops)
            elif fam.type not in ("histogram", "summary"):  # a scalar key: scalar family
                for s in fam.samples:
                    if s.name.endswith("_created"):
                        continue
                    ok, labels, _, _ = _mapped(ctx, rule, s.labels)
                    if ok:
                        ops.append((acc(rule, labels, kind), _ADD, pos[id(s)], rule.scale))
    return mapping_plan.Plan(ctx.dialect, models, engines, accs, ops, plain)


def _compile_histogram(ctx: _Ctx, rule: FamilyMap, fam: Family, pos: dict[int, int],
                       acc, ops: list) -> None:
    for s in fam.samples:
        name = s.name
        if name.endswith("_bucket"):
            ok, labels, le, le_text = _mapped(ctx, rule, s.labels, bucket=True)
            if not ok or le is None:
                continue
            # counts stay counts; the bounds change unit (inf stays inf)
            ops.append((acc(rule, labels, Kind.HISTOGRAM), _BUCKET, pos[id(s)],
                        (le * rule.scale, le_text)))
        elif name.endswith("_sum"):
            ok, labels, _, _ = _mapped(ctx, rule, s.labels)
            if ok:
                ops.append((acc(rule, labels, Kind.HISTOGRAM), _HSUM, pos[id(s)], rule.scale))
        elif name.endswith("_count"):
            ok, labels, _, _ = _mapped(ctx, rule, s.labels)
            if ok:
                ops.append((acc(rule, labels, Kind.HISTOGRAM), _HCOUNT, pos[id(s)], None))


def _run(ctx: _Ctx, plan: mapping_plan.Plan, samples: list) -> list:
    """Sum the page's values into ``ctx.accs`` as the plan says: each series' operations
    in the order the rule loop visited them (float sums and max() with NaN depend on the
    order).  A histogram whose buckets each come from one sample and whose counts are all
    finite is summed in C (``hist``): the same additions (0.0 + count, one per bucket).

    A series whose samples are the very objects it read on the plan's last page is not
    summed again (its accumulator and reading are the last page's; ``_finish``).  Returns,
    per series, the kept entry (a tuple) for those and the samples read (a list) for the
    others: ``_finish`` uses the entry seen here, whatever another thread mapping the
    same instance has stored since."""
    accs = []
    fresh: list = []
    get = samples.__getitem__
    values: list[float] | None = None
    last = plan.last
    for n, (kind, agg, fraction, ops, hist, pos) in enumerate(plan.series):
        cur = list(map(get, pos))
        kept = last[n]
        if kept is not None and all(map(is_, cur, kept[0])):
            accs.append(kept[1])
            fresh.append(kept)
            continue
        fresh.append(cur)
        if values is None:
            values = list(map(_value, samples))
        a = _Acc(kind, agg, fraction=fraction)
        accs.append(a)
        if hist is not None:
            b_pos, b_les, s_ops, c_pos = hist
            counts = list(map(values.__getitem__, b_pos))
            totals = list(map(values.__getitem__, c_pos))
            if all(map(isfinite, counts)) and all(map(isfinite, totals)):
                a.buckets = dict(zip(b_les, map(add, repeat(0.0), counts)))
                for i, scale in s_ops:
                    a.hist_sum += values[i] * scale
                for v in totals:
                    a.value += v
                a.n = len(totals)
                continue
        _replay(a, ops, values)   # NaN/Inf: the first one found names the problem
    ctx.accs = dict(zip(plan.keys, accs))
    return fresh


def _replay(a: _Acc, ops: tuple, values: list[float]) -> None:
    for op, i, arg in ops:
        v = values[i]
        if op is _ADD:
            _add(a, v * arg)
        elif op is _BUCKET:
            le, le_text = arg
            a.buckets[le] = a.buckets.get(le, 0.0) + v
            if not isfinite(v) and not a.invalid:
                a.invalid = f"bucket le={le_text} is {_spell(v)}"
        elif op is _HSUM:
            a.hist_sum += v * arg
        else:
            a.value += v
            a.n += 1
            if not isfinite(v) and not a.invalid:
                a.invalid = f"_count is {_spell(v)}"


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


def _finish(ctx: _Ctx, plan: mapping_plan.Plan | None = None,
            fresh: list | None = None) -> list[Reading]:
    """The readings of ``ctx.accs``, in order.  With a plan, a series whose samples are the
    very objects of the plan's last page (``fresh[n]`` that page's entry: promtext hands
    back the same frozen sample for an unchanged line) gives the Reading made then, and
    its note again."""
    out: list[Reading] = []
    notes = ctx.notes
    last = plan.last if plan is not None else None
    for n, ((key, labels), a) in enumerate(ctx.accs.items()):
        if fresh is not None and last is not None and n < len(fresh):
            cur = fresh[n]
            if type(cur) is tuple:     # kept by _run
                r, note = cur[2], cur[3]
                if note and note not in notes:
                    notes.append(note)
            else:
                r, note = _finish_one(key, labels, a, notes)
                last[n] = (cur, a, r, note)
        else:
            r, _ = _finish_one(key, labels, a, notes)
        if r is not None:
            out.append(r)
    return out


def _finish_one(key: str, labels: tuple, a: _Acc, notes: list[str]) -> tuple:
    """(reading or None, the note it added or "") of one accumulated series."""
    spec = SPECS[key]
    if a.kind is Kind.HISTOGRAM:
        if not a.buckets and not a.n:
            return None, ""
        buckets = sorted(a.buckets.items())
        count = a.value if a.n else (buckets[-1][1] if buckets else 0.0)
        if not buckets or not math.isinf(buckets[-1][0]):
            buckets.append((math.inf, count))
        counts = list(map(_second, buckets))
        problem = a.invalid or \
            ("" if math.isfinite(count) and all(map(isfinite, counts))
             else "counts summed over series overflow") or \
            ("" if counts[0] >= 0 and all(map(_not_above, counts, counts[1:]))
             else _histogram_problem(buckets)) or \
            ("" if math.isfinite(a.hist_sum) else f"_sum is {_spell(a.hist_sum)}")
        if problem:
            return Reading(key, None, spec.unit, labels, Status.ERROR,
                           f"invalid histogram from the server: {problem}",
                           kind=Kind.HISTOGRAM), ""
        return Reading(key, count, spec.unit, labels, kind=Kind.HISTOGRAM,
                       buckets=tuple(buckets), hist_sum=a.hist_sum), ""
    if a.invalid:
        return Reading(key, None, spec.unit, labels, Status.ERROR,
                       f"invalid value: {a.invalid}", kind=spec.kind), ""
    value = a.value
    if not math.isfinite(value):
        # each series finite, their sum not (two engines at 1.7e308): no number to show
        return Reading(key, None, spec.unit, labels, Status.ERROR,
                       f"invalid value: the sum of {a.n} series overflows",
                       kind=spec.kind), ""
    if a.fraction and not 0.0 <= value <= 100.0:
        # a share of something cannot be negative or above 100 %: a broken server,
        # never a healthy one
        return Reading(key, None, spec.unit, labels, Status.ERROR,
                       f"invalid value: a ratio of {value:.3g} (outside 0..1)",
                       kind=spec.kind), ""
    note = ""
    if a.fraction and value > 1.0 and value <= 100.0:
        # documented as 0..1 but reported as percent (some builds): normalise
        value /= 100.0
        note = f"{key} reported as a percent; divided by 100"
        if note not in notes:
            notes.append(note)
    return Reading(key, value, spec.unit, labels, kind=spec.kind), note


# ---- the tables: one per server kind, in infertop/servers/<kind>.py -------------------------

UNKNOWN = Dialect("unknown", (), "", (), rules=())

# prometheus_client's process collector (vLLM API server, others on Python)
GENERIC = (_r("process_start_time_seconds", "server.process_start_seconds", agg="max"),)


class _Dialects(Mapping[str, Dialect]):
    """dialect name -> Dialect of every registered server kind (infertop.servers), live:
    a kind registered later is seen here too."""

    def __getitem__(self, name: str) -> Dialect:
        return registry.dialects()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(registry.dialects())

    def __len__(self) -> int:
        return len(registry.dialects())


DIALECTS: Mapping[str, Dialect] = _Dialects()
