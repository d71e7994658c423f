"""``doctor --source replay:FILE`` judges the whole recording unless ``--duration`` says
otherwise, and says how long the recording is (issue 32 item 3).

The recording: a real vLLM restart under load (tests/corpus/vllm-slow-restart, 10.8
minutes, 545 s of outage from 3 minutes in).  Judging its first 10 s (the old default)
printed two findings and nothing about the outage or the restart."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.inproc import run_main

REC = str(Path(__file__).parent / "corpus" / "vllm-slow-restart.jsonl.gz")


def test_replay_without_duration_judges_the_outage_and_the_restart():
    r = run_main("doctor", "--source", f"replay:{REC}", "--format", "json")
    doc = json.loads(r.stdout)
    eps = {e["code"] for e in doc["meta"]["episodes"]}
    assert {"DEC-006", "DEC-005"} <= eps          # the outage and the restart
    meta = doc["meta"]
    assert meta["recording_length"] > 600 and meta["duration"] >= meta["recording_length"] - 2
    assert meta["duration_asked"] is None
    text = run_main("doctor", "--source", f"replay:{REC}").stdout
    assert "(the whole recording)" in text


def test_duration_shortens_a_replay_and_the_report_says_what_was_left_out():
    r = run_main("doctor", "--source", f"replay:{REC}", "--duration", "10")
    assert "of a 10.8 min recording (--duration; the rest not judged)" in r.stdout
    assert "DEC-005" not in r.stdout and "DEC-006" not in r.stdout
