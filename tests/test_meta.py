"""Typed per-probe meta (infertop/meta.py): each source's facts as a frozen class, the
recordings' JSON unchanged, old and hostile files read without an exception."""

from __future__ import annotations

import gzip
import json
from dataclasses import fields
from pathlib import Path

import pytest

from infertop.meta import (
    NO_META,
    AlertsMeta,
    FleetOverviewMeta,
    GilMeta,
    GpuName,
    KvEventsMeta,
    MetaError,
    NoMeta,
    NvmlMeta,
    ProcessMeta,
    PrometheusMeta,
    ServerInfo,
    ServerMeta,
    meta_from_dict,
    meta_url,
)
from infertop.model import Sample, Snapshot, Status

CORPUS = Path(__file__).resolve().parent / "corpus"

# the meta dicts the probes wrote before the typed meta (recordings hold them)
OLD = {
    "nvml": {"gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1"}],
             "driver": "580.95.05", "gpm": [0], "xid": [0]},
    "process": {"in_container": True, "in_container_why": "/.dockerenv",
                "server": {"pid": 42, "kind": "vllm", "name": "vllm", "reason": "--pid 42",
                           "port": 8000, "found_by": "name, not port"},
                "tree": [42, 43], "pid_aliases": [[7, 42]]},
    "server:127.0.0.1:8000": {"dialect": "vllm", "model": "m", "engines": ["0", "1"],
                              "series_dropped": 3, "notes": ["cap"], "url": "http://x/metrics",
                              "scrape_bytes": 1234, "warnings": ["cut"]},
    "kvevents:127.0.0.1:8000": {"endpoints": ["tcp://127.0.0.1:5557"], "since": 12.5},
    "gil": {"gil_pid": 42},
    "nvml@n1": {"hostname": "n1", "gpus": [{"index": "0", "name": "H100", "uuid": "u"}],
                "node": "n1", "via": "prometheus dcgm-exporter", "instances": ["n1:9400"],
                "dcgm": True},
    "prometheus": {"url": "http://prom:9090"},
    "scrape@n1": {"node": "n1"},
    "prometheus-alerts": {"loaded": True, "alerts": [
        {"labels": {"alertname": "MEM-001", "node": "n1"}, "state": "firing", "value": 0.97,
         "active_at": 12.0, "annotations": {"title": "KV cache full"}, "node": "n1"}]},
    "prometheus-aggregates": {"mode": "aggregate", "shown": 8, "detail": ["n1"],
                              "rows_per_column": 8},
}


@pytest.mark.parametrize("source", sorted(OLD))
def test_an_old_meta_dict_reads_typed_and_writes_back_the_same(source):
    meta = meta_from_dict(source, OLD[source])
    assert not isinstance(meta, dict)
    assert meta.to_dict() == OLD[source]
    assert meta_from_dict(source, meta.to_dict()) == meta


def test_each_source_gets_its_class():
    want = {"nvml": NvmlMeta, "process": ProcessMeta, "server:127.0.0.1:8000": ServerMeta,
            "kvevents:127.0.0.1:8000": KvEventsMeta, "gil": GilMeta, "nvml@n1": NvmlMeta,
            "prometheus": PrometheusMeta, "scrape@n1": NoMeta,
            "prometheus-alerts": AlertsMeta, "prometheus-aggregates": FleetOverviewMeta}
    for source, cls in want.items():
        assert type(meta_from_dict(source, OLD[source])) is cls, source
    p = meta_from_dict("process", OLD["process"])
    assert isinstance(p, ProcessMeta)
    assert p.server == ServerInfo(42, "vllm", "vllm", "--pid 42", 8000, "name, not port")
    assert p.tree == (42, 43) and p.pid_aliases == ((7, 42),)
    n = meta_from_dict("nvml", OLD["nvml"])
    assert isinstance(n, NvmlMeta) and n.gpus == (GpuName(0, "NVIDIA H100 80GB HBM3", "GPU-1"),)


def test_a_sample_round_trips_its_typed_meta_through_json():
    s = Sample("process", 1.0, (), Status.OK, "", ProcessMeta(in_container=False, tree=(1, 2)))
    d = json.loads(json.dumps(s.to_dict()))
    assert d["meta"] == {"in_container": False, "tree": [1, 2]}
    assert Sample.from_dict(d) == s
    # a sample with nothing to say writes no meta at all, as before
    assert "meta" not in Sample("gil", 1.0).to_dict()
    assert Sample("gil", 1.0).meta is NO_META


