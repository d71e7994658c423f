"""A recording's per-sample meta is decoded by msgspec into its typed class (issue 36 item 2):
a value of the wrong shape, type or range is refused with one line naming the source and the
field, the snapshot line holding it is skipped and counted by the readers with its line
number in the file, and every real recording decodes to the same meta as the hand-written
decoder it replaced (tests/helpers/legacy_meta.py)."""

from __future__ import annotations

import gzip
import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.legacy_meta import legacy_meta_from_dict
from infertop.meta import (
    AlertsMeta,
    FleetOverviewMeta,
    GilMeta,
    KvEventsMeta,
    MetaError,
    NoMeta,
    NvmlMeta,
    ProcessMeta,
    PrometheusMeta,
    ServerMeta,
    meta_class,
    meta_from_dict,
)
from infertop.probes.sources.replay import ReplaySource
from infertop.recording import MAX_TIME, RecordingError, decode_snapshot

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

# one source name per class
SOURCE = {NoMeta: "scrape@n1", NvmlMeta: "nvml", ProcessMeta: "process",
          ServerMeta: "server:127.0.0.1:8000", KvEventsMeta: "kvevents:127.0.0.1:8000",
          GilMeta: "gil", PrometheusMeta: "prometheus", AlertsMeta: "prometheus-alerts",
          FleetOverviewMeta: "prometheus-aggregates"}

NAN, INF = float("nan"), float("inf")
# the wrong values of each kind of field: wrong types, wrong shapes, out of range
_NOT_TEXT: list[Any] = [1, 1.5, True, [], {}, ["x"], {"a": 1}]
_NOT_INT: list[Any] = ["42", 1.5, 42.0, True, [], {}, NAN, INF, [1]]
WRONG: dict[str, list[Any]] = {
    "str": [*_NOT_TEXT, None],
    "opt_str": _NOT_TEXT,
    "bool": [1, 0, "true", None, [], {}, 1.0],
    "opt_bool": [1, "yes", [], {}, 0.0],
    "pid": [*_NOT_INT, -1, 4_194_305, None],
    "opt_pid": [*_NOT_INT, -1, 4_194_305],
    "count": [*_NOT_INT, -1, 2 ** 53 + 1, None],
    "opt_count": [*_NOT_INT, -1, 2 ** 53 + 1],
    "opt_time": ["soon", True, [], {}, -1.0, NAN, INF, -INF, MAX_TIME * 2],
    "texts": ["x", 1, {}, [1], [None], ["a", 2], [["a"]], True],
    "gpu_indexes": ["0", 0, {}, [-1], ["0"], [1.5], [None], [70_000], [True]],
    "pids": ["1", 1, {}, [-1], ["1"], [1.5], [None], [4_194_305]],
    "gpus": ["x", 1, {}, [1], ["gpu0"], [[0]], [{"index": -1}], [{"index": 1.5}],
             [{"index": None}], [{"index": 0, "name": 5}], [{"index": 0, "uuid": []}]],
    "pid_aliases": ["x", 1, {}, [1], [[1]], [[1, 2, 3]], [["a", 1]], [[1, -1]], [{"a": 1}]],
    "server": ["x", 1, [], [1, 2], {"pid": "42"}, {"pid": -1}, {"port": 70_000},
               {"port": "80"}, {"kind": 7}, {"name": None}, {"found_by": []}],
    "alerts": ["x", 1, {}, [1], ["firing"], [[]], [None]],
}
KIND: dict[tuple[type, str], str] = {
    (NoMeta, "node"): "str",
    (NvmlMeta, "gpus"): "gpus", (NvmlMeta, "driver"): "str", (NvmlMeta, "gpm"): "gpu_indexes",
    (NvmlMeta, "xid"): "gpu_indexes", (NvmlMeta, "demo"): "bool", (NvmlMeta, "hostname"): "str",
    (NvmlMeta, "dcgm"): "bool", (NvmlMeta, "node"): "str", (NvmlMeta, "via"): "str",
    (NvmlMeta, "instances"): "texts", (NvmlMeta, "url"): "opt_str",
    (NvmlMeta, "scrape_bytes"): "opt_count", (NvmlMeta, "warnings"): "texts",
    (ProcessMeta, "in_container"): "opt_bool", (ProcessMeta, "in_container_why"): "str",
    (ProcessMeta, "server"): "server", (ProcessMeta, "tree"): "pids",
    (ProcessMeta, "looked_for"): "str", (ProcessMeta, "reason"): "str",
    (ProcessMeta, "pid_aliases"): "pid_aliases", (ProcessMeta, "node"): "str",
    (ServerMeta, "dialect"): "opt_str", (ServerMeta, "model"): "opt_str",
    (ServerMeta, "engines"): "texts", (ServerMeta, "series_dropped"): "count",
    (ServerMeta, "notes"): "texts", (ServerMeta, "url"): "opt_str",
    (ServerMeta, "scrape_bytes"): "opt_count", (ServerMeta, "warnings"): "texts",
    (ServerMeta, "node"): "str", (ServerMeta, "via"): "str", (ServerMeta, "container"): "str",
    (KvEventsMeta, "endpoints"): "texts", (KvEventsMeta, "since"): "opt_time",
    (KvEventsMeta, "node"): "str",
    (GilMeta, "gil_pid"): "opt_pid", (GilMeta, "node"): "str",
    (PrometheusMeta, "url"): "opt_str", (PrometheusMeta, "node"): "str",
    (AlertsMeta, "loaded"): "bool", (AlertsMeta, "alerts"): "alerts",
    (AlertsMeta, "why"): "str", (AlertsMeta, "node"): "str",
    (FleetOverviewMeta, "mode"): "str", (FleetOverviewMeta, "shown"): "count",
    (FleetOverviewMeta, "detail"): "texts", (FleetOverviewMeta, "rows_per_column"): "opt_count",
    (FleetOverviewMeta, "node"): "str",
}
CASES = [(cls, name, value) for (cls, name), kind in KIND.items() for value in WRONG[kind]]


