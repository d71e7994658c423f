"""The Diagnoser itself: catalogue and docs, ordering, severity hold, events, isolation."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from helpers.rulekit import Feed, tick
from infertop.config import DiagnosisConfig, Timing
from infertop.findings import Evidence, Finding, Severity
from infertop.keys import EVIDENCE_KEYS, SPECS
from infertop.keysym import Input
from infertop.model import Layer
from infertop.pipeline import Pipeline
from infertop.rules import decoding, hardware, kernels, memory, parallelism, scheduling
from infertop.rules.base import Candidate, Rule
from infertop.rules.catalogue_doc import render_catalogue
from infertop.rules.engine import Diagnoser, covers
from infertop.rules.registry import all_rules

ROOT = Path(__file__).resolve().parent.parent
REQUIRED = ["HW-001", "HW-002", "HW-003", "HW-004", "HW-005", "HW-006", "HW-007", "HW-008",
            "KRN-001", "KRN-002", "KRN-003",
            "MEM-001",
            "MEM-002", "MEM-003", "MEM-004", "MEM-005", "SCH-001", "SCH-002", "SCH-003",
            "SCH-004", "SCH-005", "SCH-006",
            "PAR-001", "PAR-002", "PAR-003", "PAR-004", "PAR-005", "PAR-006",
            "PAR-007", "DEC-001", "DEC-002", "DEC-003",
            "DEC-004", "DEC-005", "DEC-006", "DEC-007", "FLT-001", "FLT-002", "FLT-003"]
# rules judged from a source's status, not from readings (a dead server has none)
STATUS_RULES = {"DEC-006"}
PREFIX = {"HW": Layer.HARDWARE, "KRN": Layer.KERNELS, "MEM": Layer.MEMORY,
          "SCH": Layer.SCHEDULING, "PAR": Layer.PARALLELISM, "DEC": Layer.DECODING}


def test_catalogue_has_every_code_in_its_layer_module():
    specs = Diagnoser().catalogue()
    assert [s.code for s in specs] == REQUIRED
    for s in specs:
        # cross-node (fleet) rules belong to the layer they judge
        assert s.layer is PREFIX[s.code.split("-")[0]] if not s.code.startswith("FLT-") \
            else s.layer in (Layer.DECODING, Layer.PARALLELISM, Layer.SCHEDULING)
        assert s.title and s.detects and s.remedy and (s.inputs or s.code in STATUS_RULES)
        for i in s.inputs + s.optional:   # symbols, not text; every key declared
            assert isinstance(i, Input) and all(k in SPECS for k in i.keys), (s.code, i)
        for name, value in s.thresholds.items():
            assert value is not None, f"{s.code}: {name} not in the config"
    for r in all_rules():
        assert r.check.__module__ == ("infertop.rules.fleet" if r.code.startswith("FLT-")
                                      else f"infertop.rules.{r.spec.layer.value}")


def test_docs_rules_md_is_generated_and_current():
    doc = (ROOT / "docs" / "rules.md").read_text()
    for code in REQUIRED:
        assert f"### {code}" in doc, f"{code} missing from docs/rules.md"
    assert doc == render_catalogue(), \
        "docs/rules.md is stale: python -m infertop.rules.catalogue_doc > docs/rules.md"


def test_catalogue_doc_runs_as_a_module():
    out = subprocess.run([sys.executable, "-m", "infertop.rules.catalogue_doc"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout == render_catalogue()


def test_findings_are_sorted_worst_first_then_layer():
    f = Feed()
    f.run(lambda: {"gpu.lost": {"gpu=0": 0}, "host.cpu_ratio": 0.95,
                   "gpu.mem_used_bytes": {"gpu=1": 75e9}, "gpu.mem_total_bytes": {"gpu=1": 80e9},
                   "gpu.throttle_reasons": {"gpu=1": 0x40}}, 12)
    assert [(x.code, x.severity) for x in f.findings] == [
        ("HW-003", Severity.CRIT), ("SCH-004", Severity.WARN), ("MEM-003", Severity.NOTICE)]


def test_severity_rises_at_once_and_falls_after_clear_after():
    f = Feed()
    base = {"gpu.sm_clock_hz": {"gpu=0": 1e9}, "gpu.sm_clock_max_hz": {"gpu=0": 2e9}}
    f.run(lambda: {**base, "gpu.throttle_reasons": {"gpu=0": 0x20}}, 8)   # warn
    assert f.active("HW-003")[0].severity is Severity.WARN
    f.tick({**base, "gpu.throttle_reasons": {"gpu=0": 0x40}})              # crit at once
    assert f.active("HW-003")[0].severity is Severity.CRIT
    f.run(lambda: {**base, "gpu.throttle_reasons": {"gpu=0": 0x20}}, 5)    # back to warn
    assert f.active("HW-003")[0].severity is Severity.CRIT                  # held...
    f.run(lambda: {**base, "gpu.throttle_reasons": {"gpu=0": 0x20}}, 6)
    assert f.active("HW-003")[0].severity is Severity.WARN                  # ...then lowered
    assert len(f.events("HW-003", "raised")) == 1


def _throttle(mask):
    return {"gpu.throttle_reasons": {"gpu=0": mask}}


def test_since_is_the_onset_not_the_raise():
    f = Feed()  # HW-003 judges each tick's reason bits: its onset is the first bad tick
    f.run(lambda: _throttle(0x1), 3)
    onset = f.t
    f.run(lambda: _throttle(0x20), 10)
    fin = f.active("HW-003")[0]
    assert fin.since == onset
    assert f.events("HW-003", "raised")[0].time == onset + 5


def test_events_are_bounded():
    f = Feed(DiagnosisConfig(diagnosis=Timing(raise_after=0, clear_after=0, events_max=10)))
    for i in range(40):
        f.tick(_throttle(0x20 if i % 2 else 0x1))
    assert len(f.diag.events) == 10
    assert {e.kind for e in f.diag.events} == {"raised", "cleared"}


def test_disabled_rule_never_runs_and_says_so():
    f = Feed(DiagnosisConfig(diagnosis=Timing(disabled=("SCH-004",))))
    f.run(lambda: {"host.cpu_ratio": 0.99}, 10)
    assert not f.findings
    assert f.diag.missing_inputs(f.history)["SCH-004"] == ["disabled in the config"]


def test_a_broken_rule_is_isolated():
    def boom(ctx):
        raise ZeroDivisionError("oops")
        yield  # pragma: no cover

    d = Diagnoser()
    d.rules = tuple(r if r.code != "SCH-004" else Rule(r.spec, boom) for r in d.rules)
    pipe = Pipeline(d)
    for i in range(8):
        frame = pipe.feed(tick(1000.0 + i, {"host.cpu_ratio": 0.99,
                                            "gpu.throttle_reasons": {"gpu=0": 0x40}}))
    assert d.rule_errors == {"SCH-004": "ZeroDivisionError: oops"}
    assert [x.code for x in frame.findings] == ["HW-003"]


def test_missing_inputs_lists_every_silent_rule_on_an_empty_history():
    f = Feed()
    f.tick({})
    why = f.diag.missing_inputs(f.history)
    assert sorted(why) == sorted(set(REQUIRED) - STATUS_RULES)
    assert "not reported by any source" in why["HW-001"][0]


def test_covers():
    assert covers((("gpus", "0,1"),), (("gpu", "1"),))
    assert not covers((("gpus", "0,1"),), (("gpu", "2"),))
    assert covers((), (("gpu", "2"),))
    assert not covers((("engine", "0"),), (("engine", "1"),))


def test_finding_round_trips_through_json():
    fin = Finding("MEM-001", Layer.MEMORY, Severity.WARN, "t",
                  (Evidence("kv.usage_ratio", (("engine", "0"),), 0.97, 0.9, ">=", "ratio"),),
                  "r", 12.5, (("engine", "0"),))
    assert Finding.from_dict(fin.to_dict()) == fin


def test_severity_order():
    assert Severity.NOTICE < Severity.WARN < Severity.CRIT
    assert max([Severity.WARN, Severity.CRIT, Severity.NOTICE]) is Severity.CRIT
    assert Severity("warn") is Severity.WARN


def test_candidate_keys_are_declared():
    # evidence keys are reading keys (so panes can highlight them) or documented extras
    extras = EVIDENCE_KEYS
    for mod in (decoding, hardware, kernels, memory, parallelism, scheduling):
        for key in re.findall(r'"((?:gpu|kv|server|spec|latency|request|process|thread|host|'
                              r'throughput)\.[a-z_]+)"', inspect.getsource(mod)):
            assert key in SPECS or key in extras, f"{mod.__name__}: {key}"
    assert Candidate((), Severity.WARN, ()).title is None


def test_slow_cadence_facts_stand_in_between_their_ticks():
    """NVML's per-process list comes every few ticks; the rule still sees it sustained."""
    f = Feed()
    info: dict[str, dict[str, Any]] = {"process.info": {
        "pid=1,ppid=0,name=python,role=api_server,kind=vllm": "vllm serve org/m",
        "pid=2,ppid=0,name=python,role=api_server,kind=vllm": "vllm serve org/m"}}
    for i in range(12):
        d = dict(info)
        if i % 4 == 0:
            d["process.gpu_mem_bytes"] = {"gpu=0,pid=1": 20e9, "gpu=0,pid=2": 20e9}
        f.tick(d)
    assert f.active("MEM-004")


def test_fast_readings_do_not_linger_when_a_source_stops():
    f = Feed()
    f.run(lambda: {"gpu.util_ratio": {"gpu=0": 1.0}, "gpu.sm_active_ratio": {"gpu=0": 0.1}}, 12)
    assert f.active("HW-001")
    f.run(lambda: {"host.cpu_ratio": 0.2}, 12)      # the GPU probe went silent
    assert not f.active("HW-001")
