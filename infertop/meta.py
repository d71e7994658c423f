"""Typed per-probe meta: the descriptive facts a Sample carries beside its readings.

Each source has its own frozen class (what the NVML probe knows of its GPUs, the process
probe of the server it follows, a server scrape of its dialect and URL...), so a pane or
the report asks ``snap.process_meta().tree``, not ``snap.meta("tree")``: a misspelt
field is an AttributeError and a type checker's error, not a silent None.

Recordings keep the JSON they always had: ``to_dict`` writes the fields that differ from
their default under the old names, ``meta_from_dict`` reads them back (and any older or
hostile file: a field of the wrong type is left at its default, never an exception),
choosing the class from the sample's source name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True, slots=True)
class GpuName:
    """One GPU as the header names it (NVML index or DCGM gpu label)."""

    index: int | str
    name: str = ""
    uuid: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "uuid": self.uuid}


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """The server process the process probe follows (discovery.ServerProcess, in short)."""

    pid: int | None = None
    kind: str = ""
    name: str = ""
    reason: str = ""      # how it was found, shown in the header
    port: int | None = None
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
    gpm: tuple[int, ...] = ()     # GPUs with GPM (Hopper+)
    xid: tuple[int, ...] = ()     # GPUs whose Xid events are watched
    demo: bool = False
    hostname: str = ""            # dcgm-exporter's Hostname label
    dcgm: bool = False            # read from a dcgm-exporter page
    node: str = ""
    via: str = ""                 # how a fleet read it ("prometheus dcgm-exporter")
    instances: tuple[str, ...] = ()
    url: str | None = None        # a dcgm-exporter page read directly
    scrape_bytes: int | None = None
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return _changed(self)


@dataclass(frozen=True, slots=True)
class ProcessMeta:
    """The server's process tree as the process probe found it."""

    in_container: bool | None = None
    in_container_why: str = ""
    server: ServerInfo | None = None
    tree: tuple[int, ...] = ()
    looked_for: str = ""          # what discovery looked for, when it found nothing
    reason: str = ""              # why no server is followed
    pid_aliases: tuple[tuple[int, int], ...] = ()   # (NVML pid, our pid) in a container
    node: str = ""

    def to_dict(self) -> dict[str, Any]:
        return _changed(self)


@dataclass(frozen=True, slots=True)
class ServerMeta:
    """One server's /metrics scrape (live, demo, or a fleet's)."""

    dialect: str | None = None
    model: str | None = None
    engines: tuple[str, ...] = ()
    series_dropped: int = 0       # series past the cardinality caps
    notes: tuple[str, ...] = ()
    url: str | None = None
    scrape_bytes: int | None = None
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
    since: float | None = None
    node: str = ""

    def to_dict(self) -> dict[str, Any]:
        return _changed(self)


@dataclass(frozen=True, slots=True)
class GilMeta:
    """The GIL sampler's target process."""

    gil_pid: int | None = None
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
    shown: int = 0
    detail: tuple[str, ...] = ()
    rows_per_column: int | None = None
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


def meta_from_dict(source: str, d: Any) -> SampleMeta:
    """A recording's (or a legacy caller's) meta dict as the source's typed meta; unknown
    names are dropped, values of the wrong type left at their default."""
    cls = meta_class(source)
    if not isinstance(d, Mapping) or not d:
        return NO_META if cls is NoMeta else cls()
    kw: dict[str, Any] = {}
    for f in fields(cls):
        if f.name in d:
            got = _CONVERT[(cls.__name__, f.name)](d[f.name])
            if got is not _BAD:
                kw[f.name] = got
    return cls(**kw)


# ---- conversion of JSON values (hostile files included) --------------------------------
_BAD = object()


def _str(v: Any) -> Any:
    return v if isinstance(v, str) else _BAD


def _opt_str(v: Any) -> Any:
    return v if v is None or isinstance(v, str) else _BAD


def _bool(v: Any) -> Any:
    return v if isinstance(v, bool) else _BAD


def _opt_bool(v: Any) -> Any:
    return v if v is None or isinstance(v, bool) else _BAD


def _int(v: Any) -> Any:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return _BAD
    return int(v) if math.isfinite(v) else _BAD


def _opt_int(v: Any) -> Any:
    return None if v is None else _int(v)


