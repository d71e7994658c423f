"""Kernel rules KRN-001 (launch-bound decode) and KRN-002 (TTFT superlinear)."""

from __future__ import annotations

import pytest

from helpers.rulekit import (Case, Feed, Hist)

PROCS = {"process.info": {"pid=100,ppid=1,name=python,role=api_server,kind=vllm":
                          "python -m vllm.entrypoints.openai.api_server --model m",
                          "pid=200,ppid=100,name=VLLM::EngineCore,role=engine_core,kind=vllm":
                          "VLLM::EngineCore"}}


class LaunchBound(Case):
    code = "KRN-001"
    missing = ("gpu.sm_active_ratio",)

    threshold = "thresholds.launch_thread_cpu_min"

    def at(self, x):
        return self._t(x)

    def _t(self, cpu, graphs="off (--enforce-eager)"):
        return {**PROCS,
                "thread.cpu_ratio": {"pid=200,tid=200,name=python": cpu,
                                     "pid=200,tid=210,name=ZMQbg/IO/0": 0.05,
                                     "pid=100,tid=100,name=python": 0.99},  # API server: not it
                "gpu.util_ratio": {"gpu=0": 0.97}, "gpu.sm_active_ratio": {"gpu=0": 0.2},
                "server.requests_running": {"engine=0,model=m": 4},
                "server.setting": {"name=cuda_graphs": graphs}}

    def good(self):
        return self._t(0.3)

    def bad(self):
        return self._t(0.98)

    def hi(self):
        return self._t(0.91)

    def lo(self):
        return self._t(0.89)


class Superlinear(Case):
    """Prompt lengths change every 10 s; TTFT = c * prompt^k (k=2 bad, k=1 good)."""

    code = "KRN-002"
    windowed = True
    build = 60   # windows of requests before a fit exists
    lag = 130    # old windows leave the 120 s fit
    missing = ("request.prompt_tokens",)
    PROMPTS = (200, 400, 800, 1600, 3200)

    def __init__(self):
        self.n = 0
        self.prompt = Hist((64, 128, 256, 512, 1024, 2048, 4096, 8192))
        self.ttft = Hist()

    def _t(self, exponent):
        p = self.PROMPTS[(self.n // 10) % len(self.PROMPTS)]
        self.n += 1
        ttft = 0.02 * (p / 200) ** exponent
        self.prompt.observe(p, 4)
        self.ttft.observe(ttft, 4)
        return {"request.prompt_tokens": {"engine=0,model=m": self.prompt.value()},
                "latency.ttft_seconds": {"engine=0,model=m": self.ttft.value()}}

    def good(self):
        return self._t(1.0)

    def bad(self):
        return self._t(2.0)

    def hi(self):
        return self._t(1.6)

    def lo(self):
        return self._t(1.4)


CASES = [LaunchBound(), Superlinear()]


# ---- closer looks ---------------------------------------------------------------------
def test_launch_bound_explains_busy_not_working():
    """Same GPU, same moment: the cause (KRN-001) is shown, the symptom (HW-001) is not."""
    c = LaunchBound()
    f = Feed()
    f.run(c.bad, 10)
    assert f.active("KRN-001") and not f.active("HW-001")
    ev = f.active("KRN-001")[0]
    assert "eager" in ev.title and "CUDA graphs" in ev.remedy
    assert ev.evidence[0].labels == (("name", "python"), ("pid", "200"), ("tid", "200"))


def test_launch_bound_with_graphs_on_points_elsewhere():
    c = LaunchBound()
    f = Feed()
    f.run(lambda: c._t(0.98, graphs="on (default)"), 10)
    got = f.active("KRN-001")
    assert got and "eager" not in got[0].title and "batch" in got[0].remedy


def test_large_batch_is_not_launch_bound():
    c = LaunchBound()
    f = Feed()
    f.run(lambda: {**c.bad(), "server.requests_running": {"engine=0,model=m": 64}}, 10)
    assert not f.active("KRN-001")


@pytest.mark.parametrize("with_queue,want", [(True, False), (False, True)])
def test_queue_time_is_taken_out_of_ttft(with_queue, want):
    """Prefill linear in prompt length, but long prompts also queued much longer: with the
    queue histogram the fit sees prefill (linear, quiet); without it, it cannot tell."""
    prompt = Hist((64, 128, 256, 512, 1024, 2048, 4096, 8192))
    ttft, queue = Hist(), Hist()
    n = 0

    def t():
        nonlocal n
        p = Superlinear.PROMPTS[(n // 10) % 5]
        n += 1
        prefill, q = 0.02 * (p / 200), 0.005 * (p / 200) ** 2
        prompt.observe(p, 4)
        ttft.observe(prefill + q, 4)
        queue.observe(q, 4)
        d = {"request.prompt_tokens": {"engine=0,model=m": prompt.value()},
             "latency.ttft_seconds": {"engine=0,model=m": ttft.value()}}
        if with_queue:
            d["latency.queue_seconds"] = {"engine=0,model=m": queue.value()}
        return d

    f = Feed()
    f.run(t, 100)
    assert bool(f.active("KRN-002")) is want


def test_superlinear_evidence_reports_slope():
    c = Superlinear()
    f = Feed()
    f.run(c.bad, 80)
    got = f.active("KRN-002")
    assert got
    slope = got[0].evidence[0]
    assert slope.key == "latency.ttft_seconds" and 1.8 <= slope.value <= 2.2
    assert slope.threshold == 1.5 and slope.op == ">="


def test_steady_prompt_mix_gives_no_fit():
    c = Superlinear()
    c.PROMPTS = (800,)
    f = Feed()
    f.run(c.bad, 100)
    assert not f.active("KRN-002")
