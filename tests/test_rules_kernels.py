"""Kernel rules KRN-001 (launch-bound decode) and KRN-002 (TTFT superlinear)."""

from __future__ import annotations

import pytest

from helpers.rulekit import Case, Feed, Hist

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
    PROMPTS: tuple[int, ...] = (200, 400, 800, 1600, 3200)

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


class BelowRoofline(Case):
    """A 7B fp16 model on one H100 (3.35 TB/s), batch 8 with 1000 tokens of context: the
    roofline is 8 / ((14e9 + 8 x 1000 x 524288) / 3.35232e12) = 1474 tok/s.  Healthy
    decodes 1200 tok/s (81 %), bad 150 tok/s (10 %) while NVML util says 95 %."""

    code = "KRN-003"
    windowed = True
    build = 10   # the 60 s rate needs ~8 bad seconds to fall under 30 %
    lag = 15
    missing = ("model.weight_bytes",)

    def __init__(self):
        self.tokens = 0.0
        self.prompt = Hist((256, 512, 1024, 2048))
        self.gen = Hist((64, 128, 256, 512))

    def _t(self, tok_s, util=0.95, dram=0.2):
        self.tokens += tok_s
        self.prompt.observe(900, 2)
        self.gen.observe(200, 2)
        return {"gpu.info": {"gpu=0": "NVIDIA H100 80GB HBM3"},
                "gpu.mem_bus_width_bits": {"gpu=0": 5120},
                "gpu.mem_clock_max_hz": {"gpu=0": 2619e6},
                "gpu.util_ratio": {"gpu=0": util}, "gpu.dram_bw_util_ratio": {"gpu=0": dram},
                "model.params": {"model=m": 7e9}, "model.active_params": {"model=m": 7e9},
                "model.weight_bytes": {"model=m": 14e9},
                "model.kv_bytes_per_token": {"model=m": 524288},
                "server.generation_tokens_total": {"engine=0,model=m": self.tokens},
                "server.requests_running": {"engine=0,model=m": 8},
                "request.prompt_tokens": {"engine=0,model=m": self.prompt.value()},
                "request.generation_tokens": {"engine=0,model=m": self.gen.value()}}

    def good(self):
        return self._t(1200)

    def bad(self):
        return self._t(150)

    def hi(self):   # far below the roofline, GPU just busy enough
        return self._t(150, util=0.81)

    def lo(self):   # far below the roofline, GPU just not busy
        return self._t(150, util=0.79)


CASES = [LaunchBound(), Superlinear(), BelowRoofline()]


def test_below_roofline_evidence_and_remedy():
    c = BelowRoofline()
    f = Feed()
    f.run(c.bad, 20)
    got = f.active("KRN-003")
    assert got, [x.code for x in f.findings]
    fin = got[0]
    ratio = fin.evidence[0]
    assert ratio.key == "sol.decode_roofline_ratio"
    assert ratio.value == pytest.approx(150 / 1474.03, rel=1e-4)
    assert "of at most 1474 tok/s" in ratio.note and "memory-bound at batch 8.0" in ratio.note
    assert any(e.key == "gpu.dram_bw_util_ratio" and "GPM confirms" in e.note
               for e in fin.evidence)
    assert "small batches" in fin.remedy
    assert fin.title.startswith("decode at 10 % of its roofline")


def test_below_roofline_quiet_when_gpm_says_memory_is_busy():
    """DRAM at 70 %: memory is the limit after all, the model estimate must be off."""
    c = BelowRoofline()
    f = Feed()
    f.run(lambda: c._t(150, dram=0.7), 25)
    assert not f.active("KRN-003")


def test_below_roofline_without_gpm_says_it_was_not_cross_checked():
    c = BelowRoofline()
    f = Feed()
    f.run(lambda: {k: v for k, v in c.bad().items() if k != "gpu.dram_bw_util_ratio"}, 20)
    fin = f.active("KRN-003")[0]
    assert any("not cross-checked" in e.note for e in fin.evidence)


def test_large_batch_below_roofline_is_left_to_other_rules():
    """64 running requests far below the roofline: copies, stragglers or fp32 (HW/PAR
    rules), not launches."""
    c = BelowRoofline()
    f = Feed()
    f.run(lambda: {**c.bad(), "server.requests_running": {"engine=0,model=m": 64}}, 25)
    assert not f.active("KRN-003")


def test_launch_bound_explains_below_roofline():
    """KRN-001 (the engine thread pinned, eager mode) is the cause: KRN-003 stays quiet."""
    c, lb = BelowRoofline(), LaunchBound()
    f = Feed()
    f.run(lambda: {**c.bad(), **lb.bad()}, 20)
    assert f.active("KRN-001") and not f.active("KRN-003")


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
    assert slope.key == "latency.ttft_seconds" and isinstance(slope.value, float)
    assert 1.8 <= slope.value <= 2.2
    assert slope.threshold == 1.5 and slope.op == ">="


def test_steady_prompt_mix_gives_no_fit():
    c = Superlinear()
    c.PROMPTS = (800,)
    f = Feed()
    f.run(c.bad, 100)
    assert not f.active("KRN-002")
