"""The recording format: JSON Lines (optionally gzip), a versioned header, raw snapshots.

    {"format": "infertop-recording", "schema": 1, "infertop": "0.1.0", "host": ...,
     "started": 1767225600.0, "source": {...}, "gpus": [...], "server": {...}, ...}
    {"time": ..., "tick": 1, "samples": {...}, "capabilities": {...}}   <- Snapshot.to_dict
    ...

Only raw Snapshots are stored (cumulative counters, histogram buckets), never derived
values, so a recording is re-diagnosed by whatever rules the reader has.  The file is
append-only and written a line at a time: a crash loses at most the line being written,
and a reader tolerates that truncated last line.  Anything else wrong (not a recording, a
corrupt header, a newer schema) is a ``RecordingError`` with one line for a person.

Pure: bytes in, bytes out.  The file I/O lives in ``infertop.probes.sources.recorder`` (writing,
through aiofiles) and ``infertop.probes.sources.replay`` (reading).
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec

from . import __version__
from .meta import (
    MAX_UNIX_TIME,
    MetaError,
    NvmlMeta,
    ProcessMeta,
    ServerMeta,
    meta_from_dict,
)
from .model import Snapshot
from .textclean import clean_deep

FORMAT = "infertop-recording"
SCHEMA = 1
GZIP_MAGIC = b"\x1f\x8b"
# a snapshot's unix time must lie between 1970 and the year 3000 (meta.MAX_UNIX_TIME): 1e308 is no
# date, and durations, rates and the report's clock are computed from it
MAX_TIME = MAX_UNIX_TIME
_TIME_RE = re.compile(rb'^\{"time":\s*(-?[0-9.eE+-]+)\s*,')


class RecordingError(ValueError):
    """A file that cannot be replayed; the message is one line for a person."""


# ---- header --------------------------------------------------------------------------
def make_header(describe: Mapping[str, Any], first: Snapshot | None, *, host: str,
                started: float, interval: float | None = None, part: int = 0) -> dict:
    """The header of a recording: who wrote it, of what machine, server and GPUs."""
    gpus: list[Any] = []
    server: dict[str, Any] = {}
    if first is not None:
        nvml = first.samples.get("nvml")
        if nvml is not None and isinstance(nvml.meta, NvmlMeta):
            gpus = [g.to_dict() for g in nvml.meta.gpus]
        for name, s in first.samples.items():
            if name.startswith("server:"):
                m = s.meta if isinstance(s.meta, ServerMeta) else ServerMeta()
                server = {"kind": m.dialect, "model": m.model, "url": m.url, "source": name}
                break
        proc = first.samples.get("process")
        if not server.get("kind") and proc is not None and \
                isinstance(proc.meta, ProcessMeta) and proc.meta.server is not None:
            server["kind"] = proc.meta.server.kind
    if not gpus:
        gpus = list(describe.get("gpus") or [])
    if not server and isinstance(describe.get("server"), Mapping):
        server = dict(describe["server"])
    return {"format": FORMAT, "schema": SCHEMA, "infertop": __version__, "host": host,
            "started": started, "source": dict(describe), "gpus": gpus, "server": server,
            "interval": interval, "part": part}


def encode_header(header: Mapping[str, Any]) -> bytes:
    return (json.dumps(dict(header), separators=(",", ":"), sort_keys=False, default=str)
            + "\n").encode("utf-8")


# ---- the header, typed: every reader (replay, report, compare, doctor, snapshot, rules
# promtool-input, the replay screen) reads it through check_header, so a field of the wrong
# type ("interval": "abc", "host": {...}, "started": NaN) is one line here, not a
# traceback in the ninth reader that forgot an isinstance (issue 36 case 10).  Fields a
# writer may add later are kept as they are (msgspec ignores them).
class _HeaderServer(msgspec.Struct, frozen=True):
    kind: str | None = None
    model: str | None = None
    url: str | None = None
    source: str | None = None


class _HeaderSource(msgspec.Struct, frozen=True):
    capabilities: dict[str, Any] | None = None
    fleet: bool = False


class Header(msgspec.Struct):
    format: str
    schema: int
    infertop: str = ""
    host: str = ""
    # NaN fails every bound: a NaN time or interval is refused with them
    started: Annotated[float, msgspec.Meta(ge=0.0, le=MAX_TIME)] | None = None
    source: _HeaderSource = _HeaderSource()
    gpus: list[dict[str, Any]] = []
    server: _HeaderServer = _HeaderServer()
    # seconds between ticks: at most a day (a recording's grid is built from it)
    interval: Annotated[float, msgspec.Meta(ge=0.0, le=86400.0)] | None = None
    part: Annotated[int, msgspec.Meta(ge=0, le=1_000_000)] = 0


def check_header(obj: Any, name: str) -> dict:
    """A parsed first line -> the header, or RecordingError saying what is wrong."""
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise RecordingError(f"{name}: not an infertop recording (no \"format\": \"{FORMAT}\" "
                             "header on the first line)")
    schema = obj.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        raise RecordingError(f"{name}: corrupt recording header (schema is {schema!r}, "
                             "expected a positive integer)")
    if schema > SCHEMA:
        by = obj.get("infertop", "a newer infertop")
        raise RecordingError(f"{name}: recorded with schema {schema} by infertop {by}; this "
                             f"infertop {__version__} reads schema {SCHEMA}: upgrade infertop")
    try:
        msgspec.convert(obj, Header)
    except (msgspec.ValidationError, RecursionError) as e:
        raise RecordingError(f"{name}: corrupt recording header ({_short(e)})") from None
    return obj


def parse_header_line(line: bytes, name: str) -> dict:
    try:
        obj = json.loads(line.decode("utf-8"))
    # RecursionError: JSON nested deeper than Python's stack (a line of 400 KB of "[")
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        if FORMAT.encode() in line[:200]:
            raise RecordingError(f"{name}: corrupt recording header ({_short(e)})") from None
        raise RecordingError(f"{name}: not an infertop recording (the first line is not "
                             "JSON)") from None
    return check_header(_clean_obj(line, obj), name)


# ---- snapshots -------------------------------------------------------------------------
def encode_snapshot(snap: Snapshot) -> bytes:
    """One line; ``time`` first so a reader can index lines without parsing them."""
    d = snap.to_dict()
    for s in d["samples"].values():
        _writable_meta(s)
    return (json.dumps(d, separators=(",", ":"), allow_nan=False, default=str)
            + "\n").encode("utf-8")


def _writable_meta(sample: dict[str, Any]) -> None:
    """The writer follows the reader: a meta that meta_from_dict would refuse (a value from
    outside past its range: a server's ``--port 99999`` on its command line, ``--pid`` past
    pid_max) is not written, so one sample's facts are lost and not, on replay, the whole
    line it sits in (the reader skips a line with a refused meta)."""
    meta = sample.get("meta")
    if meta:
        try:
            meta_from_dict(str(sample.get("source", "")), meta)
        except MetaError:
            del sample["meta"]


def _clean_obj(line: bytes, obj: Any) -> Any:
    """A recording is outside input too (anyone can hand you a file): strings with control
    or bidi characters are made visible.  Our own writer escapes every non-ASCII character
    (``\\u...``), so a line that is ASCII and has no ``\\u`` needs no walk."""
    if line.isascii() and b"\\u" not in line:
        return obj
    return clean_deep(obj)


def decode_snapshot(line: bytes) -> Snapshot:
    try:
        return Snapshot.from_dict(_clean_obj(line, json.loads(line)))
    # a line of the wrong shape ("samples": [1,2,3], a number for a dict) fails as any of
    # these inside from_dict; each is the same one-line "corrupt" error
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError,
            RecursionError) as e:
        raise RecordingError(f"corrupt snapshot line ({_short(e)})") from None


def line_time(line: bytes | bytearray) -> float | None:
    """A snapshot line's time without parsing the whole line (None: not a snapshot)."""
    m = _TIME_RE.match(line)
    if m:
        try:
            return float(m.group(1))
        except ValueError:
            return None
    return None