def test_a_dict_given_to_sample_takes_the_from_dict_path():
    # a dict where the type says SampleMeta: the legacy path this test is about
    s = Sample("server:h:1", 1.0,
               meta={"dialect": "tgi", "url": "http://h:1/metrics"})  # type: ignore[arg-type]
    assert s.meta == ServerMeta(dialect="tgi", url="http://h:1/metrics")


@pytest.mark.parametrize("hostile", [
    {"tree": "not a list", "server": [1, 2], "pid_aliases": [[1]], "in_container": "yes"},
    {"tree": [1, "x"], "server": {"pid": "42", "kind": 7}, "reason": None},
    {"tree": [float("nan")], "pid_aliases": [[float("inf"), 1]], "looked_for": {"a": 1}},
    {"gpus": [{"index": None}], "gpm": "0", "dialect": ["x"], "since": "soon"},
    "a string", 7, [],
])
def test_hostile_meta_is_refused_with_one_line_never_a_traceback(hostile):
    """Issue 36: a field of the wrong type used to be left at its default in silence; it is
    now a one-line MetaError (a ValueError), which the readers count as a corrupt line
    (tests/test_meta_typed.py has the property over every field)."""
    for source in OLD:
        if isinstance(hostile, dict) and not set(hostile) & \
                {f.name for f in fields(type(meta_from_dict(source, OLD[source])))}:
            assert meta_from_dict(source, hostile) == type(meta_from_dict(source, OLD[source]))()
            continue
        with pytest.raises(MetaError) as e:
            meta_from_dict(source, hostile)
        assert str(e.value).startswith(f"meta of {source}: ") and "\n" not in str(e.value)
    assert meta_from_dict("process", None) == ProcessMeta()   # no meta: the defaults


def test_an_alert_read_back_from_a_recording_can_be_recorded_again():
    """JSON's NaN/Infinity (Python's reader takes them) inside a recorded alert become None:
    the recorder writes with allow_nan=False, so replaying and recording again works."""
    hostile = {"loaded": True, "alerts": [{"labels": {"alertname": "X"}, "value": float("nan"),
                                           "nested": [float("inf"), {"v": float("-inf")}]}]}
    meta = meta_from_dict("prometheus-alerts", hostile)
    assert isinstance(meta, AlertsMeta) and meta.loaded
    json.dumps(meta.to_dict(), allow_nan=False)
    assert meta.alerts[0]["value"] is None and meta.alerts[0]["nested"] == [None, {"v": None}]


def test_typed_lookups_on_a_snapshot():
    snap = Snapshot(1.0, {
        "nvml": Sample("nvml", 1.0, meta=NvmlMeta(gpus=(GpuName(0),))),
        "process": Sample("process", 1.0, meta=ProcessMeta(tree=(5,))),
        "server:a": Sample("server:a", 1.0, meta=ServerMeta(dialect="vllm", url="http://a")),
    })
    nvml, process, server = snap.nvml_meta(), snap.process_meta(), snap.server_meta()
    assert nvml is not None and nvml.gpus == (GpuName(0),)
    assert process is not None and process.tree == (5,)
    assert server is not None and server.dialect == "vllm"
    assert meta_url(snap) == "http://a"
    empty = Snapshot(1.0, {})
    assert empty.process_meta() is None and meta_url(empty) is None


def test_the_corpus_meta_reads_back_without_loss():
    """Every recording of tests/corpus: its meta, read typed and written again, is the
    file's (less the empty values the typed meta leaves out)."""
    files = sorted(CORPUS.glob("*.jsonl.gz"))
    assert files
    seen = 0
    for f in files:
        with gzip.open(f, "rt") as fh:
            for line in fh:
                d = json.loads(line)
                for name, s in (d.get("samples") or {}).items():
                    old = s.get("meta") or {}
                    back = Sample.from_dict(s).to_dict().get("meta", {})
                    assert set(back) <= set(old), (f.name, name)
                    for k, v in old.items():   # kept as it was, or an empty value left out
                        assert back[k] == v if k in back else v in (None, [], "", 0), \
                            (f.name, name, k)
                    seen += bool(old)
    assert seen > 1000
