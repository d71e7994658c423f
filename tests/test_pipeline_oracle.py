"""What the pipeline hands on, frame by frame, is pinned: a cut in its CPU (History's
storage, derive's sorting, the rules' lookups, Frame's indexes) must leave every reading,
derived reading, STALE stand-in and finding exactly as it was.

Each input (real recordings of incidents, including an outage whose last derived readings
are shown STALE, and demo scenarios on several GPUs) is played through a Pipeline with the
default Diagnoser, each frame prepared as the app prepares it; every frame's readings,
derived readings, stale readings, findings and by-label indexes are written as JSON and
hashed.  The digests are in tests/fixtures/pipeline_oracle.json.

A failure names the input and the first frame that differs.  When the change is meant
(a rule's text or threshold, a new derived reading), say so in the commit and rewrite the
digests with

    .venv/bin/python tests/test_pipeline_oracle.py --update
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from infertop.pipeline import Frame, Pipeline
from infertop.recording import decode, iter_snapshots
from infertop.rules.engine import Diagnoser

HERE = Path(__file__).parent
DIGESTS = HERE / "fixtures" / "pipeline_oracle.json"
RECORDINGS = ("vllm-killed-restarted", "vllm-kv-exhaustion", "llamacpp-slots-busy")
SCENARIOS = {"par-tp-straggler": 120, "hw-gpu-lost": 120, "mem-kv-pressure": 90}


def snapshots(name: str) -> list:
    if name in SCENARIOS:
        from infertop.probes.sources.demo import DemoSource
        src = DemoSource(name)
        return [src.next_sync() for _ in range(SCENARIOS[name])]
    path = HERE / "corpus" / f"{name}.jsonl.gz"
    return list(iter_snapshots(decode(path.read_bytes(), path.name)))


def frame_json(frame: Frame) -> str:
    """Everything a pane or a writer reads of a frame, in order."""
    d: dict = {
        "time": frame.snapshot.time,
        "readings": [r.to_dict() for r in frame.all_readings()],
        "derived": [r.to_dict() for r in frame.derived],
        "stale": [r.to_dict() for r in frame.stale],
        "findings": [f.to_dict() for f in frame.findings],
    }
    # the panes' lookups: by gpu and pid for every key, as a scan would group them
    d["by_label"] = {f"{key}|{name}": {v: [r.to_dict() for r in rs]
                                        for v, rs in frame.by_label(key, name).items()}
                     for key in sorted(frame.reading_index().shown) for name in ("gpu", "pid")}
    return json.dumps(d, sort_keys=True)


def digests(name: str) -> list[str]:
    pipe = Pipeline(Diagnoser())
    return [hashlib.sha256(frame_json(pipe.feed(snap).prepare()).encode()).hexdigest()[:16]
            for snap in snapshots(name)]


def test_every_frame_of_the_smallest_input_is_what_it_was():
    """In the fast run; the rest (~12 s of CPU in all) are slow."""
    check("llamacpp-slots-busy")


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in RECORDINGS + tuple(SCENARIOS)
                                  if n != "llamacpp-slots-busy"])
def test_every_frame_is_what_it_was(name):
    check(name)


def check(name: str) -> None:
    want = json.loads(DIGESTS.read_text())[name]
    got = digests(name)
    assert len(got) == len(want), f"{name}: {len(got)} frames, pinned {len(want)}"
    first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
    assert first is None, (
        f"{name}: frame {first} (of {len(got)}) differs from the pinned one; if the change "
        "is meant, run: .venv/bin/python tests/test_pipeline_oracle.py --update")


@pytest.mark.slow
def test_the_oracle_sees_what_it_pins():
    """The inputs exercise what the digests are meant to pin: stale readings of a server
    that went down (with its derived ones), findings, several GPUs."""
    pipe = Pipeline(Diagnoser())
    stale_derived = findings = 0
    for snap in snapshots("vllm-killed-restarted"):
        frame = pipe.feed(snap)
        stale_derived += sum(r.key.startswith("latency.") for r in frame.stale)
        findings += len(frame.findings)
    assert stale_derived and findings
    pipe = Pipeline(Diagnoser())
    last = None
    for snap in snapshots("par-tp-straggler"):
        last = pipe.feed(snap).prepare()
    assert last is not None and len(last.by_label("gpu.util_ratio", "gpu")) >= 4
    assert last.findings


if __name__ == "__main__" and sys.argv[1:] == ["--update"]:
    sys.path.insert(0, str(HERE))
    DIGESTS.write_text(json.dumps({n: digests(n) for n in RECORDINGS + tuple(SCENARIOS)},
                                  indent=0) + "\n")
    print(f"wrote {DIGESTS}")
