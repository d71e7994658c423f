"""GPU health: Xid classes (HW-005's remedy), temperatures held (HW-006), the
hardware-slowdown reason held (HW-007), row remapping (HW-008); locally from NVML (the fake
library) and exported for DCGM (promtool on synthetic dcgm-exporter series)."""

from __future__ import annotations

import asyncio
import subprocess

import pytest

from helpers.fake_pynvml import FakeGPU, FakeNVML
from helpers.promtool_kit import PROMTOOL_HINT, promtool_binary
from helpers.rulekit import Feed
from infertop.config import config_from_dict
from infertop.findings import Severity
from infertop.probes.nvml.probe import NvmlProbe
from infertop.promrules import build, export_text
from infertop.promtool_input import InputSeries, render


# ---- HW-006 too hot ----------------------------------------------------------------------
def test_core_above_92_is_critical_only_after_two_minutes_held():
    f = Feed()
    f.run(lambda: {"gpu.temp_celsius": {"gpu=0": 93, "gpu=1": 60}}, 100)
    assert not f.active("HW-006"), "100 s at 93 C is not yet 2 minutes"
    f.run(lambda: {"gpu.temp_celsius": {"gpu=0": 93, "gpu=1": 60}}, 22)
    got = f.active("HW-006")
    assert [x.subject for x in got] == [(("gpu", "0"),)]
    assert got[0].severity is Severity.CRIT and "core too hot" in got[0].title
    assert got[0].evidence[0].value == 93 and got[0].evidence[0].threshold == 92


def test_a_dip_below_the_limit_restarts_the_hold():
    cfg = config_from_dict({"thresholds": {"gpu_hot_seconds": 30}})
    f = Feed(cfg)
    f.run(lambda: {"gpu.temp_celsius": {"gpu=0": 88}}, 20)
    f.tick({"gpu.temp_celsius": {"gpu=0": 70}})
    f.run(lambda: {"gpu.temp_celsius": {"gpu=0": 88}}, 20)
    assert not f.active("HW-006"), "never 30 s in a row above 85 C"
    f.run(lambda: {"gpu.temp_celsius": {"gpu=0": 88}}, 12)
    got = f.active("HW-006")
    assert got and got[0].severity is Severity.WARN


def test_hbm_temperature_has_its_own_limit():
    cfg = config_from_dict({"thresholds": {"hbm_hot_seconds": 20}})
    f = Feed(cfg)
    f.run(lambda: {"gpu.temp_celsius": {"gpu=0": 70}, "gpu.mem_temp_celsius": {"gpu=0": 97}}, 23)
    got = f.active("HW-006")
    assert got and got[0].severity is Severity.WARN and "memory (HBM) too hot" in got[0].title
    g = Feed(cfg)
    g.run(lambda: {"gpu.temp_celsius": {"gpu=0": 70}, "gpu.mem_temp_celsius": {"gpu=0": 90}}, 23)
    assert not g.active("HW-006")


# ---- HW-007 hardware slowdown held -------------------------------------------------------
def test_hardware_slowdown_held_for_the_hold_warns_a_blip_does_not():
    cfg = config_from_dict({"thresholds": {"hw_slowdown_seconds": 30}})
    f = Feed(cfg)
    f.run(lambda: {"gpu.throttle_reasons": {"gpu=0": 0x8}}, 25)
    assert not f.active("HW-007") and f.active("HW-003"), "HW-003 names it at once"
    f.run(lambda: {"gpu.throttle_reasons": {"gpu=0": 0x8}}, 8)
    got = f.active("HW-007")
    assert got and got[0].severity is Severity.WARN
    g = Feed(cfg)
    g.run(lambda: {"gpu.throttle_reasons": {"gpu=0": 0x8}}, 20)
    g.tick({"gpu.throttle_reasons": {"gpu=0": 0x0}})
    g.run(lambda: {"gpu.throttle_reasons": {"gpu=0": 0x8}}, 15)
    assert not g.active("HW-007")


# ---- HW-008 row remapping ----------------------------------------------------------------
def _remap(corr: int, unc: int = 0, pending: int = 0, failure: int = 0) -> dict:
    return {"gpu.remapped_rows_correctable": {"gpu=0": corr},
            "gpu.remapped_rows_uncorrectable": {"gpu=0": unc},
            "gpu.row_remap_pending": {"gpu=0": pending},
            "gpu.row_remap_failure": {"gpu=0": failure}}


def test_any_uncorrectable_remap_is_critical_at_once():
    f = Feed()
    f.tick(_remap(2, unc=1, pending=1))
    got = f.active("HW-008")
    assert got and got[0].severity is Severity.CRIT
    assert "reset the GPU" in got[0].remedy
    assert any(e.key == "gpu.row_remap_pending" for e in got[0].evidence)