def test_every_field_of_every_meta_class_has_its_wrong_values() -> None:
    """A field added to a meta class must be added here too, so the property covers it."""
    want = {(cls, f.name) for cls in SOURCE for f in fields(cls)}
    assert want == set(KIND)
    assert {meta_class(s) for s in SOURCE.values()} == set(SOURCE)


def _snapshot_line(samples: dict[str, dict[str, Any]], t: float = 1000.0) -> bytes:
    return json.dumps({"time": t, "tick": 1, "capabilities": {},
                       "samples": {src: {"source": src, "time": t, "status": "ok",
                                         "readings": [], **({"meta": m} if m else {})}
                                   for src, m in samples.items()}}).encode()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(CASES), good=st.booleans())
def test_a_wrong_value_in_any_field_is_refused_with_one_line_naming_it(
        case: tuple[type, str, Any], good: bool) -> None:
    cls, name, value = case
    source = SOURCE[cls]
    meta = {name: value}
    if good and cls is ProcessMeta and name != "tree":   # beside a field that is right
        meta["tree"] = [1, 2]
    with pytest.raises(MetaError) as got:
        meta_from_dict(source, meta)
    msg = str(got.value)
    assert "\n" not in msg and len(msg) < 300
    assert msg.startswith(f"meta of {source}: {name}")
    # the snapshot line holding it is one corrupt line, the field named
    with pytest.raises(RecordingError) as line_err:
        decode_snapshot(_snapshot_line({"gil": {"gil_pid": 7}, source: meta}))
    assert "\n" not in str(line_err.value) and f"meta of {source}: {name}" in str(line_err.value)


@pytest.mark.parametrize("hostile", ["a string", 7, [], [{"tree": [1]}], True, 1.5])
def test_a_meta_that_is_not_an_object_is_refused(hostile: Any) -> None:
    for source in SOURCE.values():
        with pytest.raises(MetaError, match=f"^meta of {source}: "):
            meta_from_dict(source, hostile)


def test_no_meta_or_an_empty_one_is_the_default() -> None:
    for cls, source in SOURCE.items():
        assert meta_from_dict(source, None) == cls()
        assert meta_from_dict(source, {}) == cls()
        assert meta_from_dict(source, {"a later field": [1, {"x": 2}]}) == cls()


def test_the_replay_skips_and_counts_the_line_and_names_its_line_number(tmp_path: Path) -> None:
    header = {"format": "infertop-recording", "schema": 1, "host": "h", "source": {},
              "interval": 1.0}
    lines = [json.dumps(header).encode(),
             _snapshot_line({"process": {"tree": [1, 2]}}, 1000.0),
             b"",   # a blank line counts as a line of the file
             _snapshot_line({"process": {"tree": [1, "x"]}}, 1001.0),
             _snapshot_line({"process": {"tree": [3]}}, 1002.0)]
    path = tmp_path / "r.jsonl.gz"
    path.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
    src = ReplaySource(path)
    try:
        snaps = list(src.iter_snapshots())
        metas = [s.process_meta() for s in snaps]
        assert [m.tree if m is not None else None for m in metas] == [(1, 2), (3,)]
        assert src.skipped == 1
        note = [n for n in src.notes if "unreadable" in n]
        assert note == ["1 of 3 snapshot lines unreadable, left out (first: r.jsonl.gz: line 4: "
                        "corrupt snapshot line (meta of process: tree[1]: expected `int`, "
                        "got `str`))"]
    finally:
        src._dec.close()


CORPUS_FILE = TESTS / "corpus" / "vllm-healthy-steady.jsonl.gz"


def _with_bad_meta(tmp_path: Path, at: int = 5) -> Path:
    """A corpus recording whose snapshot line ``at`` (0-based; the header is line 0) has
    a process meta of the wrong type: it is line ``at + 1`` of the file."""
    lines = [line for line in gzip.decompress(CORPUS_FILE.read_bytes()).split(b"\n") if line]
    obj = json.loads(lines[at])
    obj["samples"]["process"]["meta"]["tree"] = [1, "x"]
    lines[at] = json.dumps(obj).encode()
    path = tmp_path / "bad.jsonl.gz"
    path.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
    return path


