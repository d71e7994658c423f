"""The values that cross every boundary: Reading, Sample, Snapshot, Capability.

Probes produce Samples, the hub bundles one Snapshot per tick, the core and the TUI only
read them.  Everything here is immutable and plain (no I/O library), so a Snapshot can be
recorded as JSON and replayed bit-for-bit: ``to_dict``/``from_dict`` are the wire format.
"""

from __future__ import annotations

import enum
import math
from collections.abc import (
    Iterator,
    Mapping,  # typing.Mapping's isinstance is 5x slower: hot path
)
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeGuard, TypeVar

from .meta import (
    NO_META,
    GilMeta,
    KvEventsMeta,
    NvmlMeta,
    ProcessMeta,
    SampleMeta,
    ServerMeta,
    meta_from_dict,
)

Labels = tuple[tuple[str, str], ...]
_M = TypeVar("_M", NvmlMeta, ProcessMeta, ServerMeta, KvEventsMeta, GilMeta)


class Layer(str, enum.Enum):
    """The six layers of the request path, in the order the screen shows them."""

    HARDWARE = "hardware"
    KERNELS = "kernels"
    MEMORY = "memory"
    SCHEDULING = "scheduling"
    PARALLELISM = "parallelism"
    DECODING = "decoding"

    # not `index`: that would shadow str.index (Layer is a str)
    @property
    def position(self) -> int:
        """The layer's place on screen, 0-5: its pane's number less one."""
        return LAYERS.index(self)


LAYERS: tuple[Layer, ...] = tuple(Layer)


class Status(str, enum.Enum):
    """How far a value can be trusted.

    OK: read this tick.  STALE: the source missed its deadline; value is the last good one.
    NODATA: the source works but has nothing for this key now (no request finished yet).
    UNSUPPORTED: this device/server cannot report it (NVML NotSupported, no GPM).
    ERROR: reading failed; ``reason`` says why.
    """

    OK = "ok"
    STALE = "stale"
    NODATA = "nodata"
    UNSUPPORTED = "unsupported"
    ERROR = "error"


class Kind(str, enum.Enum):
    """What a raw value means over time; History derives rates and quantiles from it."""

    GAUGE = "gauge"          # a level: use as is
    COUNTER = "counter"      # monotonically increasing; rate() it, watch for resets
    HISTOGRAM = "histogram"  # cumulative buckets; quantiles from bucket deltas
    INFO = "info"            # a text fact (GPU name, process role, server setting)


def make_labels(labels: Mapping[str, Any] | Labels | None = None, **more: Any) -> Labels:
    """Canonical labels: sorted (name, str(value)) pairs, so equal label sets hash equal."""
    items: dict[str, str] = {}
    if labels:
        pairs = labels.items() if isinstance(labels, Mapping) else labels
        for k, v in pairs:
            items[str(k)] = str(v)
    for k, v in more.items():
        items[k] = str(v)
    return tuple(sorted(items.items()))


def with_label(labels: Labels, name: str, value: object) -> Labels:
    """``make_labels(labels, **{name: value})``, memoised: the same series get the same
    quantile/of= labels every tick, in derive and in the rules (bounded: a server that
    renames its labels every scrape only evicts)."""
    try:
        return _with_label(labels, name, value)
    except TypeError:          # something unhashable in labels made by hand: no memo
        return make_labels(labels, **{name: value})


_SPECS: Mapping[str, Any] | None = None


def _key_specs() -> Mapping[str, Any]:
    """infertop/keys.py's SPECS (keys imports this module: looked up on first use)."""
    global _SPECS
    if _SPECS is None:
        from .keys import SPECS
        _SPECS = SPECS
    return _SPECS


@lru_cache(maxsize=4096, typed=True)
def _with_label(labels: Labels, name: str, value: object) -> Labels:
    return make_labels(labels, **{name: value})