def test_correctable_remaps_warn_when_they_grow_not_when_steady():
    f = Feed()
    f.run(lambda: _remap(5), 20)
    assert not f.active("HW-008"), "old correctable remaps are not a finding"
    f.tick(_remap(6))
    got = f.active("HW-008")
    assert got and got[0].severity is Severity.WARN and got[0].evidence[0].value == 1


def test_failed_remap_says_replace():
    f = Feed()
    f.tick(_remap(0, failure=1))
    got = f.active("HW-008")
    assert got and got[0].severity is Severity.CRIT and "replace the GPU" in got[0].remedy


# ---- HW-005 Xid classes ------------------------------------------------------------------
@pytest.mark.parametrize("xid, sev, words", [
    (31, Severity.WARN, "restart the application"),
    (94, Severity.CRIT, "restart the application"),
    (119, Severity.CRIT, "reset the GPU"),
    (149, Severity.CRIT, "reset the GPU"),
    (79, Severity.CRIT, "reboot"),
])
def test_xid_class_sets_the_remedy(xid, sev, words):
    f = Feed()
    f.run(lambda: {"gpu.xid_total": {"gpu=0": 0}}, 3)
    f.tick({"gpu.xid_total": {"gpu=0": 1}, "gpu.xid_last": {"gpu=0": xid}})
    got = f.active("HW-005")
    assert got and got[0].severity is sev and words in got[0].remedy


# ---- the NVML probe reads them -----------------------------------------------------------
def test_nvml_probe_reads_remapped_rows_and_hbm_temperature():
    fake = FakeNVML([FakeGPU(remapped_rows=(3, 1, 1, 0), mem_temp_c=71),
                     FakeGPU(remapped_rows=None, mem_temp_c=None)])
    probe = NvmlProbe(nvml_module=fake.module, clock=fake.clock)

    async def go():
        cap = await probe.open()
        assert cap.available
        return await probe.collect()

    s = asyncio.run(go())
    got = {(r.key, r.label("gpu")): r for r in s.readings}
    assert got[("gpu.remapped_rows_correctable", "0")].value == 3
    assert got[("gpu.remapped_rows_uncorrectable", "0")].value == 1
    assert got[("gpu.row_remap_pending", "0")].value == 1
    assert got[("gpu.mem_temp_celsius", "0")].value == 71
    for key in ("gpu.remapped_rows_correctable", "gpu.mem_temp_celsius"):
        r = got[(key, "1")]
        assert r.value is None and r.reason, "NotSupported says why, never 0"


# ---- exported for DCGM -------------------------------------------------------------------
def test_export_names_the_dcgm_fields_and_holds():
    text = export_text()
    for name in ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_MEMORY_TEMP",
                 "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
                 "DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
                 "DCGM_FI_DEV_XID_ERRORS"):
        assert name in text, name
    assert "min_over_time(DCGM_FI_DEV_GPU_TEMP[120s]) > 92" in text
    assert "min_over_time(DCGM_FI_DEV_GPU_TEMP[300s]) > 85" in text
    actions = {dict(a.labels).get("xid_action") for a in build().alerts if a.code == "HW-005"}
    assert {"restart-application", "reset-gpu", "reboot"} <= actions


@pytest.mark.skipif(promtool_binary() is None, reason=PROMTOOL_HINT)
def test_promtool_fires_the_gpu_health_alerts_on_dcgm_series(tmp_path):
    steps = 200
    series = InputSeries(1.0, 0.0, steps)
    base = '{gpu="0",instance="n1:9400",job="dcgm",node="n1"}'
    for i in range(steps):
        series.put(f"DCGM_FI_DEV_GPU_TEMP{base}", i, 93.0)
        series.put(f"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{base}", i, 1.0 if i >= 50 else 0.0)
        series.put(f"DCGM_FI_DEV_XID_ERRORS{base}", i, 79.0 if i >= 70 else 0.0)
    (tmp_path / "rules.yml").write_text(export_text())

    def fired(code: str, sev: str, at: int, want: bool, **labels: str) -> str:
        sel = f'alertname="{code}", severity="{sev}", alertstate="firing"'
        extra = "".join(f', {k}="{v}"' for k, v in labels.items())
        samples = ("\n        exp_samples:\n          - labels: '{}'\n            value: 1"
                   if want else "\n        exp_samples: []")
        return (f"      - expr: 'count(ALERTS{{{sel}{extra}}})'\n"
                f"        eval_time: {at}s{samples}")

    tests = "    promql_expr_test:\n" + "\n".join([
        fired("HW-006", "crit", 100, False),      # 100 s at 93 C: not yet held 2 minutes
        fired("HW-006", "crit", 125, True),
        fired("HW-008", "crit", 49, False),
        fired("HW-008", "crit", 51, True),
        fired("HW-005", "crit", 75, True, xid_action="reboot"),
    ]) + "\n"
    (tmp_path / "t.yml").write_text(render(series, ["rules.yml"], tests))
    promtool = promtool_binary()
    assert promtool is not None
    r = subprocess.run([promtool, "test", "rules", str(tmp_path / "t.yml")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
