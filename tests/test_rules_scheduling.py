"""Scheduling rules SCH-001..SCH-004."""

from __future__ import annotations


from helpers.rulekit import (Case, Feed)

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


CASES = [Gil(), QueueWhileIdle(), TooManyThreads(), HostCpu()]


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
