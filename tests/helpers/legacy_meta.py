"""The per-sample meta decoder of infertop/meta.py before issue 36 (commit 7398664): a
hand-written converter table that left a field of the wrong type at its default.  Kept as
the baseline of benchmarks/bench_meta_decode.py and of tests/test_meta_typed.py (every
real recording decodes to the same meta through both)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from infertop.meta import NO_META, GpuName, NoMeta, SampleMeta, ServerInfo, meta_class


def legacy_meta_from_dict(source: str, d: Any) -> SampleMeta:
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
