"""Memory rules MEM-001..MEM-004."""

from __future__ import annotations

import pytest

from infertop.findings import Severity
from helpers.rulekit import (Case, Feed)

GIB = float(1 << 30)
E0 = "engine=0,model=m"


class KvPressure(Case):
    code = "MEM-001"
    missing = ("kv.usage_ratio",)

    threshold = "thresholds.kv_pressure_ratio"

    def at(self, x):
        return self._t(x, 3, preempt=2)

    def __init__(self):
        self.pre = 40.0  # preemptions from long ago: a lifetime total, not a finding

    def _t(self, kv, waiting, preempt=0):
        self.pre += preempt
        return {"kv.usage_ratio": {E0: kv}, "server.requests_waiting": {E0: waiting},
                "server.requests_running": {E0: 30}, "server.preemptions_total": {E0: self.pre}}

    def good(self):
        return self._t(0.5, 0)

    def bad(self):
        return self._t(0.97, 3, preempt=2)

    def hi(self):
        return self._t(0.86, 2)

    def lo(self):
        return self._t(0.84, 2)


class KvLeak(Case):
    code = "MEM-002"
    missing = ("server.requests_running",)

    threshold = "thresholds.kv_leak_ratio"

    def at(self, x):
        return self._t(x)

    def _t(self, kv):
        return {"kv.usage_ratio": {E0: kv}, "server.requests_running": {E0: 0},
                "server.requests_waiting": {E0: 0}}

    def good(self):
        return self._t(0.01)

    def bad(self):
        return self._t(0.4)

    def hi(self):
        return self._t(0.21)

    def lo(self):
        return self._t(0.19)


class Headroom(Case):
    code = "MEM-003"
    missing = ("gpu.mem_total_bytes",)
    TOTAL = 80 * GIB

    def _t(self, used_share):
        return {"gpu.mem_used_bytes": {"gpu=0": used_share * self.TOTAL, "gpu=1": 0.5 * self.TOTAL},
                "gpu.mem_total_bytes": {"gpu=0": self.TOTAL, "gpu=1": self.TOTAL}}

    def good(self):
        return self._t(0.5)

    def bad(self):
        return self._t(0.93)

    def hi(self):
        return self._t(0.81)

    def lo(self):
        return self._t(0.79)


def _procs(second_gpu):
    return {"process.info": {
        "pid=100,ppid=1,name=python,role=api_server,kind=vllm": "python -m vllm serve org/llama-8b",
        "pid=200,ppid=100,name=VLLM::EngineCore,role=engine_core,kind=vllm": "VLLM::EngineCore",
        "pid=300,ppid=1,name=python,role=api_server,kind=vllm":
            "python -m vllm.entrypoints.openai.api_server --model org/llama-8b --port 8001"},
        "process.gpu_mem_bytes": {"gpu=0,pid=200": 30 * GIB, f"gpu={second_gpu},pid=300": 30 * GIB}}


class WeightsTwice(Case):
    code = "MEM-004"
    missing = ("process.info",)

    def good(self):
        return _procs(1)

    def bad(self):
        return _procs(0)

    def hi(self):
        d = _procs(0)
        d["process.gpu_mem_bytes"]["gpu=0,pid=300"] = 1.01 * GIB
        return d

    def lo(self):
        d = _procs(0)
        d["process.gpu_mem_bytes"]["gpu=0,pid=300"] = 0.99 * GIB
        return d


CASES = [KvPressure(), KvLeak(), Headroom(), WeightsTwice()]


# ---- closer looks ---------------------------------------------------------------------
def test_old_preemptions_are_not_a_finding_now():
    """KV near full with nothing waiting: only preemptions *in the window* count."""
    c = KvPressure()
    f = Feed()
    f.run(lambda: c._t(0.95, 0, preempt=3), 20)   # a preemption storm...
    assert f.active("MEM-001")
    f.run(lambda: c._t(0.95, 0), 80)              # ...that ended a minute ago
    assert not f.active("MEM-001")
    assert f.events("MEM-001", "cleared")


def test_heavy_preemption_is_critical():
    c = KvPressure()
    f = Feed()
    f.run(c.bad, 10)
    got = f.active("MEM-001")[0]
    assert got.severity is Severity.CRIT
    assert [e.key for e in got.evidence] == ["kv.usage_ratio", "server.preemptions_per_second",
                                             "server.requests_waiting"]


def test_low_headroom_is_only_a_notice():
    c = Headroom()
    f = Feed()
    f.run(c.bad, 10)
    assert f.active("MEM-003")[0].severity is Severity.NOTICE


