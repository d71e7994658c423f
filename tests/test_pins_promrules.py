"""What the exported Prometheus rules mean, pinned where a mutation run found the fast
tests checking only syntax and substrings (issue 31 item 8: deleting the restart-count
recording rule still passed).

Each test reads the generated file back (its recordings and alerts, as Prometheus loads
them) and asserts the expression a rule records or the threshold, level, hold and label
an alert carries, for the default configuration.
"""

from __future__ import annotations

import re

from infertop.config import DiagnosisConfig, config_from_dict
from infertop.findings import Severity
from infertop.model import Kind
from infertop.promrules import Alert, build, export_text, prom_duration, sample_name
from infertop.rules.engine import Diagnoser

CFG = DiagnosisConfig()
T = CFG.thresholds
WS = prom_duration(CFG.diagnosis.window)


def _recordings(text: str) -> dict[str, str]:
    """record name -> expression, read back from the rendered rules file."""
    out: dict[str, str] = {}
    name, lines = "", []  # type: str, list[str]
    for line in text.splitlines() + ["  - name: end"]:
        m = re.match(r'\s+- (record|alert): "(.*)"$', line)
        if m or line.startswith("  - name:"):
            if name:
                out[name] = "\n".join(lines)
            name, lines = (m.group(2) if m and m.group(1) == "record" else ""), []
        elif name and line.startswith("          "):
            lines.append(line[10:])
    return out


REC = _recordings(export_text())


def _alerts(code: str) -> list[Alert]:
    return [a for a in build().alerts if a.code == code]


def _strict(a: Alert) -> str:
    """The alert's own condition (the part before its hold on ALERTS)."""
    return a.expr.split("\nor\n((", 1)[0]


def _held_part(a: Alert) -> str:
    assert "\nor\n((" in a.expr, a.expr
    return a.expr.split("\nor\n((", 1)[1]


# ---- names and durations --------------------------------------------------------------------
def test_sample_names_follow_each_kind_on_the_wire() -> None:
    assert sample_name("vllm", "vllm:time_to_first_token_seconds", Kind.HISTOGRAM) == \
        "vllm:time_to_first_token_seconds_bucket"
    assert sample_name("vllm", "vllm:num_requests_running", Kind.GAUGE) == \
        "vllm:num_requests_running"
    assert sample_name("vllm", "vllm:generation_tokens", Kind.COUNTER) == \
        "vllm:generation_tokens_total"
    assert sample_name("tgi", "tgi_request_success", Kind.COUNTER) == "tgi_request_success"
    assert sample_name("vllm", "vllm:x", Kind.HISTOGRAM, "sum") == "vllm:x_sum"


def test_durations_are_whole_seconds_or_milliseconds() -> None:
    assert [prom_duration(s) for s in (0, 90, 0.5, 1.25, 300)] == \
        ["0s", "90s", "500ms", "1250ms", "300s"]


# ---- recordings ----------------------------------------------------------------------------
def test_the_queue_is_each_dialects_series_once_aggregated_over_its_own_labels() -> None:
    assert REC["infertop:requests_waiting:count"].splitlines() == [
        "vllm:num_requests_waiting",
        "  or max without (tp_rank, pp_rank, ep_rank, moe_ep_rank, engine_type, pid) "
        "(sglang:num_queue_reqs)",
        "  or tgi_queue_size",
        "  or llamacpp:requests_deferred",
        "  or max without (version, request_type, kv_cache_block_type) "
        '(nv_trt_llm_request_metrics{request_type="waiting"})',
        "  or max without (version, request_type, kv_cache_block_type) "
        "(nv_inference_pending_request_count)",
        "  or trtllm_num_requests_waiting"]


def test_the_restart_count_is_recorded_from_every_token_counters_resets() -> None:
    rw = prom_duration(T.restart_window)
    expr = REC[f"infertop:server_restarts:count{rw}"]
    resets = re.findall(r"resets\(([^\[]+)\[(\w+)\]\)", expr)
    assert ("vllm:generation_tokens_total", rw) in resets
    assert ("vllm:prompt_tokens_total", rw) in resets
    assert ("llamacpp:tokens_predicted_total", rw) in resets
    assert len(resets) == 9
    (dec005,) = _alerts("DEC-005")
    assert f"infertop:server_restarts:count{rw} > 0" in dec005.expr


def test_latency_histograms_are_recorded_as_bucket_rates_and_quantiles() -> None:
    for short in ("ttft_seconds", "itl_seconds"):
        buckets = f"infertop:{short}_bucket:rate{WS}"
        assert REC[buckets].startswith("rate(vllm:")
        assert REC[f"infertop:{short}:p99_{WS}"] == f"histogram_quantile(0.99, {buckets})"
        assert REC[f"infertop:{short}:p50_{WS}"] == f"histogram_quantile(0.5, {buckets})"


def test_finished_and_failed_requests_per_dialect() -> None:
    assert REC[f"infertop:requests_finished:increase{WS}"].splitlines()[:4] == [
        "sum without () (",
        "  sum without (finished_reason) (increase(vllm:request_success_total[60s]))",
        "  or sum without (tp_rank, pp_rank, ep_rank, moe_ep_rank, engine_type, pid) "
        "(increase(sglang:num_requests_total[60s]))",
        "  or sum without () (increase(tgi_request_success[60s]))"]
    assert REC[f"infertop:requests_failed:increase{WS}"].splitlines() == [
        "sum without (finished_reason) (increase(vllm:request_success_total"
        '{finished_reason=~"error"}[60s]))',
        '  or sum without (err) (increase(tgi_request_failure{err!="dropped"}[60s]))',
        "  or sum without (version, request_type, kv_cache_block_type) "
        "(increase(nv_inference_request_failure[60s]))",
        "  or sum without (finished_reason) (increase(trtllm_request_success_total"
        '{finished_reason=~"error"}[60s]))']


