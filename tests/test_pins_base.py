"""Pins for the rules' shared Context and helpers (infertop/rules/base.py) where a
mutation run found none (issue 31 item 8): peers, settings, inputs, the hold per level,
window words, GPU groups, subjects and the split slope."""

from __future__ import annotations

from typing import Any

from helpers.rulekit import tick
from infertop.config import DiagnosisConfig
from infertop.findings import Severity
from infertop.history import History
from infertop.key_symbols import K
from infertop.keysym import any_of
from infertop.model import Status
from infertop.rules.base import (
    Context,
    describe_subject,
    server_subject,
    split_slope,
    tp_groups,
)

GIB = float(1 << 30)


def _ctx(data: dict[str, Any], ticks: int = 1, raised: Any = None,
         status: dict[str, Status] | None = None) -> Context:
    history = History()
    snaps = [tick(1000.0 + i, data, status) for i in range(ticks)]
    for s in snaps:
        history.add(s)
    return Context(history, snaps[-1], [], DiagnosisConfig(), {}, {}, raised)


def test_a_peer_reading_agrees_on_every_label_both_have() -> None:
    ctx = _ctx({"kv.usage_ratio": {"engine=0,model=m": 0.5},
                "server.requests_waiting": {"model=m": 3, "model=other": 9}})
    kv = ctx.ok("kv.usage_ratio")[0]
    got = ctx.peer("server.requests_waiting", kv.labels)
    assert got is not None and got.value == 3
    assert ctx.peer("server.requests_running", kv.labels) is None


def test_a_setting_is_read_by_its_name() -> None:
    ctx = _ctx({"server.setting": {"name=dtype": "bfloat16", "name=max_num_seqs": "8"}})
    assert ctx.setting("max_num_seqs") == "8" and ctx.setting("dtype") == "bfloat16"
    assert ctx.setting("tensor_parallel_size") is None


def test_an_input_with_alternatives_is_had_when_any_is_read() -> None:
    ctx = _ctx({"gpu.util_ratio": {"gpu=0": 0.5}})
    assert ctx.has_input(any_of(K.gpu.sm_active_ratio, K.gpu.util_ratio))
    assert not ctx.has_input(any_of(K.gpu.sm_active_ratio, K.gpu.temp_celsius))


def test_readings_without_a_value_are_not_ok() -> None:
    ctx = _ctx({"gpu.util_ratio": {"gpu=0": 0.5, "gpu=1": Status.ERROR}})
    assert [r.label("gpu") for r in ctx.ok("gpu.util_ratio")] == ["0"]


def test_a_share_counts_ticks_at_the_value_itself() -> None:
    n = [0]
    history = History()
    snaps = []
    for i in range(10):
        n[0] += 1
        snaps.append(tick(1000.0 + i, {"server.requests_waiting": {"model=m": i % 2}}))
        history.add(snaps[-1])
    ctx = Context(history, snaps[-1], [], DiagnosisConfig(), {}, {})
    r = ctx.ok("server.requests_waiting")[0]
    assert ctx.share(r, 1.0) == 0.5


SUBJ = (("gpu", "0"),)


def test_a_hold_relaxes_the_level_that_is_raised_and_those_below() -> None:
    raised = {("HW-006", SUBJ): Severity.WARN}
    ctx = _ctx({}, raised=raised)
    ctx.rule_code = "HW-006"
    assert ctx.past(0.86, ">=", 0.9, SUBJ, level=Severity.WARN)        # 0.81 relaxed
    assert not ctx.past(0.86, ">=", 0.9, SUBJ, level=Severity.CRIT)    # never lifted
    assert ctx.past(1.05, "<=", 1.0, SUBJ, level=Severity.NOTICE)      # 1.1 relaxed
    assert not ctx.past(None, ">=", 0.9, SUBJ)
    assert ctx.past(0.9, ">=", 0.9, (("gpu", "1"),))                   # strict, met


