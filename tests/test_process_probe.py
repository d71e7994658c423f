"""ProcessProbe against a real process tree (tests/helpers/spawn_tree.py), plus the pure
NVML pid matching and the /proc readers on fake /proc folders."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from helpers.snapkit import meta_of, value_of
from helpers.spawn_tree import spawn
from infertop.keys import SPECS
from infertop.meta import ProcessMeta, ServerInfo
from infertop.model import Reading, Sample, Status
from infertop.probes.server.discovery import ServerProcess, looked_for
from infertop.probes.server.process import (
    ProcessProbe,
    detect_container,
    map_gpu_pids,
    ns_pid_aliases,
    read_comm,
    read_nspids,
)

HOST_KEYS = {"host.cpu_ratio", "host.cpu_count", "host.load1", "host.mem_used_bytes",
             "host.mem_total_bytes"}


def by_pid(sample: Sample, key: str, pid: int) -> list[Reading]:
    return [r for r in sample.find(key) if r.label("pid") == str(pid)]


def pmeta(sample: Sample) -> ProcessMeta:
    return meta_of(sample, ProcessMeta)


def server_of(sample: Sample) -> ServerInfo:
    """The server the probe follows (fails the test when it follows none)."""
    server = pmeta(sample).server
    assert server is not None, pmeta(sample)
    return server


def wait_for_cpu(pid: int, seconds: float, timeout: float = 60.0) -> None:
    """Wait (on a condition, not a clock) until pid has used `seconds` more CPU."""
    p = psutil.Process(pid)
    start = sum(p.cpu_times()[:2])
    end = time.monotonic() + timeout
    while sum(p.cpu_times()[:2]) - start < seconds:
        assert time.monotonic() < end, "the burner threads never got the CPU"
        time.sleep(0.02)


def wait_gone(pid: int, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.01)
    raise AssertionError(f"pid {pid} did not exit")


def assert_well_formed(sample):
    for r in sample.readings:
        spec = SPECS[r.key]
        assert (r.unit, r.kind) == (spec.unit, spec.kind), r
        if r.status is Status.OK:
            assert r.value is not None, r


async def test_two_ticks_over_a_real_tree():
    # the burners run until the tree is let go (not for a wall-clock while that a busy
    # machine can use up before the second tick): they are all alive at both ticks
    with spawn(burn=600.0) as t:
        parent, child = t["parent"], t["child"]
        owner = psutil.Process(child).username()
        probe = ProcessProbe(pid=parent)
        try:
            first = await probe.collect()
            assert server_of(first).pid == parent
            assert server_of(first).reason == f"--pid {parent}"
            (cpu0,) = by_pid(first, "process.cpu_ratio", child)
            assert cpu0.status is Status.NODATA and "two samples" in cpu0.reason
            wait_for_cpu(child, 0.4)
            second = await probe.collect()
        finally:
            await probe.close()
    assert pmeta(second).tree[:1] == (parent,) and set(pmeta(second).tree) == {parent, child}
    assert server_of(second).kind == "vllm"  # named by its VLLM::EngineCor child
    (info,) = by_pid(second, "process.info", child)
    assert (info.label("name"), info.label("role"), info.label("kind"), info.label("ppid")) == \
        ("VLLM::EngineCor", "engine_core", "vllm", str(parent))
    assert "spawn_tree.py --child" in (info.text or "")
    # the GPU process list's user column: the process's owner, as ps shows it
    assert info.label("user") == owner
    (cpu,) = by_pid(second, "process.cpu_ratio", child)
    # the child burned >= 0.4 CPU-s between the ticks: a rate exists and is a plausible
    # number of cores; how many it got depends on who else shares this machine, so no floor
    assert cpu.status is Status.OK and 0 < value_of(cpu) <= (os.cpu_count() or 1) * 1.1, cpu
    threads = {r.label("name"): r for r in by_pid(second, "thread.cpu_ratio", child)}
    burners = [threads[f"burner-{i}"] for i in (1, 2, 3)]
    assert all(value_of(b) >= 0 for b in burners) and any(value_of(b) > 0 for b in burners), \
        burners
    # the threads' CPU adds up to the process's (same interval, read a moment apart)
    assert sum(value_of(r) for r in threads.values()) == pytest.approx(value_of(cpu), abs=0.3)
    (nthreads,) = by_pid(second, "process.threads", child)
    assert nthreads.value == 4
    (rss,) = by_pid(second, "process.rss_bytes", child)
    assert value_of(rss) > 1e6
    (state,) = by_pid(second, "process.state", child)
    assert state.text in ("running", "sleeping", "disk-sleep")  # psutil's words, as text
    ctx = {r.label("type"): r for r in by_pid(second, "process.ctx_switches_total", child)}
    assert set(ctx) == {"voluntary", "involuntary"} and all(value_of(r) >= 0 for r in ctx.values())
    assert {r.key for r in second.readings} >= HOST_KEYS | {"process.info", "thread.cpu_ratio"}
    host = {r.key: r for r in second.readings if r.key.startswith("host.")}
    assert host["host.cpu_ratio"].status is Status.OK and 0 < value_of(host["host.cpu_ratio"]) <= 1
    assert 0 < value_of(host["host.mem_used_bytes"]) < value_of(host["host.mem_total_bytes"])
    assert value_of(host["host.cpu_count"]) >= 1
    assert not second.find("server.setting")  # a python parent: nothing to claim
    assert isinstance(pmeta(second).in_container, bool)
    assert all(r.status is not Status.ERROR for r in second.readings)
    assert_well_formed(second)


def test_process_that_exits_between_ticks_is_dropped_silently():
    with spawn(sleeper=True) as t:
        probe = ProcessProbe(pid=t["parent"])
        first = probe.collect_blocking()
        assert t["sleeper"] in pmeta(first).tree
        os.kill(t["sleeper"], 9)  # nobody reaps it: it stays a zombie in the tree
        wait_gone(t["sleeper"])
        second = probe.collect_blocking()
    assert pmeta(second).tree == (t["parent"], t["child"])
    assert not [r for r in second.readings if r.label("pid") == str(t["sleeper"])]
    assert all(r.status is not Status.ERROR for r in second.readings)


def test_process_vanishing_mid_sample_is_skipped(monkeypatch):
    from infertop.probes.server import process as process_mod
    with spawn() as t:
        child = t["child"]
        real = process_mod.read_member   # the per-tick read of a member (/proc directly)

        def vanish(pid, proc="/proc"):
            if pid == child:
                raise FileNotFoundError(2, "No such file or directory")
            return real(pid, proc)

        monkeypatch.setattr(process_mod, "read_member", vanish)
        s = ProcessProbe(pid=t["parent"]).collect_blocking()
    assert pmeta(s).tree == (t["parent"],)
    assert not [r for r in s.readings if r.label("pid") == str(child)]
    assert by_pid(s, "process.info", t["parent"])


def test_permission_denied_marks_only_the_affected_readings(monkeypatch):
    with spawn() as t:
        child = t["child"]
        # a member's per-tick counters and its threads are read from /proc directly
        # (proctree.read_member, read_thread_times): deny its status file and threads there
        from infertop.probes.server import process as process_mod
        from infertop.probes.server import proctree
        real_file = proctree.read_proc_file

        def deny_status(path, size=4096):
            if path == f"/proc/{child}/status":
                raise PermissionError(13, "Permission denied")
            return real_file(path, size)
        monkeypatch.setattr(proctree, "read_proc_file", deny_status)
        real_threads = process_mod.read_thread_times

        def deny_threads(pid, proc="/proc"):
            if pid == child:
                raise PermissionError(13, "Permission denied")
            return real_threads(pid, proc)
        monkeypatch.setattr(process_mod, "read_thread_times", deny_threads)
        probe = ProcessProbe(pid=t["parent"])
        probe.collect_blocking()
        s = probe.collect_blocking()
    why = f"permission denied reading {child} (run as the server's user or root)"
    ctx = by_pid(s, "process.ctx_switches_total", child)
    assert len(ctx) == 2 and all(r.status is Status.ERROR and r.reason == why for r in ctx)
    (thr,) = by_pid(s, "thread.cpu_ratio", child)
    assert thr.status is Status.ERROR and thr.reason == why and thr.value is None
    for key in ("process.info", "process.rss_bytes", "process.threads", "process.cpu_ratio"):
        (r,) = by_pid(s, key, child)
        assert r.status is Status.OK, r
    parent_rows = [r for r in s.readings if r.label("pid") == str(t["parent"])]
    assert parent_rows and all(r.status is Status.OK for r in parent_rows)


def test_pid_that_exits_is_reported_and_not_followed():
    with spawn() as t:
        probe = ProcessProbe(pid=t["parent"])
        assert server_of(probe.collect_blocking()).pid == t["parent"]
    gone = probe.collect_blocking()
    assert pmeta(gone).server is None and pmeta(gone).tree == ()
    assert pmeta(gone).reason == f"server pid {t['parent']} exited"
    assert pmeta(gone).looked_for == looked_for()
    assert {r.key for r in gone.readings} == HOST_KEYS
    assert pmeta(probe.collect_blocking()).reason == f"server pid {t['parent']} exited"


def test_pid_that_never_existed():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    s = ProcessProbe(pid=p.pid).collect_blocking()
    assert pmeta(s).server is None and pmeta(s).reason == f"no process with pid {p.pid} (--pid)"
    assert s.status is Status.OK and {r.key for r in s.readings} == HOST_KEYS


def test_rediscovers_on_its_cadence_and_drops_a_dead_server():
    now = [0.0]
    calls = []
    with spawn() as t:
        found = ServerProcess(t["parent"], "vllm", "python", [], None, "found by name")

        def fake_locate(pid, url):
            calls.append(now[0])
            return (found, "") if now[0] >= 6 else (None, "no server process found (test)")

        probe = ProcessProbe(rediscover_every=5.0, locate=fake_locate, clock=lambda: now[0])
        s = probe.collect_blocking()
        assert pmeta(s).server is None and pmeta(s).reason == "no server process found (test)"
        now[0] = 1.0
        assert pmeta(probe.collect_blocking()).server is None
        assert calls == [0.0]  # not looked for again before rediscover_every
        now[0] = 6.0
        s = probe.collect_blocking()
        assert server_of(s).pid == t["parent"] and calls == [0.0, 6.0]
        assert set(pmeta(s).tree) == {t["parent"], t["child"]}
    now[0] = 7.0
    s = probe.collect_blocking()
    assert pmeta(s).server is None and pmeta(s).reason == f"server pid {t['parent']} exited"
    assert calls == [0.0, 6.0]


async def test_no_psutil_is_a_capability_not_a_traceback(monkeypatch):
    monkeypatch.setitem(sys.modules, "psutil", None)
    probe = ProcessProbe(pid=1)
    cap = await probe.open()
    assert not cap.available and "psutil is not installed" in cap.reason
    s = await probe.collect()
    assert s.status is Status.ERROR and "psutil" in s.reason
    await probe.close()


# ---- NVML pid matching (pure) -----------------------------------------------------------

@pytest.mark.parametrize("tree,gpu_procs,aliases,visible,matched,unmatched", [
    # same namespace: NVML's pids are ours
    ({10, 11, 12}, [(0, 11, 1e9), (1, 12, 1e9), (0, 12, 5e8)], None, None,
     {11: [0], 12: [0, 1]}, []),
    # inside a container: NVML says host pid 9011, NSpid says that is our 11
    ({10, 11}, [(0, 9011, 1e9), (1, 9011, 1e9)], {9011: 11}, None, {11: [0, 1]}, []),
    # GPU processes from outside this namespace
    ({10, 11}, [(0, 4242, 1e9), (0, 11, 1e9)], None, {10, 11, 500}, {11: [0]}, [4242]),
    # another visible process on the GPU is not "outside the namespace"
    ({10}, [(0, 500, 1e9), (0, 4242, 1e9)], None, {10, 500}, {}, [4242]),
    # without `visible`, anything that is not ours counts as unmatched
    ({10}, [(0, 500, 1e9)], [(9010, 10)], None, {}, [500]),
    ({10}, [], None, None, {}, []),
])
def test_map_gpu_pids(tree, gpu_procs, aliases, visible, matched, unmatched):
    assert map_gpu_pids(tree, gpu_procs, aliases, visible=visible) == (matched, unmatched)


# ---- /proc readers -------------------------------------------------------------------------

def test_read_nspids_and_aliases(tmp_path):
    own = read_nspids(os.getpid())
    assert own is not None and own[0] == os.getpid()
    for pid, line in ((100, "NSpid:\t100\t7"), (101, "NSpid:\t101"), (102, None)):
        d = tmp_path / str(pid)
        d.mkdir()
        body = "Name:\tpython\n" + (line + "\n" if line else "") + "Threads:\t1\n"
        (d / "status").write_text(body)
    assert read_nspids(100, str(tmp_path)) == [100, 7]
    assert read_nspids(102, str(tmp_path)) is None
    assert read_nspids(999, str(tmp_path)) is None
    assert ns_pid_aliases([100, 101, 102, 999], str(tmp_path)) == {7: 100}


def test_read_comm_of_a_vanished_thread_is_none():
    assert read_comm(os.getpid(), os.getpid()) == open("/proc/self/comm").read().strip()
    assert read_comm(os.getpid(), 2**22 + 7) is None


def test_detect_container(tmp_path):
    proc, root = tmp_path / "proc", tmp_path / "root"
    (proc / "1").mkdir(parents=True)
    root.mkdir()
    (proc / "1" / "cgroup").write_text("0::/init.scope\n")
    assert detect_container(str(proc), str(root), environ={}) == (False, "")
    assert detect_container(str(proc), str(root), environ={"container": "podman"})[0]
    (proc / "1" / "cgroup").write_text("12:memory:/kubepods/burstable/pod1/abc\n")
    assert detect_container(str(proc), str(root), environ={}) == \
        (True, "init's cgroup mentions kubepods")
    (root / ".dockerenv").write_text("")
    assert detect_container(str(proc), str(root), environ={}) == (True, "/.dockerenv exists")


def test_gpu_holders_names_tree_processes_across_namespaces():
    from infertop.pidmap import gpu_holders
    # the tree sees itself as 7/8 (container); NVML reports host pids 4107/4108 and 999
    held, outside = gpu_holders([7, 8], [(0, 4107, 1.0), (1, 4108, 1.0), (1, 999, 1.0)],
                                [(4107, 7), (4108, 8)], {7: "api_server", 8: "worker"})
    assert held == {4107: "api_server", 4108: "worker"}
    assert outside == [999]


def test_a_member_that_execs_another_program_is_described_anew_by_the_next_refresh():
    """What a member is (command line, name, role) is read once per member refresh
    (rediscover_every), not every tick: a process that execs another program (same pid,
    same start time, as vLLM's workers rename themselves) shows its new command line after
    the next refresh, while its CPU and memory stay per tick."""
    proc = subprocess.Popen(["sh", "-c", "read x; exec sleep 60"], stdin=subprocess.PIPE)
    try:
        now = [1000.0]
        probe = ProcessProbe(pid=proc.pid, rediscover_every=5.0, clock=lambda: now[0])
        first = probe.collect_blocking()
        assert "read x" in (by_pid(first, "process.info", proc.pid)[0].text or "")
        assert proc.stdin is not None   # piped above
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        end = time.monotonic() + 30
        while psutil.Process(proc.pid).cmdline()[:1] != ["sleep"]:
            assert time.monotonic() < end, "sh never exec'd sleep"
            time.sleep(0.02)
        now[0] += 1.0
        within = probe.collect_blocking()      # inside the refresh interval
        assert value_of(by_pid(within, "process.rss_bytes", proc.pid)[0]) > 0
        now[0] += 5.0
        later = probe.collect_blocking()
        assert by_pid(later, "process.info", proc.pid)[0].text == "sleep 60"
        assert by_pid(later, "process.info", proc.pid)[0].label("name") == "sleep"
    finally:
        proc.kill()
        proc.wait()
