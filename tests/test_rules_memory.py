"""Memory rules MEM-001..MEM-004."""

from __future__ import annotations

import pytest

from helpers.rulekit import Case, Feed
from infertop.findings import Severity

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
    """2 preemptions a second: critical once the 60 s window is covered (a young window's
    rate is over the whole window, as Prometheus's rate(): docs/rules.md#windows)."""
    c = KvPressure()
    f = Feed()
    f.run(c.bad, 10)
    assert f.active("MEM-001")[0].severity is Severity.WARN, "20 in 10 s: 0.35/s over 60 s"
    f.run(c.bad, 25)
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
    assert isinstance(used.value, float) and used.value > 0.99 and "reserves 76%" in used.note
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

# ---- MEM-001: severity follows the preemption rate -------------------------------------------
def test_slow_preemption_with_a_full_cache_is_only_a_warning():
    """Under kv_preempt_crit_per_second (1/s) the pressure is a warning: one preemption
    every 5 s (0.2/s) with the cache full is not critical."""
    c = KvPressure()
    f = Feed()
    n = [0]

    def t():
        n[0] += 1
        return c._t(0.97, 0, preempt=1 if n[0] % 5 == 0 else 0)

    f.run(t, 40)
    got = f.active("MEM-001")[0]
    assert got.severity is Severity.WARN
    rate = [e for e in got.evidence if e.key == "server.preemptions_per_second"][0]
    assert isinstance(rate.value, float) and 0.1 < rate.value < 1.0


def test_queue_without_any_preemption_counter_is_a_warning():
    f = Feed()
    f.run(lambda: {"kv.usage_ratio": {E0: 0.97}, "server.requests_waiting": {E0: 4}}, 20)
    got = f.active("MEM-001")[0]
    assert got.severity is Severity.WARN
    assert [e.key for e in got.evidence] == ["kv.usage_ratio", "server.requests_waiting"]


def test_full_cache_alone_is_not_pressure():
    """No preemption in the window and nothing waiting: the cache is simply in use."""
    c = KvPressure()
    f = Feed()
    f.run(lambda: c._t(0.99, 0), 30)
    assert not f.active("MEM-001")


def _full_on(ticks_of_ten: int) -> Feed:
    """40 s of a small cache full on ``ticks_of_ten`` ticks of every 10 (0.67 on the
    others: its median stays low) with requests waiting."""
    c = KvPressure()
    f = Feed()
    n = [0]

    def t():
        n[0] += 1
        return c._t(1.0 if n[0] % 10 < ticks_of_ten else 0.67, 3)

    f.run(t, 40)
    return f


def test_cache_hitting_full_on_many_ticks_is_pressure_though_its_median_is_lower():
    """A small cache moves in whole blocks: full on 4 ticks of 10 (median ~0.7) with a
    queue is pressure, judged by the share of full ticks (PREEMPT_FULL_SHARE, 30 %)."""
    kv = _full_on(4).active("MEM-001")[0].evidence[0]
    assert kv.key == "kv.usage_ratio" and kv.threshold == 0.3
    assert isinstance(kv.value, float) and 0.3 <= kv.value <= 0.5
    assert "share of the ticks" in kv.note
    assert not _full_on(2).active("MEM-001")       # full on 2 ticks of 10: under the share


# ---- MEM-003: growth over a window shorter than the history ------------------------------
def test_growth_is_measured_over_the_window_not_the_whole_history():
    """300 s of steady growth at 0.1 GiB/s: the evidence is the rise over the last 120 s
    (mem_growth_window), 12 GiB, not the 30 GiB since the start."""
    f = Feed()
    used = [10 * GIB]

    def t():
        used[0] += 0.1 * GIB
        return {"gpu.mem_used_bytes": {"gpu=0": used[0]},
                "gpu.mem_total_bytes": {"gpu=0": 80 * GIB}}

    f.run(t, 300)
    got = f.active("MEM-003")[0]
    rise = got.evidence[0]
    assert rise.value == pytest.approx(12 * GIB, rel=0.005)
    assert rise.threshold == pytest.approx(0.03 * 80 * GIB)
    assert "in 120 s" in rise.note
    # 40 GiB used, 0.1 GiB/s: full in ~400 s, beyond mem_oom_eta_seconds (300): a warning
    assert got.severity is Severity.WARN and "growing" in got.title


