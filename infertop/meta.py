"""Typed per-probe meta: the descriptive facts a Sample carries beside its readings.

Each source has its own frozen class (what the NVML probe knows of its GPUs, the process
probe of the server it follows, a server scrape of its dialect and URL...), so a pane or
the report asks ``snap.process_meta().tree``, not ``snap.meta("tree")``: a misspelt
field is an AttributeError and a type checker's error, not a silent None.

Recordings keep the JSON they always had: ``to_dict`` writes the fields that differ from
their default under the old names, ``meta_from_dict`` reads them back, choosing the class from
the sample's source name, decoded by msgspec against the annotations below: a field of the
wrong shape, type or range is a one-line ``MetaError`` (never a traceback, never a silent
default), and the readers skip that snapshot line and count it as they do any corrupt line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Annotated, Any

import msgspec

# ---- the ranges a recorded value must lie in: msgspec checks them when a recording's meta
# is decoded (meta_from_dict); the probes build these classes directly.
# a unix time between 1970 and the year 3000: 1e308 (or inf) is no date; the one bound of
# recorded times (recording.MAX_TIME) and KV-event batch times (kvevents.MAX_TS)
MAX_UNIX_TIME = 32_503_680_000.0
Pid = Annotated[int, msgspec.Meta(ge=0, le=4_194_304)]       # Linux's pid_max is at most 2**22
Port = Annotated[int, msgspec.Meta(ge=0, le=65_535)]
GpuIndex = Annotated[int, msgspec.Meta(ge=0, le=65_535)]     # NVML's index (DCGM's label: a str)
Count = Annotated[int, msgspec.Meta(ge=0, le=2 ** 53)]       # bytes, series: exact as a float
UnixTime = Annotated[float, msgspec.Meta(ge=0.0, le=MAX_UNIX_TIME)]   # NaN and inf fail it too


@dataclass(frozen=True, slots=True)
class GpuName:
    """One GPU as the header names it (NVML index or DCGM gpu label)."""

    index: GpuIndex | str
    name: str = ""
    uuid: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "uuid": self.uuid}


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """The server process the process probe follows (discovery.ServerProcess, in short)."""

    pid: Pid | None = None
    kind: str = ""
    name: str = ""
    reason: str = ""      # how it was found, shown in the header
    port: Port | None = None
    found_by: str = ""    # "name, not port": --url's port owner could not be read
    container: str = ""   # the container or namespace/pod it runs in ("" on the host)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"pid": self.pid, "kind": self.kind, "name": self.name,
                             "reason": self.reason, "port": self.port}
        if self.found_by:
            d["found_by"] = self.found_by
        if self.container:
            d["container"] = self.container
        return d


@dataclass(frozen=True, slots=True)
class NoMeta:
    """A source with nothing to add (``node``: its node, in a fleet)."""

    node: str = ""

    def to_dict(self) -> dict[str, Any]:
        return _changed(self)


@dataclass(frozen=True, slots=True)
class NvmlMeta:
    """The GPUs: from NVML, the demo, or a node's dcgm-exporter (``dcgm``, fleet)."""

    gpus: tuple[GpuName, ...] = ()
    driver: str = ""
    gpm: tuple[GpuIndex, ...] = ()     # GPUs with GPM (Hopper+)
    xid: tuple[GpuIndex, ...] = ()     # GPUs whose Xid events are watched
    demo: bool = False
    hostname: str = ""            # dcgm-exporter's Hostname label
    dcgm: bool = False            # read from a dcgm-exporter page
    node: str = ""
    via: str = ""                 # how a fleet read it ("prometheus dcgm-exporter")
    instances: tuple[str, ...] = ()
    url: str | None = None        # a dcgm-exporter page read directly
    scrape_bytes: Count | None = None
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return _changed(self)


@dataclass(frozen=True, slots=True)
class ProcessMeta:
    """The server's process tree as the process probe found it."""

    in_container: bool | None = None
    in_container_why: str = ""
    server: ServerInfo | None = None
    tree: tuple[Pid, ...] = ()
    looked_for: str = ""          # what discovery looked for, when it found nothing
    reason: str = ""              # why no server is followed
    pid_aliases: tuple[tuple[Pid, Pid], ...] = ()   # (NVML pid, our pid) in a container
    node: str = ""

    def to_dict(self) -> dict[str, Any]:
        return _changed(self)


@dataclass(frozen=True, slots=True)
class ServerMeta:
    """One server's /metrics scrape (live, demo, or a fleet's)."""

    dialect: str | None = None
    model: str | None = None
    engines: tuple[str, ...] = ()
    series_dropped: Count = 0       # series past the cardinality caps
    notes: tuple[str, ...] = ()
    url: str | None = None
    scrape_bytes: Count | None = None
    warnings: tuple[str, ...] = ()
    node: str = ""
    via: str = ""
    container: str = ""   # the container or namespace/pod it runs in (probes/server/reach.py)

    def to_dict(self) -> dict[str, Any]:
        return _changed(self)


@dataclass(frozen=True, slots=True)
class KvEventsMeta:
    """A KV-event subscriber's endpoints, and since when it counts."""

    endpoints: tuple[str, ...] = ()
    since: UnixTime | None = None
    node: str = ""

    def to_dict(self) -> dict[str, Any]:
        return _changed(self)


@dataclass(frozen=True, slots=True)
class GilMeta:
    """The GIL sampler's target process."""

    gil_pid: Pid | None = None
    node: str = ""

    def to_dict(self) -> dict[str, Any]:
        return _changed(self)


