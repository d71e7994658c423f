"""The batch cap named from the page alone (issue 32 item 6).

The real queue-cap recording (tests/corpus/vllm-queue-cap: vLLM --max-num-seqs 2, 8
clients) replayed as a remote server is: only its /metrics sample, no process probe, so no
``max_num_seqs`` setting and no GPU reading.  The running batch sits flat at 2 while
requests wait and KV is free: SCH-002 is raised from the page and DEC-001 names it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from infertop.model import Reading, Snapshot
from infertop.pipeline import Pipeline
from infertop.recording import decode, iter_snapshots
from infertop.rules.engine import Diagnoser

CORPUS = Path(__file__).parent / "corpus"
ONSET = json.loads((CORPUS / "corpus.json").read_text())["vllm-queue-cap"]["onset"]


def remote(capacity_share: float | None = None):
    """The recording's server samples only; with ``capacity_share``, the page's
    waiting_by_reason{reason="capacity"} as that share of the waiting (the recording
    predates the reading: vLLM 0.32 reports it; 1.0 is what --max-num-seqs gives)."""
    dec = decode((CORPUS / "vllm-queue-cap.jsonl.gz").read_bytes(), "vllm-queue-cap")
    for snap in iter_snapshots(dec):
        samples = {k: s for k, s in snap.samples.items() if k.startswith("server:")}
        if capacity_share is not None:
            for k, s in samples.items():
                extra = [Reading("server.requests_waiting_capacity",
                                 (r.value or 0.0) * capacity_share, r.unit, r.labels)
                         for r in s.readings if r.key == "server.requests_waiting"]
                samples[k] = replace(s, readings=s.readings + tuple(extra))
        yield Snapshot(time=snap.time, samples=samples, tick=snap.tick)


def play(snaps):
    pipe = Pipeline(Diagnoser())
    out = []
    for snap in snaps:
        frame = pipe.feed(snap)
        out.append((snap.time, {f.code: f for f in frame.findings}))
    return out


def test_remote_queue_cap_raises_sch002_from_the_page_and_dec001_names_it():
    run = play(remote())
    first = next((t for t, got in run if "SCH-002" in got), None)
    assert first is not None and first - ONSET <= 10.0
    sch = next(got["SCH-002"] for t, got in run if "SCH-002" in got)
    assert "running pinned at 2: a batch cap" in sch.title
    assert any("read from the page" in e.note for e in sch.evidence)
    dec = [got["DEC-001"] for t, got in run if "DEC-001" in got]
    assert dec and all("SCH-002" in d.caused_by for d in dec[-5:])


def test_waiting_for_capacity_is_evidence_and_deferred_waiting_is_not_a_cap():
    run = play(remote(capacity_share=1.0))
    sch = [got["SCH-002"] for _, got in run if "SCH-002" in got]
    assert sch and any(e.key == "server.requests_waiting_capacity" for e in sch[-1].evidence)
    # the same queue waiting on something else (deferred: a KV transfer, a LoRA slot):
    # the batch at its maximum is not a cap
    assert not any("SCH-002" in got for _, got in play(remote(capacity_share=0.0)))


def test_doctor_on_the_remote_recording_names_the_cap(tmp_path):
    """doctor on the recording as a remote server would give it (its /metrics only: the
    process probe's samples and capabilities dropped): SCH-002 from the page, DEC-001
    caused by it."""
    import gzip

    from helpers.inproc import run_main
    lines = gzip.decompress((CORPUS / "vllm-queue-cap.jsonl.gz").read_bytes()).splitlines()
    header = json.loads(lines[0])
    header["source"]["capabilities"].pop("process", None)
    header["source"]["probes"] = [p for p in header["source"]["probes"] if p != "process"]
    out = [json.dumps(header)]
    for line in lines[1:]:
        snap = json.loads(line)
        snap["samples"].pop("process", None)
        snap.get("capabilities", {}).pop("process", None)
        out.append(json.dumps(snap))
    rec = tmp_path / "remote.jsonl"
    rec.write_text("\n".join(out) + "\n")
    doc = json.loads(run_main("doctor", "--source", f"replay:{rec}", "--format", "json").stdout)
    codes = {f["code"]: f for f in doc["findings"]}
    assert "SCH-002" in codes and "running pinned at 2: a batch cap" in codes["SCH-002"]["title"]
    assert "SCH-002" in codes["DEC-001"]["caused_by"]
    assert "server.setting" not in {e["key"] for e in codes["SCH-002"]["evidence"]}