def test_rate_words_name_the_span_a_young_window_covers() -> None:
    ctx = _ctx({"server.preemptions_total": {"model=m": 1}}, ticks=6)
    words = ctx.rate_words("server.preemptions_total", (("model", "m"),))
    assert words == "over the 60 s window, of which 5 s covered (as Prometheus's rate())"
    assert ctx.rate_words("server.preemptions_total", (("model", "x"),)) == \
        "over the last 60 s"


def test_a_process_holding_exactly_256_mib_holds_its_gpu() -> None:
    ctx = _ctx({"process.gpu_mem_bytes": {"gpu=0,pid=7": 256 * 2**20,
                                          "gpu=1,pid=7": 256 * 2**20 - 1}})
    assert ctx.gpus_by_root() == {"7": ["0"]}
    assert ctx.procs == {}


def _used(n: int, tp: str | None, dp: str | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"gpu.mem_used_bytes": {f"gpu={g}": 30 * GIB for g in range(n)}}
    settings = {}
    if tp is not None:
        settings["name=tensor_parallel_size"] = tp
    if dp is not None:
        settings["name=data_parallel_size"] = dp
    if settings:
        data["server.setting"] = settings
    return data


def test_tp_groups_from_the_gpus_in_use_and_the_tp_size() -> None:
    assert tp_groups(_ctx(_used(4, "2"))) == [("0", "1"), ("2", "3")]
    assert tp_groups(_ctx(_used(4, "4"))) == [("0", "1", "2", "3")]
    assert tp_groups(_ctx(_used(3, "2"))) == []       # 3 GPUs do not split by 2
    assert tp_groups(_ctx(_used(4, "1"))) == []
    assert tp_groups(_ctx(_used(4, None))) == []      # unknown: none


def test_tp_groups_of_a_servers_process_tree() -> None:
    procs = {"process.info": {
        "pid=100,ppid=1,name=python,role=api_server,kind=vllm": "vllm serve m",
        "pid=201,ppid=100,name=w,role=worker,kind=vllm": "w",
        "pid=202,ppid=100,name=w,role=worker,kind=vllm": "w"},
        "process.gpu_mem_bytes": {"gpu=0,pid=201": 20 * GIB, "gpu=1,pid=202": 20 * GIB}}
    assert tp_groups(_ctx(procs)) == [("0", "1")]                  # no TP size: the tree
    assert tp_groups(_ctx({**procs, "server.setting": {"name=data_parallel_size": "2"}})) == []
    both = {**procs, "server.setting": {"name=tensor_parallel_size": "2"}}
    assert tp_groups(_ctx(both)) == [("0", "1")]


def test_subjects() -> None:
    assert server_subject((("engine", "0"), ("instance", "a"), ("model", "m"),
                           ("quantile", "0.99"))) == \
        (("engine", "0"), ("instance", "a"), ("model", "m"))
    assert describe_subject((("gpus", "0,1"),)) == "GPUs 0,1"
    assert describe_subject((("gpu", "3"),)) == "GPU 3"
    assert describe_subject((("engine", "0"), ("model", "m"))) == "engine=0 model=m"


def test_split_slope_weighs_halves_and_ignores_empty_points() -> None:
    pts = [(100.0, 1.0, 1.0), (200.0, 4.0, 1.0), (0.0, 5.0, 1.0), (300.0, 0.0, 1.0),
           (400.0, 9.0, 0.0)]
    got = split_slope(pts)
    assert got is not None
    slope, (x_lo, x_hi), (y_lo, y_hi) = got
    assert (x_lo, x_hi, y_lo, y_hi) == (100.0, 200.0, 1.0, 4.0) and abs(slope - 2.0) < 1e-12
    # three equal weights: the lower half holds the points before half the weight
    got = split_slope([(1.0, 1.0, 1.0), (2.0, 2.0, 1.0), (4.0, 4.0, 1.0)])
    assert got is not None and got[1] == (1.5, 4.0)
    assert split_slope([(5.0, 1.0, 1.0), (5.0, 2.0, 1.0)]) is None    # no spread in x
    assert split_slope([(1.0, 1.0, 1.0)]) is None