def _opt_float(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return _BAD
    return float(v)


def _tuple_of(item: Any) -> Any:
    def conv(v: Any) -> Any:
        if not isinstance(v, (list, tuple)):
            return _BAD
        out = tuple(item(x) for x in v)
        return _BAD if any(x is _BAD for x in out) else out
    return conv


def _mappings(v: Any) -> Any:
    """Dicts from a recording (anything else in the list is left out), their non-finite
    numbers (JSON's NaN/Infinity, which Python's reader accepts) as None: the recorder
    writes with allow_nan=False."""
    if not isinstance(v, (list, tuple)):
        return _BAD
    return tuple(_finite_json(dict(x)) for x in v if isinstance(x, Mapping))


def _finite_json(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, Mapping):
        return {str(k): _finite_json(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite_json(x) for x in v]
    return v


def _str_or_int(v: Any) -> Any:
    return v if isinstance(v, str) else _int(v)


def _gpu(v: Any) -> Any:
    if not isinstance(v, Mapping):
        return _BAD
    index = _str_or_int(v.get("index", 0))
    name, uuid = v.get("name", ""), v.get("uuid", "")
    if index is _BAD or not isinstance(name, str) or not isinstance(uuid, str):
        return _BAD
    return GpuName(index, name, uuid)


def _alias(v: Any) -> Any:
    if not isinstance(v, (list, tuple)) or len(v) != 2:
        return _BAD
    a, p = _int(v[0]), _int(v[1])
    return _BAD if a is _BAD or p is _BAD else (a, p)


def _server(v: Any) -> Any:
    if v is None:
        return None
    if not isinstance(v, Mapping):
        return _BAD
    kw: dict[str, Any] = {}
    for name, conv in (("pid", _opt_int), ("kind", _str), ("name", _str), ("reason", _str),
                       ("port", _opt_int), ("found_by", _str), ("container", _str)):
        if name in v:
            got = conv(v[name])
            if got is not _BAD:
                kw[name] = got
    return ServerInfo(**kw)


_CONVERT: dict[tuple[str, str], Any] = {
    ("NoMeta", "node"): _str,
    ("NvmlMeta", "gpus"): _tuple_of(_gpu), ("NvmlMeta", "driver"): _str,
    ("NvmlMeta", "gpm"): _tuple_of(_int), ("NvmlMeta", "xid"): _tuple_of(_int),
    ("NvmlMeta", "demo"): _bool, ("NvmlMeta", "hostname"): _str, ("NvmlMeta", "dcgm"): _bool,
    ("NvmlMeta", "node"): _str, ("NvmlMeta", "via"): _str,
    ("NvmlMeta", "instances"): _tuple_of(_str), ("NvmlMeta", "url"): _opt_str,
    ("NvmlMeta", "scrape_bytes"): _opt_int, ("NvmlMeta", "warnings"): _tuple_of(_str),
    ("ProcessMeta", "in_container"): _opt_bool, ("ProcessMeta", "in_container_why"): _str,
    ("ProcessMeta", "server"): _server, ("ProcessMeta", "tree"): _tuple_of(_int),
    ("ProcessMeta", "looked_for"): _str, ("ProcessMeta", "reason"): _str,
    ("ProcessMeta", "pid_aliases"): _tuple_of(_alias), ("ProcessMeta", "node"): _str,
    ("ServerMeta", "dialect"): _opt_str, ("ServerMeta", "model"): _opt_str,
    ("ServerMeta", "engines"): _tuple_of(_str), ("ServerMeta", "series_dropped"): _int,
    ("ServerMeta", "notes"): _tuple_of(_str), ("ServerMeta", "url"): _opt_str,
    ("ServerMeta", "scrape_bytes"): _opt_int, ("ServerMeta", "warnings"): _tuple_of(_str),
    ("ServerMeta", "node"): _str, ("ServerMeta", "via"): _str,
    ("ServerMeta", "container"): _str,
    ("KvEventsMeta", "endpoints"): _tuple_of(_str), ("KvEventsMeta", "since"): _opt_float,
    ("KvEventsMeta", "node"): _str,
    ("GilMeta", "gil_pid"): _opt_int, ("GilMeta", "node"): _str,
    ("PrometheusMeta", "url"): _opt_str, ("PrometheusMeta", "node"): _str,
    ("AlertsMeta", "loaded"): _bool, ("AlertsMeta", "alerts"): _mappings,
    ("AlertsMeta", "why"): _str, ("AlertsMeta", "node"): _str,
    ("FleetOverviewMeta", "mode"): _str, ("FleetOverviewMeta", "shown"): _int,
    ("FleetOverviewMeta", "detail"): _tuple_of(_str),
    ("FleetOverviewMeta", "rows_per_column"): _opt_int, ("FleetOverviewMeta", "node"): _str,
}


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