@dataclass(frozen=True, slots=True)
class Reading:
    """One value of one quantity.

    ``key`` names the layer-neutral quantity with its unit (``gpu.sm_active_ratio``).
    ``value`` is None when status is not OK/STALE.  Histograms keep their raw cumulative
    ``buckets`` ((upper bound, cumulative count), +Inf last) plus ``hist_sum``; ``value``
    holds the count.  INFO readings carry their fact in ``text`` (value 1).
    ``Reading.of`` builds one with the unit and kind its key is declared with: the way a
    probe makes its readings (the plain constructor defaults to a unitless gauge).
    """

    key: str
    value: float | None
    unit: str = ""
    labels: Labels = ()
    status: Status = Status.OK
    reason: str = ""
    kind: Kind = Kind.GAUGE
    text: str | None = None
    buckets: tuple[tuple[float, float], ...] | None = None
    hist_sum: float | None = None

    @classmethod
    def of(cls, key: str, value: float | None,
           labels: Labels | Mapping[str, Any] = (), status: Status = Status.OK,
           reason: str = "", text: str | None = None) -> Reading:
        """A Reading of a declared key (infertop/keys.py), with its spec's unit and kind;
        the value is dropped where the status allows none (not OK or STALE).  KeyError
        for an undeclared key."""
        spec = _key_specs()[key]
        if status is not Status.OK and status is not Status.STALE:
            value = None
        if not isinstance(labels, tuple):
            labels = make_labels(labels)
        return cls(key, value, spec.unit, labels, status, reason, spec.kind, text)

    def label(self, name: str, default: str = "") -> str:
        for k, v in self.labels:
            if k == name:
                return v
        return default

    @property
    def ok(self) -> bool:
        return self.status in (Status.OK, Status.STALE) and self.value is not None

    @property
    def series(self) -> tuple[str, Labels]:
        return (self.key, self.labels)

    def with_status(self, status: Status, reason: str = "") -> Reading:
        return Reading(self.key, self.value if status in (Status.OK, Status.STALE) else None,
                       self.unit, self.labels, status, reason or self.reason, self.kind,
                       self.text, self.buckets, self.hist_sum)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"key": self.key, "labels": dict(self.labels),
                             "value": _num_out(self.value), "unit": self.unit,
                             "status": self.status.value}
        if self.reason:
            d["reason"] = self.reason
        if self.kind is not Kind.GAUGE:
            d["kind"] = self.kind.value
        if self.text is not None:
            d["text"] = self.text
        if self.buckets is not None:
            d["buckets"] = [[_num_out(le), _num_out(c)] for le, c in self.buckets]
        if self.hist_sum is not None:
            d["sum"] = _num_out(self.hist_sum)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Reading:
        buckets = d.get("buckets")
        return cls(
            key=str(d["key"]),
            value=_num_in(d.get("value")),
            unit=str(d.get("unit", "")),
            labels=make_labels(d.get("labels") or {}),
            status=Status(d.get("status", "ok")),
            reason=str(d.get("reason", "")),
            kind=Kind(d.get("kind", "gauge")),
            text=d.get("text"),
            # a null bound or count in a hostile file passes through as None, as it did
            buckets=tuple((_num_in(le), _num_in(c))  # type: ignore[misc]
                          for le, c in buckets) if buckets else None,
            hist_sum=_num_in(d.get("sum")),
        )


if TYPE_CHECKING:
    class Valued(Reading):
        """A Reading known to carry a value (OK or STALE, ``value`` not None): what
        ``has_value`` narrows to, so code past that check reads ``value`` as a float."""

        value: float
else:
    Valued = Reading   # the same objects at run time: only the type checker tells them apart


def has_value(r: Reading) -> TypeGuard[Valued]:
    """``r.ok`` as a type guard: OK or STALE with a value (a dead source's reading is not)."""
    return r.value is not None and r.status in (Status.OK, Status.STALE)


def _num_out(v: float | None) -> Any:
    """JSON has no NaN/Inf: spell them as strings (Prometheus style)."""
    if v is None:
        return None
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("+Inf" if v > 0 else "-Inf")
    return v


def _num_in(v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, str):
        return float(v.replace("Inf", "inf"))
    return float(v)


