"""Pins for the hardware rules where a mutation run found none (issue 31 item 8): HW-003's
power cap at exactly the clock ratio, the PCIe link's capacity at its edges (x1, a link
not read), HW-004 on a GPU whose link is unknown.
"""

from __future__ import annotations

from typing import Any

from helpers.rulekit import Feed, tick
from infertop.config import DiagnosisConfig
from infertop.findings import Severity
from infertop.history import History
from infertop.rules.base import Context
from infertop.rules.hardware import PCIE_LANE_BYTES, pcie_capacity


def _capped(clock_hz: float) -> dict[str, Any]:
    return {"gpu.throttle_reasons": {"gpu=0": 0x4}, "gpu.sm_clock_hz": {"gpu=0": clock_hz},
            "gpu.sm_clock_max_hz": {"gpu=0": 1e9}}


def test_a_power_cap_at_exactly_the_clock_ratio_is_normal_under_load() -> None:
    """thresholds.throttle_clock_ratio (0.85) is inclusive: clocks at 85 % of max while
    power-capped are the normal state of a loaded GPU; at 84 % it is a notice."""
    assert DiagnosisConfig().thresholds.throttle_clock_ratio == 0.85
    f = Feed()
    f.run(lambda: _capped(0.85e9), 8)
    assert not f.active("HW-003")
    f.run(lambda: _capped(0.84e9), 8)
    assert [x.severity for x in f.active("HW-003")] == [Severity.NOTICE]


def _capacity(gen: float | None, width: float | None) -> float | None:
    data: dict[str, Any] = {}
    if gen is not None:
        data["gpu.pcie_link_gen"] = {"gpu=0": gen}
    if width is not None:
        data["gpu.pcie_link_width"] = {"gpu=0": width}
    ctx = Context(History(), tick(1.0, data), [], DiagnosisConfig(), {}, {})
    return pcie_capacity(ctx, "0")


def test_the_link_capacity_is_per_lane_bytes_times_width() -> None:
    assert _capacity(4, 16) == PCIE_LANE_BYTES[4] * 16
    assert _capacity(4, 1) == PCIE_LANE_BYTES[4]          # an x1 link is a link
    assert _capacity(1, 16) == PCIE_LANE_BYTES[1] * 16    # so is Gen1


def test_a_link_without_width_or_generation_has_no_capacity() -> None:
    """None (unknown), not 0 bytes/s: callers fall back to fixed limits."""
    assert _capacity(4, 0) is None
    assert _capacity(0, 16) is None
    assert _capacity(None, 16) is None


def _pcie(gen: float, width: float, tx: float) -> dict[str, Any]:
    return {"gpu.pcie_link_gen": {"gpu=0": gen}, "gpu.pcie_link_width": {"gpu=0": width},
            "gpu.pcie_tx_bytes_per_second": {"gpu=0": tx, "gpu=1": tx}}


def test_an_x1_link_saturates_too() -> None:
    f = Feed()
    f.run(lambda: _pcie(4, 1, 0.95 * PCIE_LANE_BYTES[4]), 15)
    (got,) = f.active("HW-004")
    assert "Gen4 x1" in got.evidence[0].note and got.subject == (("gpu", "0"),)


def test_a_gpu_whose_link_is_unknown_is_not_judged() -> None:
    """GPU 1 moves bytes but its link was never read: no capacity, no finding, no rule
    error (Feed asserts none); GPU 0's saturated link still raises."""
    f = Feed()
    f.run(lambda: _pcie(4, 16, 0.95 * 16 * PCIE_LANE_BYTES[4]), 15)
    assert [x.subject for x in f.active("HW-004")] == [(("gpu", "0"),)]
