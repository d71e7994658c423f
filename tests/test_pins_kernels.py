"""Pins for the kernel rules where a mutation run found none (issue 31 item 8): KRN-001's
cheap pre-check, its batch bounds (one request; engine steps without a running count),
its evidence on one GPU and its cuda_graphs setting."""

from __future__ import annotations

from typing import Any

from test_rules_kernels import BelowRoofline, LaunchBound, Superlinear

from helpers.rulekit import Feed, Hist
from infertop.config import config_from_dict
from infertop.rules import kernels

SUBJECT = ("KRN-001", (("gpus", "0"),))


def _launch(cpu: float = 0.98, running: float | None = 4,
            extra: dict[str, Any] | None = None) -> dict[str, Any]:
    data = LaunchBound()._t(cpu)
    if running is None:
        del data["server.requests_running"]
    else:
        data["server.requests_running"] = {"engine=0,model=m": running}
    return {**data, **(extra or {})}


def test_one_running_request_is_a_small_batch() -> None:
    f = Feed()
    f.run(lambda: _launch(running=1), 15)
    (got,) = f.active("KRN-001")
    assert got.evidence[2].value == 1 and got.evidence[2].note == "small decode batch"


def test_launch_bound_evidence_on_one_gpu_names_it_and_the_eager_setting() -> None:
    f = Feed()
    f.run(lambda: _launch(), 15)
    (got,) = f.active("KRN-001")
    assert got.title == "launch-bound decode in eager mode"
    sm = got.evidence[1]
    assert (sm.key, sm.labels, sm.note) == ("gpu.sm_active_ratio", (("gpu", "0"),),
                                            "median over 10 s")
    graphs = got.evidence[-1]
    assert (graphs.key, graphs.value) == ("server.setting", "off (--enforce-eager)")
    assert graphs.note == "every kernel launched one by one from Python"


def test_a_thread_dipping_to_half_the_limit_still_holds_on_its_median() -> None:
    """The pre-check (any thread at half the limit or more) is inclusive: a thread that
    reads exactly half of launch_thread_cpu_min now but whose median is high still
    holds the condition this tick."""
    f = Feed()
    f.run(lambda: _launch(), 15)
    assert SUBJECT in f.diag.holding
    half = 0.5 * f.diag.config.thresholds.launch_thread_cpu_min
    data = _launch(cpu=half)
    data["thread.cpu_ratio"] = {"pid=200,tid=200,name=python": half}
    f.tick(data)
    assert SUBJECT in f.diag.holding


def _steps(tokens: float) -> Any:
    h = Hist((1, 2, 4, 8, 16, 32, 64))

    def make() -> dict[str, Any]:
        h.observe(tokens, 10)
        return _launch(running=None, extra={"server.iteration_tokens": {
            "engine=0,model=m": h.value()}})
    return make


def test_without_a_running_count_the_engine_steps_size_the_batch() -> None:
    f = Feed()
    f.run(_steps(4), 15)
    (got,) = f.active("KRN-001")
    assert got.evidence[2].key == "server.iteration_tokens_mean"
    big = Feed()
    big.run(_steps(32), 15)       # past launch_batch_max (16): not a small batch
    assert not big.active("KRN-001")


def test_the_rules_are_the_layers_three() -> None:
    assert [r.code for r in kernels.RULES] == ["KRN-001", "KRN-002", "KRN-003"]


def test_prompt_lengths_without_ttft_for_that_engine_are_not_fitted() -> None:
    """Engine 0 reports prompt lengths but no TTFT (engine 1 does): KRN-002 skips it,
    without a rule error (Feed asserts none)."""
    prompt, ttft = Hist((64, 256, 1024, 4096)), Hist()

    def make() -> dict[str, Any]:
        prompt.observe(800, 4)
        ttft.observe(0.2, 4)
        return {"request.prompt_tokens": {"engine=0,model=m": prompt.value(),
                                          "engine=1,model=m": prompt.value()},
                "latency.ttft_seconds": {"engine=1,model=m": ttft.value()}}
    f = Feed()
    f.run(make, 5)
    assert not f.active("KRN-002")