@dataclass(frozen=True, slots=True)
class Capability:
    """What a source can do here, and if not, why (shown on screen, never a traceback)."""

    source: str
    available: bool
    reason: str = ""
    features: frozenset[str] = frozenset()

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "available": self.available, "reason": self.reason,
                "features": sorted(self.features)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Capability:
        return cls(str(d["source"]), bool(d["available"]), str(d.get("reason", "")),
                   frozenset(d.get("features", ())))


@dataclass(frozen=True, slots=True)
class Sample:
    """Everything one source read at one time.

    ``status`` is the source's health this tick (OK, STALE when late, ERROR with reason).
    ``meta`` holds small descriptive facts for the header (server kind, model, url,
    dialect): the source's typed meta (infertop/meta.py).  A plain dict is accepted and
    read as a recording's meta is (``meta_from_dict``: a value of the wrong type is a
    ``MetaError``), for callers that predate it.
    """

    source: str
    time: float
    readings: tuple[Reading, ...] = ()
    status: Status = Status.OK
    reason: str = ""
    meta: SampleMeta = NO_META
    duration: float = 0.0  # seconds the collection took (shown in the header's health)

    def __post_init__(self) -> None:
        if isinstance(self.meta, Mapping):   # the from-dict path (tests, older callers)
            object.__setattr__(self, "meta", meta_from_dict(self.source, self.meta))

    def find(self, key: str) -> list[Reading]:
        return [r for r in self.readings if r.key == key]

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"source": self.source, "time": self.time,
                             "status": self.status.value,
                             "readings": [r.to_dict() for r in self.readings]}
        if self.reason:
            d["reason"] = self.reason
        meta = self.meta.to_dict()
        if meta:
            d["meta"] = meta
        if self.duration:
            d["duration"] = round(self.duration, 6)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Sample:
        return cls(source=str(d["source"]), time=float(d["time"]),
                   readings=tuple(Reading.from_dict(r) for r in d.get("readings", ())),
                   status=Status(d.get("status", "ok")), reason=str(d.get("reason", "")),
                   meta=meta_from_dict(str(d["source"]), d.get("meta")),
                   duration=float(d.get("duration", 0.0)))


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One tick: a Sample per source, taken together."""

    time: float
    samples: Mapping[str, Sample]
    tick: int = 0
    capabilities: Mapping[str, Capability] = field(default_factory=dict)

    def readings(self, key: str | None = None) -> Iterator[Reading]:
        for s in self.samples.values():
            for r in s.readings:
                if key is None or r.key == key:
                    yield r

    def first(self, key: str, **labels: str) -> Reading | None:
        for r in self.readings(key):
            if all(r.label(k) == v for k, v in labels.items()):
                return r
        return None

    def value(self, key: str, **labels: str) -> float | None:
        r = self.first(key, **labels)
        return r.value if r is not None and r.ok else None

    def first_meta(self, cls: type[_M]) -> _M | None:
        """The meta of the first sample whose meta is a ``cls``, if any."""
        for s in self.samples.values():
            if isinstance(s.meta, cls):
                return s.meta
        return None

    def nvml_meta(self) -> NvmlMeta | None:
        return self.first_meta(NvmlMeta)

    def process_meta(self) -> ProcessMeta | None:
        return self.first_meta(ProcessMeta)

    def server_meta(self) -> ServerMeta | None:
        return self.first_meta(ServerMeta)

    def to_dict(self) -> dict[str, Any]:
        return {"time": self.time, "tick": self.tick,
                "samples": {n: s.to_dict() for n, s in self.samples.items()},
                "capabilities": {n: c.to_dict() for n, c in self.capabilities.items()}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Snapshot:
        return cls(time=float(d["time"]), tick=int(d.get("tick", 0)),
                   samples={n: Sample.from_dict(s) for n, s in (d.get("samples") or {}).items()},
                   capabilities={n: Capability.from_dict(c)
                                 for n, c in (d.get("capabilities") or {}).items()})

