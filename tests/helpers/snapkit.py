"""Build Snapshots from plain data in tests: ``snap(t, {"gpu.util_ratio": 0.9}, gpu=0)``."""

from __future__ import annotations

from typing import Any, TypeVar

from infertop.keys import SPECS
from infertop.model import Reading, Sample, Snapshot, Status, make_labels

_M = TypeVar("_M")
_T = TypeVar("_T")


def reading(key: str, value: float | None, *, status: Status = Status.OK, text: str | None = None,
            buckets=None, hist_sum: float | None = None, **labels: Any) -> Reading:
    spec = SPECS[key]
    return Reading(key, value, spec.unit, make_labels(labels), status, "", spec.kind, text,
                   tuple(buckets) if buckets is not None else None, hist_sum)


def snap(t: float, *samples: Sample, tick: int = 0) -> Snapshot:
    return Snapshot(time=t, samples={s.source: s for s in samples}, tick=tick)


def sample(source: str, t: float, readings: list[Reading], status: Status = Status.OK,
           reason: str = "") -> Sample:
    return Sample(source, t, tuple(readings), status, reason)


def hist(key: str, t_count_pairs: dict[float, float], hist_sum: float, **labels: Any) -> Reading:
    """A histogram reading from {upper bound: cumulative count}; +Inf added if absent."""
    bs = sorted(t_count_pairs.items())
    if bs[-1][0] != float("inf"):
        bs.append((float("inf"), bs[-1][1]))
    return reading(key, bs[-1][1], buckets=bs, hist_sum=hist_sum, **labels)


# ---- typed reads for assertions: each fails the test where the thing is absent ----------
def meta_of(sample: Sample, cls: type[_M]) -> _M:
    """The sample's meta as the class the test expects (``meta_of(s, ProcessMeta).tree``)."""
    assert isinstance(sample.meta, cls), \
        f"{sample.source}: meta is {type(sample.meta).__name__}, not {cls.__name__}"
    return sample.meta


def must(x: _T | None, what: str = "a value") -> _T:
    """``x``, which the test needs present (``must(demo.next_sync())``): fails on None."""
    assert x is not None, f"expected {what}, got None"
    return x


def value_of(r: Reading | None) -> float:
    """The reading's value (``value_of(snap.first(key))``): fails on no reading or no value."""
    assert r is not None, "no such reading"
    assert r.value is not None, r
    return r.value
