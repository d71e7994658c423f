"""Pins for the scheduling rules where a mutation run found none (issue 31 item 8).

Each test names what it pins: SCH-001's process-name fallback, SCH-002's evidence and
title on each of its paths (GPU readings or not, KV reading or not, cap setting or the cap
read from the page), SCH-003's guards, SCH-005 with a deferred reading just appeared.
"""

from __future__ import annotations

from typing import Any

from helpers.rulekit import Feed
from infertop.rules import scheduling

E0 = "engine=0,model=m"


# ---- SCH-001: a process without process.info is judged by its name -----------------------
class _Gil:
    """A process pinned near one core with three busy threads while throughput halves."""

    def __init__(self, name: str) -> None:
        self.name, self.gen = name, 0.0

    def tick(self, tok_per_s: float) -> dict[str, Any]:
        self.gen += tok_per_s
        return {"process.cpu_ratio": {f"pid=100,name={self.name}": 1.0},
                "thread.cpu_ratio": {f"pid=100,tid={100 + i},name={self.name}": v
                                     for i, v in enumerate((0.45, 0.35, 0.2))},
                "server.generation_tokens_total": {E0: self.gen}}


def _gil_run(name: str) -> Feed:
    g, f = _Gil(name), Feed()
    f.run(lambda: g.tick(1000), 40)
    f.run(lambda: g.tick(400), 20)
    return f


def test_a_process_named_python_without_process_info_is_judged_for_the_gil() -> None:
    (got,) = _gil_run("python3").active("SCH-001")
    assert got.title == "GIL contention in pid 100 (python3)"


def test_a_process_not_named_python_without_process_info_is_not() -> None:
    assert not _gil_run("nginx").active("SCH-001")


# ---- SCH-002 ------------------------------------------------------------------------------
def _queue(running: float | None = 8, sm: float | None = 0.25, kv: float | None = 0.3,
           cap: str | None = "8", extra: dict[str, Any] | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"server.requests_waiting": {E0: 12}}
    if running is not None:
        data["server.requests_running"] = {E0: running}
    if kv is not None:
        data["kv.usage_ratio"] = {E0: kv}
    if sm is not None:
        data["gpu.sm_active_ratio"] = {"gpu=0": sm, "gpu=1": sm}
    if cap is not None:
        data["server.setting"] = {"name=max_num_seqs": cap}
    return {**data, **(extra or {})}


def _sch002(n: int = 15, **kw: Any) -> list:
    f = Feed()
    f.run(lambda: _queue(**kw), n)
    return f.active("SCH-002")


def test_idle_gpus_with_a_cap_setting_name_the_setting_and_the_running_batch() -> None:
    (got,) = _sch002()
    assert got.title == "queue grows while GPUs idle and KV is free (max_num_seqs=8 reached)"
    keys = [e.key for e in got.evidence]
    # the queue, then the running batch (inserted second), GPUs, KV, then the setting
    assert keys == ["server.requests_waiting", "server.requests_running",
                    "gpu.sm_active_ratio", "kv.usage_ratio", "server.setting"]
    running, setting = got.evidence[1], got.evidence[-1]
    assert running.value == 8 and running.note == "running"
    assert setting.note == "the concurrency cap is reached"


def test_no_gpu_readings_with_a_cap_setting_give_the_share_at_the_cap() -> None:
    (got,) = _sch002(sm=None)
    assert got.title == "queue grows while the batch is at its cap and KV is free " \
                        "(max_num_seqs=8 reached)"
    at_cap = got.evidence[-1]
    assert (at_cap.key, at_cap.op, at_cap.threshold) == ("server.requests_running", ">=", 0.5)
    assert at_cap.value == 1.0 and at_cap.note.endswith("at max_num_seqs=8; no GPU readings")
    assert not any(e.key == "server.setting" for e in got.evidence)


def test_no_kv_reading_names_no_free_kv() -> None:
    (got,) = _sch002(kv=None)
    assert got.title == "queue grows while GPUs idle (max_num_seqs=8 reached)"
    assert got.evidence[-1].note.endswith("; no KV reading")