# ---- alerts: levels, thresholds, holds --------------------------------------------------------
def test_too_hot_is_three_alerts_core_crit_core_warn_and_hbm_warn() -> None:
    got = _alerts("HW-006")
    assert [(a.severity, a.labels) for a in got] == [
        (Severity.CRIT, ()), (Severity.WARN, ()), (Severity.WARN, (("sensor", "memory"),))]
    crit, warn, hbm = got
    assert "DCGM_FI_DEV_GPU_TEMP[" in _strict(crit) and "> 92" in _strict(crit)
    assert "DCGM_FI_DEV_GPU_TEMP[" in _strict(warn) and "> 85" in _strict(warn)
    assert "DCGM_FI_DEV_MEMORY_TEMP[" in _strict(hbm) and "> 95" in _strict(hbm)
    # relaxed towards healthy (lower) by the hold margin while the same alert fires
    assert "> 76.5" in _held_part(warn) and "> 85.5" in _held_part(hbm)
    assert 'alertname="HW-006", severity="warn"' in _held_part(warn)


def test_a_below_threshold_relaxes_upwards() -> None:
    (sch,) = _alerts("SCH-002")
    kv = T.kv_free_max
    assert f"<= {kv:g}" in _strict(sch)
    assert f"<= {kv * (1 + CFG.diagnosis.hold_margin):g}" in _held_part(sch)
    # the fixed 0.5 share relaxes too (0.45 while firing)
    assert "infertop:queued:share10s >= 0.5" in _strict(sch)
    assert "infertop:queued:share10s >= 0.45" in _held_part(sch)


def test_only_alerts_with_a_threshold_to_relax_hold_on_alerts() -> None:
    assert all("ALERTS{" not in a.expr for a in _alerts("HW-008"))
    assert all("ALERTS{" in a.expr for a in _alerts("HW-006"))


def test_each_xid_class_pages_with_its_action() -> None:
    xids = {(a.severity, dict(a.labels).get("xid_action", "")):
            sorted(int(x) for x in re.findall(r"infertop:\S+ == (\d+)", _strict(a)))
            for a in _alerts("HW-005") if a.labels}
    assert xids == {(Severity.CRIT, "restart-application"): [94],
                    (Severity.WARN, "restart-application"): [31, 43],
                    (Severity.CRIT, "reset-gpu"): [119, 145, 149],
                    (Severity.CRIT, "reboot"): [79]}


def test_slowdown_must_have_existed_for_the_whole_hold() -> None:
    (hw7,) = _alerts("HW-007")
    sd = T.hw_slowdown_seconds
    assert f"[{prom_duration(sd)}]) == 1" in hw7.expr
    assert hw7.expr.endswith(f"offset {prom_duration(sd - 1)}")


def test_ttft_warns_at_the_slo_and_is_critical_at_its_factor() -> None:
    warn, crit = _alerts("DEC-001")
    slo = CFG.slo.ttft_p99_seconds
    assert f"p99_{WS} > {slo:g}\n" in warn.expr
    assert f"p99_{WS} > {slo:g} * {T.ttft_crit_factor:g}\n" in crit.expr
    for a in (warn, crit):
        assert set(a.sources) == {"slo.ttft_p99_seconds", "thresholds.slo_min_requests"}
    # the annotation says which limit $value is held to
    assert " x " not in warn.value_text
    assert crit.value_text.endswith(f" x {T.ttft_crit_factor:g}")


def test_error_rate_warns_at_the_slo_and_is_critical_at_its_own_ratio() -> None:
    warn, crit = _alerts("DEC-004")
    assert warn.expr.startswith(f"infertop:error:ratio{WS} > {CFG.slo.error_ratio:g}\n")
    assert crit.expr.startswith(f"infertop:error:ratio{WS} > {T.error_crit_ratio:g}\n")


def test_memory_growth_is_critical_only_when_the_card_fills_within_the_eta() -> None:
    warn, crit = _alerts("MEM-003")
    assert "predict_linear" not in warn.expr
    assert "predict_linear(infertop:gpu_mem_used:bytes[" in crit.expr
    assert warn.expr in crit.expr
    assert warn.sources == ("thresholds.mem_growth_ratio",)


def test_kv_pressure_lists_each_threshold_once() -> None:
    for a in _alerts("MEM-001"):
        assert a.sources and len(set(a.sources)) == len(a.sources)


def test_each_alert_holds_for_its_rules_raise_delay() -> None:
    spec = {s.code: s for s in Diagnoser().catalogue()}
    for a in build().alerts:
        assert (a.for_s, a.keep_s) == (spec[a.code].raise_after, spec[a.code].clear_after)
    assert {a.for_s for a in _alerts("HW-006")} == {0.0}


def test_a_disabled_rule_is_listed_as_disabled_not_exported() -> None:
    cfg = config_from_dict({"rules": {"HW-006": {"enabled": False}}})
    export = build(cfg)
    assert export.not_exported["HW-006"] == "disabled in the config"
    assert not [a for a in export.alerts if a.code == "HW-006"]
    assert "#   HW-006: disabled in the config" in export_text(cfg)


def test_the_file_lists_each_rule_not_exported_with_its_reason() -> None:
    text = export_text()
    for code, why in build().not_exported.items():
        assert f"#   {code}: {why}\n" in text
