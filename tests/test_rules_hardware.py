"""Hardware rules HW-001..HW-008: table tests plus the cases that need a closer look."""

from __future__ import annotations

import pytest

from helpers.rulekit import Case, Feed
from infertop.findings import Severity
from infertop.model import Status


class BusyNotWorking(Case):
    code = "HW-001"
    missing = ("gpu.sm_active_ratio",)

    threshold = "thresholds.busy_sm_active_max"

    def at(self, x):
        return self._t(x)

    def bad_side(self):
        return -1

    def _t(self, sm0):
        return {"gpu.util_ratio": {"gpu=0": 0.97, "gpu=1": 0.97},
                "gpu.sm_active_ratio": {"gpu=0": sm0, "gpu=1": 0.75}}

    def good(self):
        return self._t(0.7)

    def bad(self):
        return self._t(0.1)

    def hi(self):
        return self._t(0.49)  # just inside the condition (SM active <= 0.5)

    def lo(self):
        return self._t(0.51)


class TensorIdle(Case):
    code = "HW-002"
    missing = ("server.setting",)

    threshold = "thresholds.tensor_idle_max"

    def at(self, x):
        return self._t(x)

    def bad_side(self):
        return -1

    def _t(self, tensor):
        return {"gpu.sm_active_ratio": {"gpu=0": 0.8}, "gpu.tensor_active_ratio": {"gpu=0": tensor},
                "server.setting": {"name=dtype": "bfloat16"}}

    def good(self):
        return self._t(0.45)

    def bad(self):
        return self._t(0.0)

    def hi(self):
        return self._t(0.019)

    def lo(self):
        return self._t(0.021)


class Throttling(Case):
    code = "HW-003"
    missing = ("gpu.throttle_reasons",)

    def _t(self, mask):
        return {"gpu.throttle_reasons": {"gpu=0": mask}, "gpu.temp_celsius": {"gpu=0": 90},
                "gpu.sm_clock_hz": {"gpu=0": 1.98e9}, "gpu.sm_clock_max_hz": {"gpu=0": 1.98e9}}

    def good(self):
        return self._t(0x1)  # idle is not a throttle

    def bad(self):
        return self._t(0x20)  # software thermal slowdown

    def lo(self):
        return self._t(0x0)


class PcieSaturated(Case):
    code = "HW-004"
    missing = ("gpu.pcie_link_gen",)
    CAP = 1.969e9 * 16  # Gen4 x16 per direction

    threshold = "thresholds.pcie_saturated_ratio"

    def at(self, x):
        return self._t(x)

    def _t(self, share):
        return {"gpu.pcie_tx_bytes_per_second": {"gpu=0": share * self.CAP},
                "gpu.pcie_rx_bytes_per_second": {"gpu=0": 0.1 * self.CAP},
                "gpu.pcie_link_gen": {"gpu=0": 4}, "gpu.pcie_link_width": {"gpu=0": 16}}

    def good(self):
        return self._t(0.3)

    def bad(self):
        return self._t(0.95)

    def hi(self):
        return self._t(0.81)

    def lo(self):
        return self._t(0.79)


class GpuErrors(Case):
    code = "HW-005"
    windowed = True
    lag = 300.0  # a new Xid stays a finding for error_event_window
    missing = ("gpu.xid_total", "gpu.lost", "gpu.ecc_uncorrected_total")

    def __init__(self):
        self.xid = 7.0  # errors from before infertop looked: not a finding

    def _t(self):
        return {"gpu.lost": {"gpu=0": 0}, "gpu.xid_total": {"gpu=0": self.xid},
                "gpu.xid_last": {"gpu=0": 79}, "gpu.ecc_uncorrected_total": {"gpu=0": 2}}

    def good(self):
        return self._t()

    def bad(self):
        self.xid += 1
        return self._t()


class TooHot(Case):
    code = "HW-006"
    build = 121   # the critical level holds 92 C for 120 s (thresholds.gpu_very_hot_seconds)
    missing = ("gpu.temp_celsius",)

    def _t(self, c):
        return {"gpu.temp_celsius": {"gpu=0": c}}

    def good(self):
        return self._t(60)

    def bad(self):
        return self._t(93)

    def hi(self):
        return self._t(93)

    def lo(self):
        return self._t(91)   # just under 92 C: breaks the hold from healthy, not once raised


class SlowdownHeld(Case):
    code = "HW-007"
    build = 601   # thresholds.hw_slowdown_seconds
    missing = ("gpu.throttle_reasons",)

    def _t(self, mask):
        return {"gpu.throttle_reasons": {"gpu=0": mask}}

    def good(self):
        return self._t(0x1)

    def bad(self):
        return self._t(0x8)

    def lo(self):
        return self._t(0x8 | 0x20)   # other reasons come and go; the slowdown stays


