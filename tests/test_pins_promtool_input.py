"""What ``rules promtool-input`` writes for a recording, pinned series by series (issue 31
item 8): a server's samples under its dialect's names and labels, the GPU's as DCGM
fields (free memory from used and total), the sleep level one-hot, stale markers, the
grid's edges and budgets.
"""

from __future__ import annotations

import pytest

from helpers.snapkit import hist, reading, sample, snap
from infertop import promtool_input
from infertop.model import Snapshot, Status
from infertop.promtool_input import (
    MIN_INTERVAL,
    GridTooLarge,
    InputSeries,
    convert_snapshots,
    grid_steps,
    render,
)

MIB = float(1 << 20)
SRV = "server:10.0.0.7:8000"
LAB = 'instance="10.0.0.7:8000",job="server",node="box"'
MLAB = 'instance="10.0.0.7:8000",job="server",model_name="m",node="box"'


def _server(t: float, status: Status = Status.OK, sleep: float = 0.0) -> Snapshot:
    rs = [reading("server.requests_waiting", 3.0, model="m"),
          reading("server.requests_running", 2.0),            # no model label
          reading("server.process_start_seconds", 1234.0),
          reading("server.sleep_level", sleep, model="m"),
          hist("latency.ttft_seconds", {0.1: 2.0, 1.0: 5.0}, 1.5, model="m")]
    gpu = [reading("gpu.mem_used_bytes", 30 * 1024 * MIB, gpu=0),
           reading("gpu.mem_total_bytes", 80 * 1024 * MIB, gpu=0),
           reading("gpu.temp_celsius", 71.0, gpu=0)]
    return snap(t, sample(SRV, t, rs if status is Status.OK else [], status),
                sample("nvml", t, gpu))


def _convert(*snaps: Snapshot, step: float = 1.0) -> InputSeries:
    return convert_snapshots(snaps, step, "box", "vllm")


def test_a_server_page_becomes_its_dialects_series() -> None:
    out = _convert(_server(100.0), _server(101.0))
    assert out.steps == 2
    s = out.series
    assert s[f'up{{{LAB}}}'] == {0: 1.0, 1: 1.0}
    assert s[f'vllm:num_requests_waiting{{{MLAB}}}'] == {0: 3.0, 1: 3.0}
    assert s[f'vllm:num_requests_running{{{LAB}}}'] == {0: 2.0, 1: 2.0}
    assert s[f'process_start_time_seconds{{{LAB}}}'] == {0: 1234.0, 1: 1234.0}
    assert [k for k in s if "process_start" in k] == [f'process_start_time_seconds{{{LAB}}}']
    ttft = "vllm:time_to_first_token_seconds"
    le = 'instance="10.0.0.7:8000",job="server",le="{}",model_name="m",node="box"'
    assert s[f'{ttft}_bucket{{{le.format("0.1")}}}'][0] == 2.0
    assert s[f'{ttft}_bucket{{{le.format("+Inf")}}}'][0] == 5.0
    assert s[f'{ttft}_count{{{MLAB}}}'][0] == 5.0
    assert s[f'{ttft}_sum{{{MLAB}}}'][0] == 1.5


def test_the_sleep_level_is_vllms_one_hot_state() -> None:
    out = _convert(_server(100.0, sleep=1.0))
    got = {k.split('sleep_state="')[1].split('"')[0]: v[0] for k, v in out.series.items()
           if "sleep_state=" in k}
    assert got == {"awake": 0.0, "weights_offloaded": 1.0, "discard_all": 0.0}


def test_gpu_readings_are_dcgm_fields_with_free_memory_from_used_and_total() -> None:
    out = _convert(_server(100.0))
    base = 'gpu="0",instance="box:9400",job="dcgm",node="box"'
    assert out.series[f"DCGM_FI_DEV_FB_USED{{{base}}}"] == {0: 30 * 1024.0}
    assert out.series[f"DCGM_FI_DEV_FB_FREE{{{base}}}"] == {0: 50 * 1024.0}
    assert out.series[f"DCGM_FI_DEV_GPU_TEMP{{{base}}}"] == {0: 71.0}
    assert [k for k in out.series if k.startswith("DCGM_FI_DEV_FB_FREE")] == \
        [f"DCGM_FI_DEV_FB_FREE{{{base}}}"]


def test_a_failed_scrape_is_up_0_and_marks_the_series_stale_once() -> None:
    out = _convert(_server(100.0), _server(101.0), _server(102.0, Status.ERROR),
                   _server(103.0, Status.ERROR), _server(104.0))
    sel = f'vllm:num_requests_running{{{LAB}}}'
    assert out.values_text(sel) == "2 2 stale _ 2"
    assert out.values_text(f'up{{{LAB}}}') == "1 1 0 0 1"


def test_the_grid_accepts_its_edges() -> None:
    assert grid_steps(0.0, 1.0, MIN_INTERVAL) == 1001
    assert grid_steps(0.0, 0.5, 0.25) == 3
    assert grid_steps(5.0, 5.0, 1.0) == 1
    with pytest.raises(GridTooLarge):
        grid_steps(0.0, 1.0, MIN_INTERVAL / 2)
    with pytest.raises(GridTooLarge):
        grid_steps(1.0, 0.0, 1.0)      # time running backwards


def test_the_value_budget_is_inclusive(monkeypatch: pytest.MonkeyPatch) -> None:
    """MAX_VALUES values are allowed; one more is refused."""
    one = [snap(float(t), sample("nvml", float(t), [reading("gpu.temp_celsius", 70.0, gpu=0)]))
           for t in range(4)]
    monkeypatch.setattr(promtool_input, "MAX_VALUES", 4)
    assert convert_snapshots(one, 1.0, "box").values == 4
    monkeypatch.setattr(promtool_input, "MAX_VALUES", 3)
    with pytest.raises(GridTooLarge):
        convert_snapshots(one, 1.0, "box")


def test_a_file_without_tests_ends_with_its_input_series() -> None:
    text = render(_convert(_server(100.0)), ["rules.yml"])
    assert text.endswith('"\n') and not text.endswith("\n\n")
    assert text.splitlines()[-1].startswith("        values: ")
    with_tests = render(_convert(_server(100.0)), ["rules.yml"], "    promql_expr_test: []\n")
    assert with_tests.endswith('"\n    promql_expr_test: []\n')