def test_growth_that_stopped_longer_ago_than_the_window_is_not_growth():
    f = Feed()
    used = [10 * GIB]

    def t():
        if f.t - 1_000_000.0 < 100:
            used[0] += 0.1 * GIB
        return {"gpu.mem_used_bytes": {"gpu=0": used[0]},
                "gpu.mem_total_bytes": {"gpu=0": 80 * GIB}}

    f.run(t, 100)
    assert f.active("MEM-003")
    f.run(t, 200)                  # flat for 200 s: the last 120 s hold no rise
    assert not [x for x in f.active("MEM-003") if "growing" in x.title]


def test_memory_that_went_down_on_the_way_is_not_growth():
    """Rose by 10 GiB over the window but fell in the middle: a load that came and went."""
    f = Feed()
    step = [0]

    def t():
        step[0] += 1
        k = step[0]
        used = 20 + (k * 0.2 if k < 50 else 10 + (k - 50) * 0.2 if k >= 70 else 0)
        return {"gpu.mem_used_bytes": {"gpu=0": used * GIB},
                "gpu.mem_total_bytes": {"gpu=0": 80 * GIB}}

    f.run(t, 100)
    assert not [x for x in f.active("MEM-003") if "growing" in x.title]


# ---- MEM-004: the model named on a command line ------------------------------------------
@pytest.mark.parametrize("cmdline,want", [
    ("python -m vllm.entrypoints.openai.api_server --model org/llama-8b --port 8000",
     "org/llama-8b"),
    ("python -m vllm.entrypoints.openai.api_server --model=org/llama-8b/ --port 8000",
     "org/llama-8b"),
    ("python3 -m sglang.launch_server --model-path=/models/qwen", "/models/qwen"),
    ("python3 -m sglang.launch_server --model-path /models/qwen/", "/models/qwen"),
    ("text-generation-launcher --model-id=bigscience/bloom", "bigscience/bloom"),
    ("llama-server -m /models/llama.gguf -c 4096", "/models/llama.gguf"),
    ("vllm serve org/llama-8b --port 8000", "org/llama-8b"),
    ("vllm serve --port 8000", None),                      # a flag, not a model
    ("python -m vllm.entrypoints.openai.api_server --port 8000", None),
    ("/usr/bin/python3.11 -m vllm.entrypoints.openai.api_server", None),
    ("llama-server -m", None),                             # flag without a value
    ("VLLM::EngineCore", None),
    ("", None),
])
def test_parse_model(cmdline, want):
    from infertop.rules.memory import parse_model
    assert parse_model(cmdline) == want


def test_weights_twice_by_model_given_with_equals():
    d = _procs(0)
    d["process.info"]["pid=300,ppid=1,name=python,role=api_server,kind=vllm"] = \
        "python -m vllm.entrypoints.openai.api_server --model=org/llama-8b --port 8001"
    f = Feed()
    f.run(lambda: d, 10)
    got = f.active("MEM-004")[0]
    assert "model org/llama-8b loaded twice" in got.title


def test_one_request_waiting_is_a_queue():
    """The queue share counts ticks with at least one request waiting."""
    f = Feed()
    f.run(lambda: {"kv.usage_ratio": {E0: 0.97}, "server.requests_waiting": {E0: 1}}, 20)
    got = f.active("MEM-001")[0]
    queue = got.evidence[-1]
    assert queue.key == "server.requests_waiting" and queue.value == 1.0


def test_low_headroom_evidence_is_the_used_share_against_the_headroom():
    f = Feed()
    f.run(Headroom().bad, 10)                  # 93 % of 80 GiB used, no server to explain it
    got = f.active("MEM-003")[0]
    (e,) = got.evidence
    assert e.key == "gpu.mem_used_bytes" and dict(e.labels) == {"gpu": "0"}
    assert e.value == pytest.approx(0.93) and e.threshold == pytest.approx(0.8)
    assert e.op == ">" and e.note.startswith("5.6 GiB free of 80.0 GiB")
    assert "headroom low" in got.title and got.subject == (("gpu", "0"),)


def test_growth_is_judged_once_half_the_window_is_covered():
    """mem_growth_window is 120 s: 45 s of steep growth is not judged yet, 75 s is."""
    f = Feed()
    used = [20 * GIB]

    def t():
        used[0] += 0.2 * GIB
        return {"gpu.mem_used_bytes": {"gpu=0": used[0]},
                "gpu.mem_total_bytes": {"gpu=0": 80 * GIB}}

    f.run(t, 45)
    assert not f.active("MEM-003")
    f.run(t, 30)
    assert "growing" in f.active("MEM-003")[0].title