def snapshot_time(line: bytes | bytearray) -> float | None:
    """The recorded time of a snapshot line: the fast path reads only its start; else the
    whole line is parsed.  None: another kind of line (not a snapshot, e.g. a future event
    line).  ValueError: a corrupt line (not JSON, or a time that is not a number)."""
    t = line_time(line[:64] if len(line) > 64 else line)
    if t is None:
        try:
            obj = json.loads(line)   # ValueError (JSONDecodeError) when it is not JSON
        except RecursionError:       # nested deeper than the stack: not one of ours
            raise ValueError("a line nested too deeply") from None
        if not isinstance(obj, dict) or "samples" not in obj:
            return None
        try:
            t = float(obj.get("time", 0.0))
        except (TypeError, ValueError, OverflowError):
            raise ValueError("a snapshot line whose time is not a number") from None
    if not 0.0 <= t <= MAX_TIME:   # NaN fails both: every later date and span is a number
        raise ValueError("a snapshot line whose time is out of range")
    return t


# ---- whole files -----------------------------------------------------------------------
@dataclass
class Decoded:
    header: dict
    lines: list[bytes]            # raw snapshot lines, in order
    times: list[float]            # each line's snapshot time
    truncated: bool = False       # the last line was cut short (a crash or a kill)
    skipped: int = 0              # unreadable lines in the middle, left out
    notes: list[str] = field(default_factory=list)


