"""The exported DEC-007 / SCH-005 / SCH-006 alerts, proven with the real promtool.

No demo scenario raises these vLLM signals (admission refusals, a deferred queue, an
engine asleep), so each episode is played from plain tick data (``helpers.rulekit``) as
a vLLM server would have served it: infertop's own diagnosis judges the snapshots, the
converter (``infertop.promtool_input``) turns the same snapshots into the series
Prometheus would have scraped, and the exported rules must fire what the doctor raised,
in its layer, by its raise time plus the hold and not long before; the healthy run of
each fires nothing (``test_promrules._check_episodes``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from test_promrules import _check_episodes

from helpers.promtool_kit import PROMTOOL_HINT, promtool_binary
from helpers.rulekit import tick
from infertop.model import Snapshot
from infertop.promrules import NOT_EXPORTED, export_text

needs_promtool = pytest.mark.skipif(promtool_binary() is None, reason=PROMTOOL_HINT)
E0 = "engine=0,model=m"
T0 = 1_000_000.0


def _play(phases: list[tuple[int, Callable[[], dict[str, Any]]]]) -> list[Snapshot]:
    """Snapshots one second apart: each phase's tick data for its count of ticks."""
    out: list[Snapshot] = []
    for n, make in phases:
        for _ in range(n):
            out.append(tick(T0 + len(out), make()))
    return out


@pytest.mark.parametrize("code", ["DEC-007", "SCH-005", "SCH-006"])
def test_exported_and_no_longer_listed_as_not_exported(code):
    assert code not in NOT_EXPORTED
    assert f'- alert: "{code}"' in export_text()


# ---- DEC-007 requests refused at admission --------------------------------------------------
def _admission(refused_per_tick: Callable[[int], float], n: int) -> list[Snapshot]:
    """A vLLM engine finishing 100 requests a second; the server (no engine label)
    refuses ``refused_per_tick(i)`` at admission on tick i."""
    state = {"i": 0, "stop": 0.0, "refused": 0.0}

    def make() -> dict[str, Any]:
        state["stop"] += 100
        state["refused"] += refused_per_tick(int(state["i"]))
        state["i"] += 1
        return {"server.requests_finished_total": {f"{E0},reason=stop": state["stop"]},
                "server.requests_running": {E0: 4}, "server.requests_waiting": {E0: 0},
                "server.admission_rejections_total": {
                    "model=m,reason=max_num_queued_reqs": state["refused"],
                    "model=m,reason=max_num_queued_tokens": 0.0}}
    return _play([(n, make)])


def test_admission_rejections_export_reads_vllms_counter_per_server_and_model():
    text = export_text()
    assert "sum without (reason, engine) (increase(vllm:admission_rejections_total[60s]))" \
        in text
    assert "sum without (engine) (infertop:requests_finished:increase60s)" in text


@needs_promtool
@pytest.mark.integration   # promtool replays the episode against the export
def test_admission_rejections_fire_as_dec007(tmp_path):
    # 90 healthy seconds, then 10 of every 110 requests refused (9 %: critical)
    snaps = _admission(lambda i: 0.0 if i < 90 else 10.0, 200)
    expect = _check_episodes(tmp_path, snaps, "vm", "vllm")
    assert expect["DEC-007"].layer == "decoding"


@needs_promtool
@pytest.mark.integration
def test_no_admission_rejections_fire_nothing(tmp_path):
    assert _check_episodes(tmp_path, _admission(lambda i: 0.0, 200), "vm", "vllm") == {}


# ---- SCH-006 engine asleep ----------------------------------------------------------------
def _sleep(phases: list[tuple[int, float, float]]) -> list[Snapshot]:
    """A vLLM engine: (ticks, sleep level, waiting requests) per phase."""
    def data(level: float, waiting: float) -> Callable[[], dict[str, Any]]:
        return lambda: {"server.sleep_level": {E0: level}, "server.requests_waiting": {E0: waiting},
                        "server.requests_running": {E0: 0}}
    return _play([(n, data(level, waiting)) for n, level, waiting in phases])


def test_sleep_level_goes_back_to_vllms_one_hot_family():
    from infertop.promtool_input import convert_snapshots
    series = convert_snapshots(_sleep([(1, 2.0, 0.0)]), 1.0, "vm", "vllm")
    base = 'vllm:engine_sleep_state{engine="0",instance="local",job="server",model_name="m",' \
           'node="vm",sleep_state='
    assert series.series[base + '"discard_all"}'] == {0: 1.0}
    assert series.series[base + '"awake"}'] == {0: 0.0}
    assert series.series[base + '"weights_offloaded"}'] == {0: 0.0}


@needs_promtool
@pytest.mark.integration
def test_engine_asleep_fires_as_sch006(tmp_path):
    # awake, then asleep with nothing waiting (notice), then discarded with 4 waiting (warn)
    snaps = _sleep([(60, 0.0, 0.0), (60, 1.0, 0.0), (60, 2.0, 4.0)])
    expect = _check_episodes(tmp_path, snaps, "vm", "vllm")
    assert expect["SCH-006"].layer == "scheduling"


@needs_promtool
@pytest.mark.integration
def test_engine_awake_fires_nothing(tmp_path):
    assert _check_episodes(tmp_path, _sleep([(120, 0.0, 0.0)]), "vm", "vllm") == {}


# ---- SCH-005 the queue waits on a deferral, not capacity ------------------------------------
def _queue(deferred: float, waiting: float = 12.0, n: int = 60) -> list[Snapshot]:
    """A vLLM engine at its cap of 8 with idle GPUs and free KV: 30 s with no queue, then
    ``waiting`` requests of which ``deferred`` wait on a deferral (vLLM reason=deferred)."""
    def make(w: float, d: float) -> Callable[[], dict[str, Any]]:
        return lambda: {"server.requests_waiting": {E0: w}, "server.requests_deferred": {E0: d},
                        "server.requests_running": {E0: 8}, "kv.usage_ratio": {E0: 0.3},
                        "gpu.sm_active_ratio": {"gpu=0": 0.25, "gpu=1": 0.25},
                        "server.setting": {"name=max_num_seqs": "8"}}
    return _play([(30, make(0.0, 0.0)), (n, make(waiting, deferred))])


@needs_promtool
@pytest.mark.integration
def test_deferred_queue_fires_sch005_and_not_sch002(tmp_path):
    """Most of the queue deferred with the GPUs idle: SCH-005 fires; the exported SCH-002
    (queue while GPUs idle), which SCH-005 supersedes on the screen, stays quiet (the
    check fails on any alert the doctor did not raise)."""
    expect = _check_episodes(tmp_path, _queue(deferred=11.0), "vm", "vllm")
    assert set(expect) == {"SCH-005"} and expect["SCH-005"].layer == "scheduling"


@needs_promtool
@pytest.mark.integration
def test_capacity_queue_fires_sch002_not_sch005(tmp_path):
    expect = _check_episodes(tmp_path, _queue(deferred=0.0), "vm", "vllm")
    assert set(expect) == {"SCH-002"}


@needs_promtool
@pytest.mark.integration
def test_no_queue_fires_nothing(tmp_path):
    assert _check_episodes(tmp_path, _queue(deferred=0.0, waiting=0.0), "vm", "vllm") == {}
