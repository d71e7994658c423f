"""Pins for infertop/findings.py where a mutation run found none (issue 31 item 8): the
severity order (every comparison, and no comparison with a number), how evidence reads
and serialises (infinities, bounds), the JSON round trip, the order of a findings list.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from infertop.findings import Evidence, Finding, Severity, leads, order_key, worst
from infertop.model import Layer

N, W, C = Severity.NOTICE, Severity.WARN, Severity.CRIT


def test_severities_order_notice_warn_crit_in_every_comparison() -> None:
    assert (N < W, W < C, W < W, C < W) == (True, True, False, False)
    assert (N <= W, W <= W, C <= W) == (True, True, False)
    assert (C > W, W > W, N > W) == (True, False, False)
    assert (C >= W, W >= W, N >= W) == (True, True, False)
    assert max([W, C, N]) is C and min([W, C, N]) is N
    assert sorted([C, N, W]) == [N, W, C]


@pytest.mark.parametrize("op", ["<", "<=", ">", ">="])
def test_a_severity_does_not_compare_with_a_number(op: str) -> None:
    with pytest.raises(TypeError):
        eval(f"Severity.WARN {op} 2", {"Severity": Severity})


UTIL = Evidence("gpu.util_ratio", (("gpu", "0"),), 0.97, 0.9, ">=", "ratio", "median")


def test_evidence_reads_value_comparison_and_note() -> None:
    assert UTIL.describe() == "gpu.util_ratio{gpu=0} 97 % >= 90 % (median)"
    context = Evidence("server.setting", (("name", "dtype"),), "bfloat16", None, "", "")
    assert context.describe() == "server.setting{name=dtype} bfloat16"
    # an op without a threshold, or a threshold without an op, is no comparison
    assert Evidence("k.x", (), 1.0, None, ">=", "count").describe() == "k.x 1"
    assert Evidence("k.x", (), 1.0, 2.0, "", "count").describe() == "k.x 1"
    assert Evidence("k.x", (), 0.5, None, "", "s", bound=">").describe() == "k.x >500 ms"


def test_evidence_json_writes_infinities_as_text() -> None:
    def js(v: Any) -> Any:
        return Evidence("k.x", (), v, None, "", "").to_dict()["value"]
    assert [js(math.inf), js(-math.inf), js(0.0), js(0.5), js(3), js("text")] == \
        ["+Inf", "-Inf", 0.0, 0.5, 3, "text"]
    assert js(math.nan) == "NaN"
    assert UTIL.to_dict() == {"key": "gpu.util_ratio", "labels": {"gpu": "0"}, "value": 0.97,
                              "threshold": 0.9, "op": ">=", "unit": "ratio",
                              "note": "median", "bound": ""}


def _finding(code: str = "HW-006", sev: Severity = W, layer: Layer = Layer.HARDWARE,
             evidence: tuple[Evidence, ...] = (UTIL,)) -> Finding:
    return Finding(code, layer, sev, "too hot", evidence, "cool it", 10.0, (("gpu", "0"),),
                   ("MEM-001",), 13.0)


def test_a_summary_reads_the_first_evidence() -> None:
    assert _finding().summary() == "HW-006 too hot: gpu.util_ratio{gpu=0} 97 % >= 90 % (median)"
    assert _finding(evidence=()).summary() == "HW-006 too hot"


def test_a_finding_survives_its_json_round_trip() -> None:
    bounded = Evidence("latency.ttft_seconds", (("quantile", "0.99"),), 2.5, 1.0, ">", "s",
                       bound=">")
    f = _finding(evidence=(UTIL, bounded))
    assert Finding.from_dict(f.to_dict()) == f
    d = f.to_dict()
    d["evidence"][1]["bound"] = "~"          # not a bound side: read as a measurement
    assert Finding.from_dict(d).evidence[1].bound == ""


def test_a_dead_server_leads_a_critical_gpu_in_every_list() -> None:
    assert leads("DEC-006") and leads("FLT-003") and not leads("HW-006")
    dead = _finding("DEC-006", W, Layer.DECODING)
    hot = _finding("HW-006", C)
    notice = _finding("HW-003", N)
    assert sorted([notice, hot, dead], key=order_key) == [dead, hot, notice]


def test_worst_is_the_highest_severity_or_none() -> None:
    assert worst([]) is None
    assert worst([_finding(sev=W), _finding(sev=C), _finding(sev=N)]) is C