WHY = ("line 6: corrupt snapshot line (meta of process: tree[1]: expected `int`, "
       "got `str`)")


@pytest.mark.parametrize("argv", [
    ["doctor", "--source", "replay:{path}"],
    ["doctor", "--source", "replay:{path}", "--format", "json"],
    ["report", "{path}", "--format", "markdown"],
    ["compare", "{path}", "{path}"],
    ["rules", "promtool-input", "{path}", "--no-asserts", "-o", "{out}"],
])
def test_every_reader_skips_and_counts_the_line_naming_field_and_line(
        tmp_path: Path, argv: list[str]) -> None:
    """The policy of every recording reader for a corrupt line, the meta's included: the
    line is left out, the run goes on (the clean file's exit code), and the count and the first one's cause
    (its line number, the field) are said once."""
    from helpers.inproc import run_main
    path = _with_bad_meta(tmp_path)
    got = run_main(*[a.format(path=path, out=tmp_path / "out.yml") for a in argv])
    clean = run_main(*[a.format(path=CORPUS_FILE, out=tmp_path / "clean.yml") for a in argv])
    assert got.returncode == clean.returncode, got.stderr   # the findings' exit, not an error
    said = got.stdout + got.stderr
    assert said.count("snapshot lines unreadable, left out") == 1 or argv[0] == "compare"
    assert WHY in said.replace("\\", "") or WHY.replace("`", "\\`") in said, said[-2000:]
    assert "Traceback" not in said


def _recordings() -> list[Path]:
    """The real recordings: the test corpus, fixtures, the fuzz seeds made by infertop (not
    the inputs a fuzzer found, which may hold any meta at all)."""
    out = []
    for path in sorted([*TESTS.rglob("*.jsonl*"), *(ROOT / "tools" / "fuzz").rglob("demo*")]):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        head = path.read_bytes()[:4096]
        if head[:2] == b"\x1f\x8b":
            try:
                head = gzip.decompress(path.read_bytes())[:4096]
            except (OSError, EOFError):
                continue
        if b'"format": "infertop-recording"' in head or b'"format":"infertop-recording"' in head:
            out.append(path)
    return out


RECORDINGS = _recordings()


def test_the_recordings_are_found() -> None:
    assert len([p for p in RECORDINGS if p.parent.name == "corpus"]) >= 9


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_real_recording_decodes_the_same_meta_as_before(path: Path) -> None:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    compared = 0
    for raw in data.split(b"\n")[1:]:
        try:
            obj = json.loads(raw)
        except ValueError:
            continue   # a line cut short (a hostile seed): no meta to compare
        if not isinstance(obj, dict) or not isinstance(obj.get("samples"), dict):
            continue
        for s in obj["samples"].values():
            if not isinstance(s, dict) or "source" not in s:
                continue
            source = str(s["source"])
            old = legacy_meta_from_dict(source, s.get("meta"))
            new = meta_from_dict(source, s.get("meta"))
            assert new == old, (path.name, source)
            compared += 1
    if path.parent.name == "corpus":
        assert compared > 0


def test_the_writer_follows_the_reader_a_meta_it_would_refuse_is_not_written() -> None:
    """Values from outside (a server's command line, --pid) past the meta's ranges: the
    recorder leaves that sample's meta out, so the reader does not lose the whole line."""
    from infertop.meta import GilMeta, ServerInfo
    from infertop.model import Sample, Snapshot
    from infertop.recording import encode_snapshot
    snap = Snapshot(1000.0, {
        "process": Sample("process", 1000.0, meta=ProcessMeta(
            tree=(5,), server=ServerInfo(pid=5, kind="vllm", port=99_999))),
        "gil": Sample("gil", 1000.0, meta=GilMeta(gil_pid=10 ** 12)),
        "server:h:1": Sample("server:h:1", 1000.0, meta=ServerMeta(dialect="vllm")),
    })
    back = decode_snapshot(encode_snapshot(snap))
    assert back.samples["process"].meta == ProcessMeta()
    assert back.samples["gil"].meta == GilMeta()
    assert back.samples["server:h:1"].meta == ServerMeta(dialect="vllm")


def test_sources_of_meta_values_keep_them_in_range() -> None:
    """What feeds the ranged fields: a command line's port, a KV batch's ts (``since``)."""
    from infertop.kvevents import KvEventsError, decode_batch
    from infertop.probes.server.discovery import port_from_cmdline
    assert port_from_cmdline("vllm", ["vllm", "serve", "m", "--port", "99999"]) is None
    assert port_from_cmdline("vllm", ["vllm", "serve", "m", "--port", "-1"]) is None
    assert port_from_cmdline("vllm", ["vllm", "serve", "m", "--port", "8000"]) == 8000
    import msgspec
    for ts in (-5.0, 1e12, float("inf")):
        with pytest.raises(KvEventsError, match="ts"):
            decode_batch(msgspec.msgpack.encode({"ts": ts, "events": []}))