class RowsRemapped(Case):
    code = "HW-008"
    windowed = True
    lag = 300.0  # correctable growth is judged over error_event_window
    missing = ("gpu.remapped_rows_correctable",)

    def __init__(self):
        self.rows = 5.0   # remaps from before infertop looked: not a finding

    def _t(self):
        return {"gpu.remapped_rows_correctable": {"gpu=0": self.rows},
                "gpu.remapped_rows_uncorrectable": {"gpu=0": 0},
                "gpu.row_remap_failure": {"gpu=0": 0}}

    def good(self):
        return self._t()

    def bad(self):
        self.rows += 1
        return self._t()


CASES = [BusyNotWorking(), TensorIdle(), Throttling(), PcieSaturated(), GpuErrors(), TooHot(),
         SlowdownHeld(), RowsRemapped()]


# ---- closer looks ---------------------------------------------------------------------
def test_no_gpm_is_silent_and_says_why():
    f = Feed()
    f.run(lambda: {"gpu.util_ratio": {"gpu=0": 1.0},
                   "gpu.sm_active_ratio": {"gpu=0": Status.UNSUPPORTED}}, 20)
    assert not f.findings
    why = f.diag.missing_inputs(f.history)["HW-001"]
    assert "gpu.sm_active_ratio" in why[0] and "unsupported" in why[0]


def test_fp32_model_is_not_a_tensor_finding():
    f = Feed()
    f.run(lambda: {"gpu.sm_active_ratio": {"gpu=0": 0.9}, "gpu.tensor_active_ratio": {"gpu=0": 0},
                   "server.setting": {"name=dtype": "float32"}}, 20)
    assert not f.active("HW-002")


@pytest.mark.parametrize("mask,clock,want", [
    (0x40, 1.0e9, Severity.CRIT),      # hardware thermal
    (0x80, 1.0e9, Severity.CRIT),      # power brake
    (0x20, 1.5e9, Severity.WARN),      # software thermal
    (0x04, 1.2e9, Severity.NOTICE),    # power cap, clocks at 61 % of max
    (0x04, 1.9e9, None),               # power cap near full clocks: normal under load
    (0x01, 0.3e9, None),               # idle
])
def test_throttle_severity_by_reason(mask, clock, want):
    f = Feed()
    f.run(lambda: {"gpu.throttle_reasons": {"gpu=0": mask}, "gpu.sm_clock_hz": {"gpu=0": clock},
                   "gpu.sm_clock_max_hz": {"gpu=0": 1.98e9}}, 10)
    got = f.active("HW-003")
    assert (got[0].severity if got else None) == want


def test_pcie_capacity_uses_best_link_seen():
    """Links train down to Gen1 when idle; capacity is the best seen, so a burst measured
    while NVML still says Gen1 is not 'saturated' against a Gen1 link."""
    f = Feed()
    full = {"gpu.pcie_link_gen": {"gpu=0": 4}, "gpu.pcie_link_width": {"gpu=0": 16}}
    f.run(lambda: {**full, "gpu.pcie_tx_bytes_per_second": {"gpu=0": 1e8}}, 3)
    f.run(lambda: {"gpu.pcie_link_gen": {"gpu=0": 1}, "gpu.pcie_link_width": {"gpu=0": 16},
                   "gpu.pcie_tx_bytes_per_second": {"gpu=0": 8e9}}, 10)
    assert not f.active("HW-004")


def test_lost_gpu_is_critical_at_once():
    f = Feed()
    f.run(lambda: {"gpu.lost": {"gpu=0": 0, "gpu=1": 0}}, 3)
    f.tick({"gpu.lost": {"gpu=0": 0, "gpu=1": 1}, "gpu.util_ratio": {"gpu=1": Status.ERROR}})
    got = f.active("HW-005")
    assert [x.subject for x in got] == [(("gpu", "1"),)]
    assert got[0].severity is Severity.CRIT and "lost" in got[0].title


def test_new_ecc_error_is_critical_old_ones_are_not():
    f = Feed()
    f.run(lambda: {"gpu.ecc_uncorrected_total": {"gpu=0": 12}}, 10)
    assert not f.active("HW-005")  # a lifetime total is not a finding
    f.tick({"gpu.ecc_uncorrected_total": {"gpu=0": 13}})
    got = f.active("HW-005")
    assert got and got[0].severity is Severity.CRIT
    assert got[0].evidence[0].key == "gpu.ecc_uncorrected_new" and got[0].evidence[0].value == 1


def test_non_fatal_xid_is_a_warning():
    f = Feed()
    f.run(lambda: {"gpu.xid_total": {"gpu=0": 0}, "gpu.xid_last": {"gpu=0": 13}}, 3)
    f.tick({"gpu.xid_total": {"gpu=0": 1}, "gpu.xid_last": {"gpu=0": 13}})
    assert f.active("HW-005")[0].severity is Severity.WARN
