"""Fleet mode with the exported rules (issue 31 item 6).

* The recording rules are read under the names Prometheus has loaded for the window in
  force: an export made with ``window = 120`` records ``..._120s``; the fleet asked for
  ``..._60s`` and its TTFT, ITL and error columns went blank on every node.  A column
  whose rule is not loaded is computed from the raw series, and the source says so.
* One finding per (alert, subject): the highest firing severity (a critical MEM-001 fires
  with its warning: "4 findings" for 3 conditions); raised = activeAt + ``for:``.
"""

from __future__ import annotations

import asyncio

from test_fleet_aggregates import _prom, alert, rules_doc

from infertop.config import config_from_dict
from infertop.findings import Severity
from infertop.probes.prometheus.aggregates import (
    SERVER_KEYS,
    alerting_groups,
    column_names,
    overview_query,
    recorded_names,
    rows_queries,
)
from infertop.probes.prometheus.source import PrometheusSource, node_of
from infertop.prom_findings import findings_by_node
from infertop.promrules import RECORDING_GROUP, build


def _loaded(window: float) -> frozenset[str]:
    cfg = config_from_dict({"diagnosis": {"window": window}})
    return frozenset(r.record for r in build(cfg).recordings)


def test_the_columns_read_the_names_recorded_for_the_window_in_force():
    names = column_names(_loaded(120))
    assert names["ttft_p99"] == "infertop:ttft_seconds:p99_120s"
    assert names["itl_p50"] == "infertop:itl_seconds:p50_120s"
    assert names["errors"] == "infertop:error:ratio120s"
    assert names["kv"] == "infertop:kv_usage:ratio"
    q = overview_query(8, True, names)
    assert "p99_120s" in q and "p99_60s" not in q and "ratio120s" in q
    rows = rows_queries({"n1": True}, True, names)["values"]
    assert 'infertop:ttft_seconds:p99_120s{node=~"n1"}' in rows and "_60s" not in rows


def test_the_default_window_and_an_unlisted_group_keep_the_default_names():
    assert column_names(_loaded(60)) == column_names(None)
    assert column_names(None)["ttft_p99"] == SERVER_KEYS["ttft_p99"][0]


def test_a_column_whose_rule_is_not_loaded_is_computed_from_the_raw_series():
    names = column_names(_loaded(60) - {"infertop:ttft_seconds:p99_60s"})
    assert names["ttft_p99"] is None
    q = overview_query(8, True, names)
    assert "infertop:ttft_seconds:p99_60s" not in q
    assert "histogram_quantile(0.99" in q and "vllm:time_to_first_token_seconds_bucket" in q
    rows = rows_queries({"n1": True}, True, names)["values"]
    assert "histogram_quantile(0.99" in rows and 'and on (instance) (up{node=~"n1"})' in rows


def _doc_with_records(records: frozenset[str], *alerts) -> dict:
    doc = rules_doc(*alerts)
    doc["groups"].append({"name": RECORDING_GROUP, "rules": [
        {"name": n, "type": "recording", "query": "x"} for n in sorted(records)]})
    return doc


def test_recorded_names_come_from_the_recording_group_only():
    doc = _doc_with_records(frozenset({"infertop:a", "infertop:b"}), alert())
    assert recorded_names(doc, RECORDING_GROUP) == {"infertop:a", "infertop:b"}
    assert recorded_names(rules_doc(alert()), RECORDING_GROUP) is None
    # a rule whose name is not a string is skipped alone; an answer whose rule is not an
    # object is not a rules answer (the typed RulesData refuses it whole): names unknown
    assert recorded_names({"groups": [{"name": RECORDING_GROUP, "rules": [{"name": 3}]}]},
                          RECORDING_GROUP) == frozenset()
    assert recorded_names({"groups": [{"name": RECORDING_GROUP, "rules": [7, {"name": 3}]}]},
                          RECORDING_GROUP) is None


def test_the_source_asks_for_the_loaded_names_and_says_what_is_missing():
    loaded = _loaded(120) - {"infertop:error:ratio120s"}
    asked: list[str] = []
    src = PrometheusSource("http://prom:9090",
                           transport=_prom(_doc_with_records(loaded, alert()), asked))

    async def one():
        await src.start()
        await src.next()
        await src.stop()
    asyncio.run(one())
    overview = next(q for q in asked if "topk(" in q)
    assert "infertop:ttft_seconds:p99_120s" in overview and "p99_60s" not in overview
    assert "infertop:error:ratio" not in overview.replace("infertop:error:ratio120s", "")
    assert "errors" in src.rules.why and "computed from the raw series" in src.rules.why


# ---- one finding per (alert, subject); raised = activeAt + for ------------------------------
def test_warn_and_crit_of_one_alert_are_one_finding_at_the_highest_severity():
    doc = rules_doc(alert("MEM-001", severity="warn"), alert("MEM-001", severity="crit"),
                    alert("HW-006", severity="warn", layer="hardware", labels={"gpu": "0"}),
                    alert("HW-006", severity="warn", layer="hardware",
                          labels={"gpu": "0", "sensor": "memory"}),
                    alert("DEC-001", severity="crit", state="pending", layer="decoding"),
                    alert("DEC-001", severity="warn", layer="decoding"))
    _, alerts = alerting_groups(doc, "infertop-findings", node_of)
    fs = findings_by_node(alerts, 2e9)["n1"]
    got = sorted((f.code, f.severity) for f in fs)
    assert got == [("DEC-001", Severity.WARN), ("HW-006", Severity.WARN),
                   ("MEM-001", Severity.CRIT)], got


def test_raised_is_active_at_plus_the_rules_for():
    doc = rules_doc(alert("MEM-001"))
    doc["groups"][0]["rules"][0]["duration"] = 3
    _, alerts = alerting_groups(doc, "infertop-findings", node_of)
    (f,) = findings_by_node(alerts, 2e9)["n1"]
    assert f.raised == f.since + 3.0


# ---- tokens/s over the window in force (issue 31, left over) -----------------------------
def test_tokens_per_second_is_a_rate_over_the_window_in_force() -> None:
    # the tok_s column has no recording rule: its rate is generated, and it was fixed at
    # [60s] while the other columns followed an export made with window = 120
    from infertop.probes.prometheus.aggregates import per_node, rate_window
    names = column_names(_loaded(120))
    assert rate_window(names) == "120s"
    tok = per_node("tok_s", True, 'node=~"n1"', names)
    assert "rate(vllm:generation_tokens_total{" in tok and "[120s])" in tok
    assert "[60s]" not in tok
    assert "[120s])" in overview_query(8, True, names)
    rows = rows_queries({"n1": True}, True, names)["values"]
    assert "[60s]" not in rows and "[120s])" in rows


def test_tokens_per_second_keeps_the_default_window_when_the_names_are_unknown() -> None:
    from infertop.probes.prometheus.aggregates import per_node, rate_window
    assert rate_window(None) == rate_window(column_names(None)) == "60s"
    assert "[60s])" in per_node("tok_s", True)
    # no windowed rule loaded (all computed from the raw series, as the other columns
    # are, under the default definitions): the default window
    assert rate_window(column_names(frozenset())) == "60s"
