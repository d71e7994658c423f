"""The doctor report: text, JSON and Markdown renderings and the exit code."""

from __future__ import annotations

import json

import pytest

from infertop.findings import Evidence, Finding, Severity
from infertop.model import Layer, Reading, Status, make_labels
from infertop.report import exit_code, render_report, select_key_readings

T = 1_800_000_000.0


def finding(code="MEM-001", layer=Layer.MEMORY, sev=Severity.WARN, title="KV-cache pressure"):
    return Finding(code, layer, sev, title, (
        Evidence("kv.usage_ratio", make_labels(engine=0), 0.97, 0.9, ">=", "ratio"),
        Evidence("server.preemptions_per_second", make_labels(engine=0), 2.0, 0, ">", "1/s",
                 "over the last 60 s")),
        "lower max concurrent sequences (--max-num-seqs)", T - 42, make_labels(engine=0))


READINGS = {
    "memory": [Reading("kv.usage_ratio", 0.97, "ratio", make_labels(engine=0)),
               Reading("server.preemptions_total", 12, "count", make_labels(engine=0))],
    "hardware": [Reading("gpu.util_ratio", 0.5, "ratio", make_labels(gpu=0)),
                 Reading("gpu.sm_active_ratio", None, "ratio", make_labels(gpu=0),
                         Status.UNSUPPORTED, "GPM needs Hopper or newer")],
    "decoding": [Reading("latency.ttft_seconds", 0.12, "s", make_labels(quantile=0.99)),
                 Reading("latency.ttft_seconds", 0.08, "s", make_labels(quantile=0.9))],
}
META = {"source": "live http://localhost:8000", "duration": 30.0, "ticks": 30, "now": T,
        "unchecked": {"HW-001": ["gpu.sm_active_ratio (unsupported: GPM needs Hopper or newer)"]}}


@pytest.mark.parametrize("findings,ok,want", [
    ([], True, 0),
    ([finding(sev=Severity.NOTICE)], True, 0),
    ([finding(sev=Severity.NOTICE), finding(sev=Severity.WARN)], True, 1),
    ([finding(sev=Severity.WARN), finding(sev=Severity.CRIT)], True, 2),
    ([finding(sev=Severity.CRIT)], False, 3),
    ([], False, 3),
])
def test_exit_code(findings, ok, want):
    assert exit_code(findings, ok) == want


def test_text_report_has_findings_by_layer_evidence_remedy_and_readings():
    out = render_report([finding()], READINGS, "text", META)
    assert "verdict: warn: 1 finding (1 warn)" in out
    mem = out.index("MEMORY")
    assert out.index("HARDWARE") < mem < out.index("DECODING")
    assert "[WARN] MEM-001 KV-cache pressure" in out[mem:]
    assert "kv.usage_ratio{engine=0} 97 % >= 90 %" in out
    assert "(over the last 60 s)" in out and "remedy   lower max concurrent sequences" in out
    assert "(42 s ago)" in out
    assert "gpu.sm_active_ratio{gpu=0}" in out and "n/a (GPM needs Hopper or newer)" in out
    assert "server.preemptions_total" not in out        # raw counters stay out
    assert "quantile=0.9}" not in out and "quantile=0.99}" in out
    assert "NOT CHECKED" in out and "HW-001: gpu.sm_active_ratio" in out
    assert out.count("no findings") == 5


def test_json_report_shape():
    doc = json.loads(render_report([finding(), finding("HW-003", Layer.HARDWARE, Severity.CRIT,
                                                        "clocks throttled")],
                                   READINGS, "json", META))
    assert doc["verdict"] == "crit"
    f = doc["findings"][0]
    assert set(f) >= {"code", "layer", "severity", "title", "evidence", "remedy", "since"}
    assert f["evidence"][0] == {"key": "kv.usage_ratio", "labels": {"engine": "0"}, "value": 0.97,
                                "threshold": 0.9, "op": ">=", "unit": "ratio", "note": "",
                                "bound": ""}
    assert f["since"] == T - 42
    assert list(doc["layers"]) == ["hardware", "kernels", "memory", "scheduling", "parallelism",
                                   "decoding"]
    assert doc["layers"]["hardware"]["findings"] == ["HW-003"]
    assert doc["layers"]["hardware"]["worst"] == "crit"
    assert doc["layers"]["memory"]["readings"][0]["key"] == "kv.usage_ratio"
    assert doc["meta"]["ticks"] == 30


def test_markdown_report():
    out = render_report([finding()], READINGS, "markdown", META)
    assert out.startswith("# infertop doctor")
    assert "## memory" in out and "| warn | MEM-001 | KV-cache pressure |" in out
    assert "<br>" in out                                    # evidence lines in one cell
    assert "| `kv.usage_ratio{engine=0}` | 97 % |" in out
    assert "## not checked" in out


def test_healthy_and_unreadable_verdicts():
    assert "verdict: healthy: no findings" in render_report([], {}, "text", {})
    out = render_report([], {}, "json", {"any_source_ok": False})
    assert json.loads(out)["verdict"] == "no-data"


def test_unknown_format():
    with pytest.raises(ValueError, match="text, json or markdown"):
        render_report([], {}, "yaml", {})


def test_key_readings_are_capped_and_ordered():
    many = {"hardware": [Reading("gpu.util_ratio", 0.5, "ratio", make_labels(gpu=i))
                         for i in range(20)] + [Reading("gpu.info", 1, "", make_labels(gpu=0),
                                                        text="H100")]}
    got = select_key_readings(many)["hardware"]
    assert got[0].key == "gpu.info" and len(got) == 17   # 16 per key at most