@dataclass(frozen=True, slots=True)
class PrometheusMeta:
    """The fleet's Prometheus: its URL (while it fails), or one node's target states."""

    url: str | None = None
    node: str = ""

    def to_dict(self) -> dict[str, Any]:
        return _changed(self)


@dataclass(frozen=True, slots=True)
class AlertsMeta:
    """The fleet's Prometheus alerts of infertop's exported rules (probes/prometheus/
    aggregates.py): whether the rule group is loaded, its active alerts (each a cleaned dict:
    labels, annotations, state, value, active_at, node), and why they were not read."""

    loaded: bool = False
    alerts: tuple[Mapping[str, Any], ...] = ()
    why: str = ""
    node: str = ""

    def to_dict(self) -> dict[str, Any]:
        return _changed(self)


@dataclass(frozen=True, slots=True)
class FleetOverviewMeta:
    """Aggregate mode's fleet-wide sample: how many nodes are shown, which are read whole."""

    mode: str = ""
    shown: Count = 0
    detail: tuple[str, ...] = ()
    rows_per_column: Count | None = None
    node: str = ""

    def to_dict(self) -> dict[str, Any]:
        return _changed(self)


SampleMeta = (NoMeta | NvmlMeta | ProcessMeta | ServerMeta | KvEventsMeta | GilMeta
              | PrometheusMeta | AlertsMeta | FleetOverviewMeta)
NO_META = NoMeta()


def meta_url(snap: Any) -> str | None:
    """The URL of the first sample that was read from one (a server's /metrics, a
    node's dcgm-exporter page, the fleet's Prometheus), in the Snapshot's order."""
    for s in snap.samples.values():
        m = s.meta
        if isinstance(m, (ServerMeta, NvmlMeta, PrometheusMeta)) and m.url is not None:
            return m.url
    return None


def meta_class(source: str) -> type:
    """The meta class of a source name: ``nvml``/``nvml@node``, ``process``,
    ``server:instance[@node]``, ``kvevents:instance``, ``gil``; anything else NoMeta."""
    base = source.split("@", 1)[0]
    if base == "nvml":
        return NvmlMeta
    if base == "process":
        return ProcessMeta
    if base.startswith("server:"):
        return ServerMeta
    if base.startswith("kvevents:"):
        return KvEventsMeta
    if base == "gil":
        return GilMeta
    if base == "prometheus":
        return PrometheusMeta
    if base == "prometheus-alerts":       # infertop.fleet.ALERTS_SAMPLE
        return AlertsMeta
    if base == "prometheus-aggregates":   # infertop.fleet.AGGREGATES_SAMPLE
        return FleetOverviewMeta
    return NoMeta


def empty_meta(source: str) -> SampleMeta:
    """The meta of a source that has not said anything yet."""
    cls = meta_class(source)
    return NO_META if cls is NoMeta else cls()


class MetaError(ValueError):
    """A recorded meta of the wrong shape, type or range; the message is one line naming
    the source and the field (``meta of process: tree[1]: expected `int`, got `str```)."""


def meta_from_dict(source: str, d: Any) -> SampleMeta:
    """A recording's (or a legacy caller's) meta dict as the source's typed meta, decoded by
    msgspec against the class's annotations (the same library as the recording header):
    unknown names are ignored (a later writer may add some), a missing field keeps its
    default, and a value of the wrong shape, type or range is refused with ``MetaError``.
    The readers treat that as any corrupt snapshot line: skipped and counted (issue 36)."""
    cls = meta_class(source)
    if d is None or (isinstance(d, Mapping) and not d):
        return NO_META if cls is NoMeta else cls()
    try:
        meta: SampleMeta = msgspec.convert(d, cls)
    except msgspec.ValidationError as e:
        raise MetaError(f"meta of {source[:80]}: {_where(e)}") from None
    except RecursionError:   # nested deeper than the stack: no meta of ours
        raise MetaError(f"meta of {source[:80]}: nested too deeply") from None
    if isinstance(meta, AlertsMeta) and meta.alerts:
        # JSON's NaN/Infinity (Python's reader takes them) inside a recorded alert: the
        # recorder writes with allow_nan=False, so they become None to be written again
        meta = replace(meta, alerts=tuple(_finite_json(dict(a)) for a in meta.alerts))
    return meta


def _where(e: msgspec.ValidationError) -> str:
    """msgspec's "Expected `int`, got `str` - at `$.tree[1]`" as "tree[1]: expected ..."."""
    text = str(e).splitlines()[0] if str(e) else "invalid"
    what, sep, at = text.rpartition(" - at `$")
    if not sep:
        return text[:160]
    field = at.rstrip("`").lstrip(".")
    return f"{field[:80]}: {what[:1].lower()}{what[1:160]}"


def _finite_json(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, Mapping):
        return {str(k): _finite_json(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite_json(x) for x in v]
    return v


def _json(v: Any) -> Any:
    if isinstance(v, (GpuName, ServerInfo)):
        return v.to_dict()
    if isinstance(v, tuple):
        return [_json(x) for x in v]
    if isinstance(v, Mapping):
        return {k: _json(x) for k, x in v.items()}
    return v


def _changed(m: Any) -> dict[str, Any]:
    """The fields that differ from their default, as JSON values under their names."""
    out: dict[str, Any] = {}
    for f in fields(m):
        v = getattr(m, f.name)
        if v != f.default:
            out[f.name] = _json(v)
    return out
