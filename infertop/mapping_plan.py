"""The dialect mapping of a /metrics page, kept per page shape (dialects.py applies it).

A 1 Hz monitor maps the same server's page again and again, and between two scrapes only
the values move: the families, and each sample's name and labels, stay.  What the rule
loop decides from those (which samples feed which output series, with what labels, which
histogram bucket, the page's models and engines) is a ``Plan``; the next page of the same
shape reuses it and only sums the new values (dialects._run).  The rule loop was ~1.5 ms
of each 3.5 ms scrape on the event loop for a 414-line vLLM page (benchmarks/cpu-issue23.md,
stop 29).

The shape check compares everything the rule loop reads except the values: the dialect
table (``registry.dialects()``, rebuilt when a kind is registered), the instance, each
family's name, type and sample count (the caps, merged repeated families), and each
sample's name and labels, in page order.  Labels compare by content; promtext hands out
the same ``FrozenLabels`` object for an unchanged series, so the comparison is mostly
identity.  A plan is only kept when every sample's labels are ``FrozenLabels``: a plain
dict could be edited by its owner after the plan was made (the kept list holds the very
objects), and the comparison would then be against the edited dict.

Bounded: one plan per instance (the last shape seen), at most ``MAX_PLANS`` instances.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import Any

from .promtext import Family, FrozenLabels

__all__ = ["ADD", "BUCKET", "HSUM", "HCOUNT", "Plan", "Shape", "shape_of", "known", "remember", "clear"]

MAX_PLANS = 64   # instances (servers) whose last page shape is kept; a fleet's direct probes

_name = attrgetter("name")
_labels = attrgetter("labels")
_type = attrgetter("type")
_samples = attrgetter("samples")
_first = itemgetter(0)


@dataclass(frozen=True, slots=True)
class Shape:
    """Everything the mapping of a page reads except its values."""

    instance: str
    dialects: Mapping[str, Any]   # registry.dialects(): a new object when kinds change
    families: tuple[str, ...]
    types: tuple[str, ...]
    sizes: tuple[int, ...]
    names: list[str]
    labels: list[Any]

    def same(self, other: Shape) -> bool:
        return (self.dialects is other.dialects and self.instance == other.instance
                and self.families == other.families and self.types == other.types
                and self.sizes == other.sizes and self.names == other.names
                and self.labels == other.labels)


# what an operation does with its sample's value (dialects._run): a scalar series' value
# (times a scale), one histogram bucket's count, the histogram's _sum, its _count
ADD, BUCKET, HSUM, HCOUNT = range(4)


class Plan:
    """What the rule loop decided for one page shape (built by dialects._compile).

    ``accs``: the output series, (key, kind, agg, fraction), in the order first fed;
    ``ops``: (series index, operation, sample position in page order, argument), in the
    order the rule loop visits them.  Kept as ``series``: per output series its kind,
    aggregation, fraction flag, its operations in order, and for a histogram whose every
    bucket bound is fed by one sample (distinct, not NaN) the positions to read in C:
    (bucket positions, their bounds, (position, scale) of each _sum, _count positions)."""

    __slots__ = ("dialect", "models", "engines", "keys", "series", "shape", "plain", "last",
                 "tail")

    def __init__(self, dialect, models: list[str], engines: list[str], accs: list[tuple],
                 ops: list[tuple], plain: bool = False) -> None:
        self.dialect = dialect
        # every family named once and none cut by the caps: the families by name are the
        # page's families as they are
        self.plain = plain
        self.models, self.engines = models, engines
        self.keys = tuple(a[0] for a in accs)
        per: list[list[tuple]] = [[] for _ in accs]
        for n, op, i, arg in ops:
            per[n].append((op, i, arg))
        self.series = tuple((kind, agg, fraction, tuple(mine), _histogram(mine),
                             tuple(i for _, i, _ in mine))
                            for (_, kind, agg, fraction), mine in zip(accs, per))
        # per series, what the last page of this plan gave: (the samples it read, its
        # accumulator, its reading or None, the note it added); dialects._run/_finish
        self.last: list[tuple | None] = [None] * len(accs)
        self.tail: tuple | None = None   # server.info and server.families (dialects.py)
        self.shape: Shape | None = None


def _histogram(ops: list[tuple]) -> tuple | None:
    if not ops or any(op not in (BUCKET, HSUM, HCOUNT) for op, _, _ in ops):
        return None
    buckets = [(arg[0], i) for op, i, arg in ops if op is BUCKET]
    les = [le for le, _ in buckets]
    if len(set(les)) != len(les) or any(le != le for le in les):
        return None     # two samples of one bound (summed in order), or a NaN bound
    # by bound, as dialects._finish sorts them (then in order already: one pass)
    buckets.sort(key=_first)
    return (tuple(i for _, i in buckets), tuple(le for le, _ in buckets),
            tuple((i, arg) for op, i, arg in ops if op is HSUM),
            tuple(i for op, i, _ in ops if op is HCOUNT))


_PLANS: dict[str, Plan] = {}


def shape_of(families: list[Family], samples: list, instance: str,
             dialects: Mapping[str, Any]) -> Shape:
    labels = list(map(_labels, samples))
    return Shape(instance, dialects, tuple(map(_name, families)), tuple(map(_type, families)),
                 tuple(map(len, map(_samples, families))), list(map(_name, samples)), labels)


def known(shape: Shape) -> Plan | None:
    """The plan made for a page of exactly this shape, if it is the instance's last."""
    plan = _PLANS.get(shape.instance)
    if plan is not None and plan.shape is not None and plan.shape.same(shape):
        return plan
    return None


def remember(shape: Shape, plan: Plan) -> None:
    if not set(map(type, shape.labels)) <= {FrozenLabels}:
        _PLANS.pop(shape.instance, None)
        return
    if len(_PLANS) >= MAX_PLANS and shape.instance not in _PLANS:
        _PLANS.clear()
    plan.shape = shape
    _PLANS[shape.instance] = plan


def clear() -> None:
    """Forget every plan (tests and benchmarks measure a first mapping)."""
    _PLANS.clear()
