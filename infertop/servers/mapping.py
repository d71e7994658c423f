"""The vocabulary of a /metrics dialect: rules "family -> reading key" and the context the
per-kind extras read.  The engine that applies them is infertop/dialects.py; each kind's
module (vllm.py, ...) writes its table with ``rule``.

Pure: no I/O.  Nothing here names a server kind.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from infertop.keys import SPECS
from infertop.model import Kind, Reading, make_labels
from infertop.promtext import Family, FrozenLabels


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
    # which server version named the family so (e.g. "0.9.2"; "<=0.10" for an old name):
    # documentation for the reader and docs/metrics.md, not used in the mapping
    since: str = ""
    # the counter moves only when a request finishes (a finish step of its whole output),
    # not while the work is done: between finishes its rate reads 0 (SGLang's tokenizer
    # counters, llama.cpp tokens_predicted).  A rule comparing a rate with its peak must
    # not read such a counter as a live rate (derive.py, server.counter_moves).
    on_finish: bool = False


def rule(families: str | tuple[str, ...], key: str, **kw: Any) -> FamilyMap:
    """One FamilyMap; dict arguments (select, keep, const, rename) become pairs."""
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
    extras: tuple[Callable[[Ctx], None], ...] = ()  # facts that are not one series
    # the families the extras read (a fleet's Prometheus query asks for exactly these
    # and the rules' families: probes/prometheus/source.py)
    extra_families: tuple[str, ...] = ()
    # labels its series carry that are not part of a server's identity: aggregated away
    # by the generated recording rules (promrules.py: SGLang's TP/PP/EP ranks)
    drop_labels: tuple[str, ...] = ()
    # counters written without the ``_total`` suffix on the wire: every counter of the
    # dialect (bare_counters) or those whose family starts with one of these prefixes
    bare_counters: bool = False
    bare_counter_prefixes: tuple[str, ...] = ()


@dataclass
class Acc:
    """One output series being accumulated."""

    kind: Kind
    agg: str
    value: float = 0.0
    n: int = 0
    buckets: dict[float, float] = field(default_factory=dict)
    hist_sum: float = 0.0
    fraction: bool = False
    invalid: str = ""     # why the server's values cannot be used (NaN, Inf): never "ok"


_LABELS_MAX = 4096
_LABELS: dict[tuple, tuple] = {}   # Ctx.reading_labels' memo (bounded: cleared when full)


@dataclass
class Ctx:
    """One page being mapped: what the extras read (``by_name``) and add (``extra``)."""

    dialect: Dialect
    instance: str
    by_name: dict[str, Family]
    model: str
    accs: dict[tuple[str, tuple], Acc] = field(default_factory=dict)
    extra: list[Reading] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def reading_labels(self, src: dict[str, str], **more: str) -> tuple:
        """``make_labels(self.labels(src, **more))``, remembered across scrapes for a
        series' ``FrozenLabels`` (promtext hands out the same object for the same series
        on every scrape; the object is kept in the entry, so its id is not reused while
        remembered).  The extras label a few samples a page this way (~40 us a page)."""
        key = (id(src), self.instance, self.model, self.dialect.name, *more.items())
        hit = _LABELS.get(key)
        if hit is not None and hit[0] is src:
            return hit[1]
        got = make_labels(self.labels(src, **more))
        if isinstance(src, FrozenLabels):
            if len(_LABELS) >= _LABELS_MAX:
                _LABELS.clear()
            _LABELS[key] = (src, got)
        return got

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


def gauge_configs(ctx: Ctx, table) -> None:
    """``kv.config`` facts from gauges: (family, config name, kv_cache_block_type or None)."""
    seen: set[tuple] = set()
    for fname, name, block_type in table:
        fam = ctx.by_name.get(fname)
        if fam is None:
            continue
        for s in fam.samples:
            if block_type is not None and s.labels.get("kv_cache_block_type") != block_type:
                continue
            lab = ctx.reading_labels(s.labels, name=name)
            if lab in seen:  # one fact per engine, not one per TP rank
                continue
            seen.add(lab)
            ctx.extra.append(Reading("kv.config", 1.0, "", lab, kind=Kind.INFO,
                                     text=number_text(s.value)))


def number_text(v: float) -> str:
    return str(int(v)) if math.isfinite(v) and v.is_integer() else f"{v:g}"