def test_below_roofline_lists_the_tensor_cores_activity_when_read() -> None:
    case = BelowRoofline()
    f = Feed()
    f.run(lambda: {**case.bad(), "gpu.tensor_active_ratio": {"gpu=0": 0.12}}, 20)
    (got,) = f.active("KRN-003")
    (tens,) = [e for e in got.evidence if e.key == "gpu.tensor_active_ratio"]
    assert tens.value == 0.12 and tens.labels == (("gpu", "0"),)


def _superlinear(prompts_per_tick: int, ttfts_per_tick: int, min_requests: int) -> Feed:
    """TTFT growing like prompt^2, each 10 s window holding 10 ticks of
    ``prompts_per_tick`` prompt lengths and ``ttfts_per_tick`` first tokens."""
    prompt = Hist((64, 128, 256, 512, 1024, 2048, 4096, 8192))
    ttft = Hist()
    n = [0]

    def make() -> dict[str, Any]:
        p = Superlinear.PROMPTS[(n[0] // 10) % 5]
        n[0] += 1
        prompt.observe(p, prompts_per_tick)
        ttft.observe(0.02 * (p / 200) ** 2, ttfts_per_tick)
        return {"request.prompt_tokens": {"engine=0,model=m": prompt.value()},
                "latency.ttft_seconds": {"engine=0,model=m": ttft.value()}}
    f = Feed(config_from_dict({"thresholds": {"ttft_fit_min_requests": min_requests}}))
    f.run(make, 80)
    return f


def test_a_window_with_exactly_the_minimum_of_requests_counts() -> None:
    assert _superlinear(4, 4, 40).active("KRN-002")      # 40 of each per window
    assert not _superlinear(4, 4, 41).active("KRN-002")


def test_a_window_needs_the_minimum_of_prompt_lengths_too() -> None:
    """40 first tokens but 30 prompt lengths a window, 35 needed: no window counts."""
    assert not _superlinear(3, 4, 35).active("KRN-002")
    assert _superlinear(4, 3, 30).active("KRN-002")


def test_below_roofline_judges_the_servers_own_gpus_only() -> None:
    """One server whose worker holds GPU 0; GPU 1 idles for someone else: the busy-GPU
    check is GPU 0's, not the mean of both."""
    case = BelowRoofline()
    procs = {"process.info": {
        "pid=100,ppid=1,name=python,role=api_server,kind=vllm": "vllm serve m",
        "pid=201,ppid=100,name=VLLM::Worker,role=worker,kind=vllm": "VLLM::Worker"},
        "process.gpu_mem_bytes": {"gpu=0,pid=201": 20e9}}

    def make() -> dict[str, Any]:
        return {**case.bad(), **procs, "gpu.util_ratio": {"gpu=0": 0.95, "gpu=1": 0.1}}
    f = Feed()
    f.run(make, 20)
    (got,) = f.active("KRN-003")
    util = got.evidence[1]
    assert util.key == "gpu.util_ratio" and util.labels == (("gpu", "0"),)
    assert util.note == "median over 10 s"


def test_windows_of_one_token_prompts_count_in_the_fit() -> None:
    """Prompts of 1 and 4 tokens in turn, TTFT like prompt^2: the 1-token windows are
    half the fit (a mean prompt of one token is a prompt)."""
    prompt = Hist((1, 2, 4, 8))
    ttft = Hist()
    n = [0]

    def make() -> dict[str, Any]:
        p = (1, 4)[((n[0] - 1) // 10) % 2]   # each 10 s window one length only
        n[0] += 1
        prompt.observe(p, 4)
        ttft.observe(0.02 * p ** 2, 4)
        return {"request.prompt_tokens": {"engine=0,model=m": prompt.value()},
                "latency.ttft_seconds": {"engine=0,model=m": ttft.value()}}
    f = Feed()
    f.run(make, 80)
    (got,) = f.active("KRN-002")
    assert got.title == "TTFT grows like prompt^2.0"