def decompress(data: bytes) -> tuple[bytes, bool]:
    """Gzip data (possibly several members, possibly cut short) -> (bytes, complete?)."""
    out: list[bytes] = []
    complete = True
    while data:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out.append(d.decompress(data))
        except zlib.error:
            complete = False
            break
        if not d.eof:
            complete = False  # stream ended early: keep what was flushed
            break
        data = d.unused_data
        if data[:2] != GZIP_MAGIC:
            break
    return b"".join(out), complete


def decode(data: bytes, name: str = "recording") -> Decoded:
    """Split a whole recording (plain or gzip) into header and snapshot lines."""
    if not data:
        raise RecordingError(f"{name}: empty file, not an infertop recording")
    gz_complete = True
    if data[:2] == GZIP_MAGIC:
        data, gz_complete = decompress(data)
        if not data:
            raise RecordingError(f"{name}: gzip data holds nothing readable")
    head, _, rest = data.partition(b"\n")
    header = parse_header_line(head, name)
    out = Decoded(header, [], [])
    pieces = rest.split(b"\n")
    last_cut = pieces[-1] != b""   # the file did not end with a newline
    if not last_cut:
        pieces.pop()
    n = len(pieces)
    for i, line in enumerate(pieces):
        if not line.strip():
            continue
        is_last = i == n - 1
        if is_last and (last_cut or not gz_complete):
            try:
                json.loads(line)
            except ValueError:
                out.truncated = True
                out.notes.append("last line cut short (the recorder was stopped mid-write)")
                break
            except RecursionError:   # whole but nested too deeply: corrupt, counted below
                pass
        try:
            t = snapshot_time(line)
        except ValueError:
            out.skipped += 1   # not JSON, or "time": "soon": not a snapshot we can place
            continue
        if t is None:
            continue
        out.lines.append(line)
        out.times.append(t)
    if not gz_complete and not out.truncated:
        out.truncated = True
        out.notes.append("gzip stream cut short (the recorder was stopped mid-write)")
    return out


def iter_snapshots(dec: Decoded) -> Iterator[Snapshot]:
    for line in dec.lines:
        yield decode_snapshot(line)


def _short(e: Exception) -> str:
    return str(e).splitlines()[0][:120] if str(e) else type(e).__name__
