"""Scheduling rules SCH-001..SCH-004."""

from __future__ import annotations

from helpers.rulekit import Case, Feed

E0 = "engine=0,model=m"
API = {"process.info": {"pid=100,ppid=1,name=python,role=api_server,kind=vllm":
                        "python -m vllm serve m"}}


class Gil(Case):
    code = "SCH-001"
    warmup = 40   # a throughput peak to fall from
    build = 5     # the 10 s throughput window has to show the fall
    missing = ("thread.cpu_ratio",)

    def __init__(self):
        self.gen = 0.0

    def _t(self, cpu, threads, tok_per_s):
        self.gen += tok_per_s
        return {**API, "process.cpu_ratio": {"pid=100,name=python": cpu},
                "thread.cpu_ratio": {f"pid=100,tid={100 + i},name=python": v
                                     for i, v in enumerate(threads)},
                "server.generation_tokens_total": {E0: self.gen}}

    def good(self):
        return self._t(0.5, (0.3, 0.1, 0.05), 1000)

    def bad(self):
        return self._t(1.0, (0.45, 0.35, 0.2), 500)

    def hi(self):
        return self._t(0.86, (0.45, 0.35, 0.06), 500)

    def lo(self):
        return self._t(0.84, (0.45, 0.35, 0.04), 500)


class QueueWhileIdle(Case):
    code = "SCH-002"
    missing = ("server.requests_waiting",)

    threshold = "thresholds.idle_sm_active_max"

    def at(self, x):
        return self._t(12, sm=x)

    def bad_side(self):
        return -1

    def _t(self, waiting, sm=0.25):
        return {"server.requests_waiting": {E0: waiting}, "server.requests_running": {E0: 8},
                "kv.usage_ratio": {E0: 0.3}, "gpu.sm_active_ratio": {"gpu=0": sm, "gpu=1": sm},
                "server.setting": {"name=max_num_seqs": "8"}}

    def good(self):
        return self._t(0)

    def bad(self):
        return self._t(12)

    def hi(self):
        return self._t(1)

    def lo(self):
        return self._t(0)


class TooManyThreads(Case):
    code = "SCH-003"
    missing = ("host.cpu_count",)

    def _t(self, n):
        threads = {f"pid={100 + i % 3},tid={1000 + i},name=omp": 0.3 for i in range(n)}
        threads.update({f"pid=100,tid={2000 + i},name=idle": 0.01 for i in range(40)})
        return {"host.cpu_count": 4, "host.cpu_ratio": 0.95, "thread.cpu_ratio": threads}

    def good(self):
        return self._t(5)

    def bad(self):
        return self._t(14)

    def hi(self):
        return self._t(9)   # > 2 x 4 cores

    def lo(self):
        return self._t(8)


class HostCpu(Case):
    code = "SCH-004"
    missing = ("host.cpu_ratio",)

    threshold = "thresholds.host_cpu_saturated"

    def at(self, x):
        return self._t(x)

    def _t(self, busy):
        return {"host.cpu_ratio": busy, "host.cpu_count": 16,
                "process.cpu_ratio": {"pid=100,name=python": 3.2, "pid=7,name=backup": 9.0}}

    def good(self):
        return self._t(0.5)

    def bad(self):
        return self._t(0.97)

    def hi(self):
        return self._t(0.91)

    def lo(self):
        return self._t(0.89)


class DeferredQueue(Case):
    """SCH-005: the queue waits on a deferral (vLLM reason=deferred), not capacity."""
    code = "SCH-005"
    missing = ("server.requests_deferred",)

    threshold = "thresholds.deferred_share_min"

    def at(self, x):
        return self._t(10, 10 * x)

    def _t(self, waiting, deferred):
        return {"server.requests_waiting": {E0: waiting},
                "server.requests_deferred": {E0: deferred},
                "server.requests_running": {E0: 2}}

    def good(self):
        return self._t(10, 0)      # a queue, but for capacity: SCH-002's business

    def bad(self):
        return self._t(10, 9)

    def hi(self):
        return self._t(10, 5)

    def lo(self):
        return self._t(10, 4)


class EngineAsleep(Case):
    """SCH-006: an engine in sleep mode."""
    code = "SCH-006"
    missing = ("server.sleep_level",)

    def _t(self, level, waiting=3):
        return {"server.sleep_level": {E0: level}, "server.requests_waiting": {E0: waiting}}

    def good(self):
        return self._t(0)

    def bad(self):
        return self._t(2)

    def hi(self):
        return self._t(1)

    def lo(self):
        return self._t(0)


CASES = [Gil(), QueueWhileIdle(), TooManyThreads(), HostCpu(), DeferredQueue(), EngineAsleep()]


# ---- closer looks ---------------------------------------------------------------------
def test_gil_needs_falling_throughput():
    """Pinned at one core with busy threads but throughput steady: working hard, not a
    finding."""
    c = Gil()
    f = Feed()
    f.run(lambda: c._t(1.0, (0.45, 0.35, 0.2), 1000), 60)
    assert not f.active("SCH-001")


def test_native_server_at_one_core_is_not_gil():
    c = Gil()
    f = Feed()
    native = {"process.info": {"pid=100,ppid=1,name=llama-server,role=server,kind=llamacpp":
                               "llama-server -m /m.gguf"}}
    f.run(lambda: {**c.good(), **native}, 40)
    f.run(lambda: {**c.bad(), **native}, 15)
    assert not f.active("SCH-001")