@pytest.mark.parametrize("rate_gib,want", [(0.1, Severity.WARN), (0.3, Severity.CRIT)])
def test_steady_growth_warns_then_crits_when_oom_is_near(rate_gib, want):
    f = Feed()
    used = [20 * GIB]

    def t():
        used[0] += rate_gib * GIB
        return {"gpu.mem_used_bytes": {"gpu=0": used[0]}, "gpu.mem_total_bytes": {"gpu=0": 80 * GIB}}

    f.run(t, 90)
    got = f.active("MEM-003")
    assert got and got[0].severity is want and "growing" in got[0].title


def test_memory_that_rose_once_and_stayed_is_not_growth():
    f = Feed()
    f.run(lambda: {"gpu.mem_used_bytes": {"gpu=0": 20 * GIB}, "gpu.mem_total_bytes": {"gpu=0": 80 * GIB}}, 60)
    f.run(lambda: {"gpu.mem_used_bytes": {"gpu=0": 40 * GIB}, "gpu.mem_total_bytes": {"gpu=0": 80 * GIB}}, 60)
    assert not f.active("MEM-003")


def test_two_servers_of_different_models_on_one_gpu_are_fine():
    d = _procs(0)
    d["process.info"]["pid=300,ppid=1,name=python,role=api_server,kind=vllm"] = \
        "python -m vllm.entrypoints.openai.api_server --model org/qwen-7b"
    f = Feed()
    f.run(lambda: d, 10)
    assert not f.active("MEM-004")


def test_weights_twice_names_both_processes():
    f = Feed()
    f.run(WeightsTwice().bad, 10)
    got = f.active("MEM-004")[0]
    assert "org/llama-8b" in got.title and "200" in got.title and "300" in got.title
    assert got.subject == (("gpu", "0"),)


def test_a_servers_own_reservation_is_not_low_headroom():
    """vLLM reserves ~90 % of each GPU for its KV cache: by design, no notice."""
    f = Feed()
    d = Headroom().bad()
    d["process.info"] = {"pid=200,ppid=1,name=VLLM::EngineCore,role=engine_core,kind=vllm":
                         "VLLM::EngineCore"}
    d["process.gpu_mem_bytes"] = {"gpu=0,pid=200": 70 * GIB}
    f.run(lambda: d, 10)
    assert not f.active("MEM-003")


def test_usage_within_the_configured_reservation_is_fine():
    f = Feed()
    d = {**Headroom().bad(), "server.setting": {"name=gpu_memory_utilization": "0.92"}}
    f.run(lambda: d, 10)
    assert not f.active("MEM-003")


# ---- issue 21: a full card stays a finding when the growth stops -------------------------
def _creep_then_flat(extra: dict) -> Feed:
    """Memory climbs from the reservation (76 %) to 99.5 % of the card, then stays there."""
    f = Feed()
    used = [0.76 * 80 * GIB]
    top = 0.995 * 80 * GIB

    def t():
        used[0] = min(top, used[0] + 0.15 * GIB)
        return {"gpu.mem_used_bytes": {"gpu=0": used[0]},
                "gpu.mem_total_bytes": {"gpu=0": 80 * GIB}, **extra}

    f.run(t, 420)          # ~125 s of growth, then ~5 min flat at 99.5 %
    return f


def test_usage_beyond_the_reservation_stays_raised_after_growth_stops():
    vllm = {"server.setting": {"name=gpu_memory_utilization": "0.76"},
            "process.info": {"pid=200,ppid=1,name=VLLM::EngineCore,role=engine_core,kind=vllm":
                             "VLLM::EngineCore"},
            "process.gpu_mem_bytes": {"gpu=0,pid=200": 79 * GIB}}
    f = _creep_then_flat(vllm)
    got = f.active("MEM-003")
    assert got, f.diag.events
    assert got[0].severity is Severity.CRIT and "beyond the reservation" in got[0].title
    used = [e for e in got[0].evidence if e.key == "gpu.mem_used_bytes"][0]
    assert used.value > 0.99 and "reserves 76%" in used.note
    assert not f.events("MEM-003", "cleared")          # one episode, never cleared


def test_a_nearly_full_card_with_no_reservation_known_is_critical():
    f = _creep_then_flat({})
    got = f.active("MEM-003")
    assert got and got[0].severity is Severity.CRIT and "nearly full" in got[0].title


def test_a_reservation_that_explains_the_usage_is_no_level_finding():
    f = Feed()
    d = {"gpu.mem_used_bytes": {"gpu=0": 0.955 * 80 * GIB},
         "gpu.mem_total_bytes": {"gpu=0": 80 * GIB},
         "server.setting": {"name=gpu_memory_utilization": "0.95"}}
    f.run(lambda: d, 20)
    assert not f.active("MEM-003")
