"""Build Snapshots from plain data in tests: ``snap(t, {"gpu.util_ratio": 0.9}, gpu=0)``."""

from __future__ import annotations

from typing import Any

from infertop.keys import SPECS
from infertop.model import Reading, Sample, Snapshot, Status, make_labels


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
