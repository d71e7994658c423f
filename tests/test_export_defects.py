"""Export defects of issue 31 (item 5), each a promtool case that failed before the fix.

(HW-006's HBM hold is in test_hold_levels.py.)

* HW-005: a new Xid is a change of DCGM's sticky last-Xid gauge, never a new series (a
  Prometheus restart on a node with an old Xid 79 paged "reboot the node" for 5 minutes);
* MEM-001: the critical level's preemption rate is not relaxed while it fires (the screen
  compares it without the hold margin);
* SCH-002: falls back to DCGM's util where SM-active is not exported (as the screen falls
  back to NVML util); fires for llama.cpp, which has no KV series (a llama.cpp queue means
  every slot is busy); never averages GPUs of the whole fleet when targets lack a ``node``
  label.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from test_promrules import _check_episodes

from helpers.promtool_kit import PROMTOOL_HINT, check_alerts, promtool_binary
from helpers.rulekit import tick
from infertop.model import Snapshot
from infertop.promtool_input import InputSeries, convert_snapshots

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(promtool_binary() is None, reason=PROMTOOL_HINT)]
E0 = "engine=0,model=m"
T0 = 1_000_000.0


def _play(phases: list[tuple[int, Callable[[], dict[str, Any]]]]) -> list[Snapshot]:
    out: list[Snapshot] = []
    for n, make in phases:
        for _ in range(n):
            out.append(tick(T0 + len(out), make()))
    return out


# ---- HW-005 ------------------------------------------------------------------------------
def test_an_old_xid_on_a_new_series_is_not_a_new_xid(tmp_path):
    """Every GPU's temperature is scraped from 0 s.
    GPU 0: Prometheus (re)starts scraping a node whose last Xid is an old 79: no alert.
    GPU 1: the gauge goes 0 -> 79 at 60 s: the reboot alert, for the event window.
    GPU 2: 43 -> 79 at 60 s: a change of value is a new Xid too.
    GPU 3: dcgm-exporter 4.5.3-4.8.2 omits the gauge until the first Xid: 79 from 60 s.
    GPU 4: err_code="0" until 60 s, then err_code="79" (a new series per code)."""
    steps = 400
    series = InputSeries(1.0, 0.0, steps)

    def base(gpu: str, **extra: str) -> str:
        labels = {"gpu": gpu, "instance": "n1:9400", "job": "dcgm", "node": "n1", **extra}
        return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"

    for i in range(steps):
        for gpu in "01234":
            series.put(f"DCGM_FI_DEV_GPU_TEMP{base(gpu)}", i, 60.0)
        late = i >= 60
        series.put(f"DCGM_FI_DEV_XID_ERRORS{base('0')}", i, 79.0)
        series.put(f"DCGM_FI_DEV_XID_ERRORS{base('1')}", i, 79.0 if late else 0.0)
        series.put(f"DCGM_FI_DEV_XID_ERRORS{base('2')}", i, 79.0 if late else 43.0)
        if late:
            series.put(f"DCGM_FI_DEV_XID_ERRORS{base('3')}", i, 79.0)
        code = "79" if late else "0"
        series.put(f"DCGM_FI_DEV_XID_ERRORS{base('4', err_code=code)}", i, float(code))
    xid = 'alertname="HW-005"'
    check_alerts(tmp_path, series,
              [(xid + ', gpu="0"', at, False) for at in (1, 30, 100, 299, 350)]
              + [(xid + f', gpu="{g}", xid_action="reboot"', 62, True) for g in "1234"]
              + [(xid + f', gpu="{g}"', 350, True) for g in "1234"]
              + [(xid + ', gpu="1"', 399, False)])


# ---- MEM-001's critical hold ----------------------------------------------------------------
def test_critical_kv_pressure_is_not_held_on_a_relaxed_preemption_rate(tmp_path):
    """2 preemptions/s for 90 s (critical), then 0.95/s: under the 1/s critical rate and
    above it relaxed (0.9/s).  The screen drops to warn once the 60 s rate is under 1/s;
    the exported critical alert must clear too (it held to the end before)."""
    pre = [40.0]

    def make(per_s: float) -> Callable[[], dict[str, Any]]:
        def f() -> dict[str, Any]:
            pre[0] += per_s
            return {"kv.usage_ratio": {E0: 0.97}, "server.requests_waiting": {E0: 3},
                    "server.requests_running": {E0: 30}, "server.preemptions_total": {E0: pre[0]}}
        return f

    snaps = _play([(90, make(2.0)), (150, make(0.95))])
    series = convert_snapshots(snaps, 1.0, "vm", "vllm")
    crit = 'alertname="MEM-001", severity="crit"'
    warn = 'alertname="MEM-001", severity="warn"'
    check_alerts(tmp_path, series, [(crit, 85, True), (crit, 220, False), (crit, 235, False),
                                 (warn, 235, True)])


# ---- SCH-002 -------------------------------------------------------------------------------
def _queue(gpu: dict[str, Any], kv: bool = True, cap: str = "max_num_seqs"
           ) -> list[Snapshot]:
    """An engine at its cap of 8 with idle GPUs: 30 s with no queue, then 12 waiting."""
    def make(w: float) -> Callable[[], dict[str, Any]]:
        def f() -> dict[str, Any]:
            d = {"server.requests_waiting": {E0: w}, "server.requests_running": {E0: 8},
                 "server.setting": {f"name={cap}": "8"}, **gpu}
            if kv:
                d["kv.usage_ratio"] = {E0: 0.3}
            return d
        return f
    return _play([(30, make(0.0)), (60, make(12.0))])


def test_sch002_falls_back_to_dcgm_util_without_sm_active(tmp_path):
    expect = _check_episodes(tmp_path, _queue({"gpu.util_ratio": {"gpu=0": 0.3, "gpu=1": 0.3}}),
                             "vm", "vllm")
    assert set(expect) == {"SCH-002"}


def test_sch002_fires_for_llamacpp_which_has_no_kv_series(tmp_path):
    snaps = _queue({"gpu.sm_active_ratio": {"gpu=0": 0.2}}, kv=False, cap="parallel")
    series = convert_snapshots(snaps, 1.0, "vm", "llamacpp")
    assert not [k for k in series.series if "kv_cache" in k]
    expect = _check_episodes(tmp_path, snaps, "vm", "llamacpp")
    assert set(expect) == {"SCH-002"}


def test_sch002_never_averages_the_fleet_without_a_node_label(tmp_path):
    """The same idle-GPU queue without a ``node`` label on any target: SCH-002 cannot tell
    which GPUs are the server's, so it stays quiet (it fired on the fleet's mean before)."""
    snaps = _queue({"gpu.sm_active_ratio": {"gpu=0": 0.2, "gpu=1": 0.2}})
    got = convert_snapshots(snaps, 1.0, "vm", "vllm")
    bare = InputSeries(got.interval, got.start, got.steps)
    for sel, points in got.series.items():
        for i, v in points.items():
            bare.put(re.sub(r',?node="[^"]*"', "", sel).replace("{,", "{"), i, v)
    assert not [k for k in bare.series if "node=" in k]
    check_alerts(tmp_path, bare, [('alertname="SCH-002"', at, False) for at in (60, 89)]
              + [('alertname="MEM-001"', 89, False)])