def test_gil_evidence_names_the_threads():
    c = Gil()
    f = Feed()
    f.run(c.good, 40)
    f.run(c.bad, 10)
    got = f.active("SCH-001")[0]
    assert got.subject == (("pid", "100"),)
    assert [e.key for e in got.evidence] == ["process.cpu_ratio", "thread.cpu_ratio",
                                             "throughput.generation_recent_tokens_per_second"]
    assert got.evidence[1].value == 3


def test_queue_with_busy_gpus_is_capacity_not_a_cap():
    c = QueueWhileIdle()
    f = Feed()
    f.run(lambda: c._t(12, sm=0.9), 15)
    assert not f.active("SCH-002")


def test_queue_at_cap_says_so():
    f = Feed()
    f.run(QueueWhileIdle().bad, 10)
    got = f.active("SCH-002")[0]
    assert "max_num_seqs=8 reached" in got.title


def test_too_many_threads_explains_host_saturation():
    f = Feed()
    f.run(TooManyThreads().bad, 10)
    assert f.active("SCH-003") and not f.active("SCH-004")


def test_host_saturation_without_a_host_scan_lists_the_servers_processes_as_such():
    f = Feed()
    f.run(HostCpu().bad, 10)
    got = f.active("SCH-004")[0]
    assert [e.labels for e in got.evidence[1:]] == [(("name", "backup"), ("pid", "7")),
                                                    (("name", "python"), ("pid", "100"))]
    assert all("top consumer" not in e.note and "the server's process" in e.note
               for e in got.evidence[1:])


def _hogged(top: dict) -> dict:
    return {**HostCpu().bad(), "host.top_cpu_cores": top}


def test_host_saturation_names_the_hosts_top_consumers_not_the_server():
    """Issue 21: with the CPUs filled by other programs, SCH-004 listed the server's own
    process (or infertop) at 0-1 % as 'top consumer'; the host's real consumers, read by
    the process probe, are named, and the remedy says the server is not among them."""
    f = Feed()
    f.run(lambda: _hogged({"pid=900,name=hog.py,server=no": 0.99,
                           "pid=901,name=hog.py,server=no": 0.98,
                           "pid=100,name=python,server=yes": 0.02}), 10)
    got = f.active("SCH-004")[0]
    tops = [e for e in got.evidence if e.key == "host.top_cpu_cores"]
    assert [dict(e.labels)["pid"] for e in tops] == ["900", "901", "100"]
    assert "hog.py (not the server)" in tops[0].describe()
    assert "python (the server)" in tops[2].describe()
    assert got.remedy.startswith("the server (python (pid 100, 2 % CPU)) shares the CPUs")
    f2 = Feed()
    f2.run(lambda: _hogged({"pid=900,name=hog.py,server=no": 0.99,
                            "pid=901,name=stress,server=no": 0.98}), 10)
    assert "not among the host's top CPU consumers: hog.py (pid 900" in \
        f2.active("SCH-004")[0].remedy



# ---- SCH-005 / SCH-006 closer looks -------------------------------------------------------
def _deferred_run(extra: dict, n: int = 40) -> Feed:
    f = Feed()
    f.run(lambda: {**QueueWhileIdle()._t(12), "server.requests_deferred": {E0: 11},
                   **extra}, n)
    return f


def test_deferred_queue_names_the_kv_transfer_not_the_concurrency_cap():
    """A decode instance (--kv-transfer-config) whose queue is deferred: SCH-005 names the
    transfer, and SCH-002 (which would say 'raise --max-num-seqs') stays quiet."""
    f = _deferred_run({"server.setting": {
        "name=max_num_seqs": "8",
        "name=kv_transfer_config": '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'}})
    [fin] = f.active("SCH-005")
    assert "KV transfer" in fin.title and "capacity" in fin.title
    assert "prefill" in fin.remedy and "--max-num-seqs does not help" in fin.remedy
    assert not f.active("SCH-002")


def test_deferred_queue_with_lora_points_at_max_loras():
    f = _deferred_run({"server.setting": {"name=max_loras": "2", "name=enable_lora": "on"}})
    [fin] = f.active("SCH-005")
    assert "LoRA" in fin.title and "--max-loras 2" in fin.title
    assert "raise --max-loras" in fin.remedy


def test_capacity_queue_is_still_sch002():
    """The same queue waiting for capacity (deferred 0): SCH-002 as before, no SCH-005."""
    f = Feed()
    f.run(lambda: {**QueueWhileIdle()._t(12), "server.requests_deferred": {E0: 0}}, 40)
    assert f.active("SCH-002") and not f.active("SCH-005")


def test_asleep_engine_is_a_warning_only_with_requests_waiting():
    f = Feed()
    f.run(lambda: EngineAsleep()._t(1, waiting=0), 10)
    [fin] = f.active("SCH-006")
    assert fin.severity.value == "notice" and "weights offloaded" in fin.title
    f.run(lambda: EngineAsleep()._t(2, waiting=4), 10)
    [fin] = f.active("SCH-006")
    assert fin.severity.value == "warn" and "4 waiting" in fin.title
