"""A dead server leads every list of findings while it lasts (issue 31 item 7).

The strip, ``f`` and doctor show the Diagnoser's ``active`` list in its order; the fleet
screen sorts its own and Prometheus's alerts with the same key; the HTML report's
findings section too.  Before: a GPU throttle (HW-003, hardware layer) led a whole
2.6 min outage because critical findings were ordered by layer.
"""

from __future__ import annotations

from helpers.rulekit import SERVER, Feed
from infertop.findings import LEADS, Evidence, Finding, Severity, order_key
from infertop.model import Layer, Status
from infertop.prom_findings import findings_by_node

E0 = "engine=0,model=m"
HOT_THROTTLED = {"gpu.throttle_reasons": {"gpu=0": 0x40}, "gpu.temp_celsius": {"gpu=0": 90},
                 "gpu.sm_clock_hz": {"gpu=0": 1.2e9}, "gpu.sm_clock_max_hz": {"gpu=0": 1.98e9}}


def _up(n: int) -> dict:
    return {**HOT_THROTTLED, "kv.usage_ratio": {E0: 0.4}, "server.requests_running": {E0: 3},
            "server.generation_tokens_total": {E0: 1000.0 + 50 * n}}


def test_server_down_leads_a_critical_gpu_throttle_on_the_active_list():
    f = Feed()
    for n in range(15):
        f.tick(_up(n))
    assert [x.code for x in f.findings][:1] == ["HW-003"]
    assert f.findings[0].severity is Severity.CRIT
    for _ in range(40):
        f.tick(HOT_THROTTLED, status={SERVER: Status.ERROR})
        codes = [x.code for x in f.findings]
        if "DEC-006" in codes:
            assert codes[0] == "DEC-006", codes
    assert {"DEC-006", "HW-003"} <= {x.code for x in f.findings}


def _finding(code: str, sev: Severity, layer: Layer) -> Finding:
    return Finding(code, layer, sev, code, (Evidence("x", (), 1.0, 0.0, ">", ""),), "", 0.0, ())


def test_the_order_key_puts_a_dead_server_before_worse_findings():
    fs = [_finding("HW-003", Severity.CRIT, Layer.HARDWARE),
          _finding("MEM-001", Severity.CRIT, Layer.MEMORY),
          _finding("DEC-006", Severity.CRIT, Layer.DECODING),
          _finding("FLT-003", Severity.CRIT, Layer.SCHEDULING)]
    got = [f.code for f in sorted(fs, key=order_key)]
    assert got[:2] == ["FLT-003", "DEC-006"] or got[:2] == ["DEC-006", "FLT-003"]
    assert set(got[:2]) == LEADS
    assert got[2:] == ["HW-003", "MEM-001"]


def test_prometheus_alerts_put_a_dead_server_first():
    def alert(name: str, layer: str) -> dict:
        return {"labels": {"alertname": name, "severity": "crit", "layer": layer,
                           "instance": "n1:8000"},
                "annotations": {"title": name}, "state": "firing",
                "active_at": 1000.0, "node": "n1"}

    got = findings_by_node([alert("DEC-001", "decoding"), alert("HW-003", "hardware"),
                            alert("DEC-006", "decoding")], 1e9)
    assert [f.code for f in got["n1"]] == ["DEC-006", "DEC-001", "HW-003"]
