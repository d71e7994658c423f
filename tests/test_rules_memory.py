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


# ---- MEM-005 prefix-cache thrash -------------------------------------------------------
EV0 = "engine=0,medium=GPU"


class Thrash(Case):
    code = "MEM-005"
    windowed = True
    lag = 62.0
    missing = ("kv.event_blocks_evicted_total",)

    def __init__(self):
        self.evicted = self.restored = 0.0

    def _t(self, evicted, restored):
        self.evicted += evicted
        self.restored += restored
        return {"kv.event_blocks_evicted_total": {EV0: self.evicted},
                "kv.event_blocks_restored_total": {EV0: self.restored}}

    def good(self):
        return self._t(20, 1)

    def bad(self):
        return self._t(20, 12)

    def hi(self):
        return self._t(20, 7)    # 35 %

    def lo(self):
        return self._t(20, 5)    # 25 %


def test_few_evictions_are_not_judged():
    f = Feed()
    th = Thrash()
    f.run(lambda: th._t(1, 1), 30)    # 100 % of 1 block a second: under 100 a minute
    assert not f.active("MEM-005")
    f.run(lambda: th._t(20, 15), 30)
    [fin] = f.active("MEM-005")
    assert "thrash" in fin.title and "route by prefix" in fin.remedy


CASES = [KvPressure(), KvLeak(), Headroom(), WeightsTwice(), Thrash()]


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