def test_a_cap_reached_on_exactly_half_the_ticks_is_reached() -> None:
    """QUEUED_SHARE is inclusive: the running batch at the cap on half the judged ticks."""
    f = Feed()
    n = [0]

    def flip() -> dict[str, Any]:
        n[0] += 1
        return _queue(running=8 if n[0] % 2 else 7, sm=None)
    f.run(flip, 30)
    (got,) = f.active("SCH-002")
    at_cap = got.evidence[-1]
    assert at_cap.key == "server.requests_running" and at_cap.value == 0.5
    assert got.title.endswith("(max_num_seqs=8 reached)")


def test_the_cap_read_from_the_page_without_gpu_readings() -> None:
    (got,) = _sch002(sm=None, cap=None)
    assert got.title == "queue grows while the batch is at its cap and KV is free " \
                        "(running pinned at 8: a batch cap)"
    at_cap = got.evidence[-1]
    assert at_cap.key == "server.requests_running" and at_cap.value == 1.0
    assert "read from the page" in at_cap.note


def test_a_batch_pinned_at_one_is_a_cap_too() -> None:
    (got,) = _sch002(running=1, sm=None, cap=None)
    assert "(running pinned at 1: a batch cap)" in got.title


def test_an_empty_batch_is_no_cap_and_idle_gpus_still_count() -> None:
    """Running 0 (no maximum to be pinned at) and no cap setting: idle GPUs and free KV
    raise SCH-002 without any cap in its title or evidence."""
    (got,) = _sch002(running=0, cap=None)
    assert got.title == "queue grows while GPUs idle and KV is free"
    assert [e.key for e in got.evidence] == ["server.requests_waiting",
                                             "server.requests_running",
                                             "gpu.sm_active_ratio", "kv.usage_ratio"]


# ---- SCH-003 ------------------------------------------------------------------------------
def _threads(cpus: float, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    threads = {f"pid={100 + i % 3},tid={1000 + i},name=omp": 0.3 for i in range(14)}
    return {"host.cpu_count": cpus, "host.cpu_ratio": 0.95, "thread.cpu_ratio": threads,
            **(extra or {})}


def test_a_host_that_reports_no_cpus_is_not_judged() -> None:
    f = Feed()
    f.run(lambda: _threads(0), 10)
    assert not f.active("SCH-003")
    f.run(lambda: _threads(4), 10)
    assert f.active("SCH-003")


def test_only_involuntary_switches_are_evidence() -> None:
    """A voluntary switch rate, or an involuntary one that does not move, is not evidence
    of threads preempting each other."""
    n = [0]

    def make() -> dict[str, Any]:
        n[0] += 1
        return _threads(4, {"process.ctx_switches_total": {
            "pid=100,type=voluntary": 1000.0 * n[0], "pid=100,type=involuntary": 5.0}})
    f = Feed()
    f.run(make, 10)
    (got,) = f.active("SCH-003")
    assert not any(e.key == "process.ctx_switches_per_second" for e in got.evidence)

    def moving() -> dict[str, Any]:
        n[0] += 1
        return _threads(4, {"process.ctx_switches_total": {
            "pid=100,type=voluntary": 1000.0 * n[0], "pid=100,type=involuntary": 50.0 * n[0]}})
    f.run(moving, 10)
    (got,) = f.active("SCH-003")
    (sw,) = [e for e in got.evidence if e.key == "process.ctx_switches_per_second"]
    assert dict(sw.labels)["type"] == "involuntary"
    assert isinstance(sw.value, float) and sw.value > 0


# ---- SCH-005 ------------------------------------------------------------------------------
def test_a_deferred_reading_just_appeared_is_not_judged_yet() -> None:
    """A queue long seen, the deferred count new this tick (no median yet): no SCH-005,
    and no rule error (Feed asserts none)."""
    f = Feed()
    f.run(lambda: _queue(), 20)
    f.tick(_queue(extra={"server.requests_deferred": {E0: 11}}))
    assert not f.active("SCH-005")


def test_the_rules_are_the_six_of_the_layer() -> None:
    assert [r.code for r in scheduling.RULES] == [f"SCH-00{i}" for i in range(1, 7)]
