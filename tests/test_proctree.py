"""The process probe's tree membership (probes/server/proctree.py) and its lean /proc reads.

Fake /proc folders for the table's rules (a listing only when a task was created, only new
pids read, orphans re-read, a full re-read past REUSE_SAFE), the real host for agreement
with psutil, and a real child for the documented delay: a new member shows the tick after
it started, an exited one the tick it is gone.
"""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from infertop.meta import ProcessMeta
from infertop.model import Sample, Status
from infertop.probes.server.process import ProcessProbe
from infertop.probes.server.proctree import (
    FULL_EVERY,
    REUSE_SAFE,
    ProcTree,
    read_cpu_and_tasks,
    read_meminfo,
    read_stat_start,
)


def tree_of(s: Sample) -> tuple[int, ...]:
    """The process tree the probe's sample carries."""
    assert isinstance(s.meta, ProcessMeta), s.meta
    return s.meta.tree


def put(proc, pid: int, ppid: int, start: int, name: str = "python") -> None:
    d = proc / str(pid)
    d.mkdir(exist_ok=True)
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
    # utime stime cutime cstime priority nice num_threads itrealvalue starttime ...
    rest = ["S", str(ppid)] + ["0"] * 17 + [str(start), "0", "0"]
    (d / "stat").write_text(f"{pid} ({name}) " + " ".join(rest) + "\n")


def rm(proc, pid: int) -> None:
    (proc / str(pid) / "stat").unlink()
    (proc / str(pid)).rmdir()


@pytest.fixture
def proc(tmp_path):
    put(tmp_path, 1, 0, 1, "systemd")
    put(tmp_path, 100, 1, 500, "vllm serve")     # the root
    put(tmp_path, 101, 100, 510, "VLLM::EngineCor")
    put(tmp_path, 102, 101, 520, "worker) x")    # a comm with ')' and a space
    put(tmp_path, 200, 1, 600, "bash")
    return tmp_path


def test_stat_start_reads_ppid_and_start_past_an_odd_comm(proc):
    assert read_stat_start(102, str(proc)) == (101, 520)
    assert read_stat_start(999, str(proc)) is None


def test_descendants_and_no_listing_while_no_task_was_created(proc, monkeypatch):
    t = ProcTree(str(proc))
    assert t.update(tasks=5000, now=0.0)
    assert t.descendants(100) == [101, 102]
    reads = []
    real = read_stat_start

    def counting(pid, p="/proc"):
        reads.append(pid)
        return real(pid, p)
    monkeypatch.setattr("infertop.probes.server.proctree.read_stat_start", counting)
    put(proc, 103, 100, 530)   # (a fake cannot move the counter: it stays 5000)
    assert t.update(tasks=5000, now=1.0)
    assert t.listings == 1 and reads == []          # nothing created: nothing read
    assert t.descendants(100) == [101, 102]
    assert t.update(tasks=5001, now=2.0)            # a task was created: list, read it only
    assert t.listings == 2 and reads == [103]
    assert t.descendants(100) == [101, 103, 102]    # psutil's order (a stack, by pid)


def test_an_exited_parent_s_children_are_read_again(proc):
    t = ProcTree(str(proc))
    t.update(tasks=10, now=0.0)
    rm(proc, 101)                  # the engine exits: its worker is re-parented to init
    put(proc, 102, 1, 520)
    t.update(tasks=11, now=1.0)
    assert t.descendants(100) == []
    assert t.full_reads == 1       # only the orphan was read again, no full re-read


def test_a_reused_pid_older_than_the_root_is_not_a_child(proc):
    put(proc, 150, 100, 400)       # "child" started before its parent: a reused pid
    t = ProcTree(str(proc))
    t.update(tasks=10, now=0.0)
    assert t.descendants(100) == [101, 102]


def test_full_re_read_past_reuse_safe_and_on_the_guard_cadence(proc):
    t = ProcTree(str(proc))
    t.update(tasks=10, now=0.0)
    put(proc, 101, 100, 999)       # same pid, another process (start time moved)
    t.update(tasks=11, now=1.0)
    assert t.start_of(101) == 510  # incremental: a pid seen both times is not re-read
    t.update(tasks=11 + REUSE_SAFE, now=2.0)
    assert t.start_of(101) == 999 and t.full_reads == 2
    put(proc, 101, 100, 1234)
    t.update(tasks=11 + REUSE_SAFE, now=2.0 + FULL_EVERY)   # no task counted, but the guard
    assert t.start_of(101) == 1234 and t.full_reads == 3


def test_lean_host_reads_agree_with_psutil():
    got = read_cpu_and_tasks()
    assert got is not None
    fields, tasks = got
    assert len(fields) >= 4 and tasks is not None and tasks > 0
    ct = psutil.cpu_times()
    hz = os.sysconf("SC_CLK_TCK")
    assert fields[3] / hz == pytest.approx(ct.idle, abs=5.0)   # read a moment apart
    mem = read_meminfo()
    assert mem is not None
    total, available = mem
    vm = psutil.virtual_memory()
    assert total == vm.total
    assert available == pytest.approx(vm.available, rel=0.2)


def test_lean_reads_of_odd_files(tmp_path):
    (tmp_path / "stat").write_text("cpu  10 0 5 100 3 0 0 0 7 1\ncpu0 1 2 3 4\n"
                                   "intr 1 2 3\nctxt 9\nbtime 1\nprocesses 4242\n")
    assert read_cpu_and_tasks(str(tmp_path)) == ([10, 0, 5, 100, 3, 0, 0, 0, 7, 1], 4242)
    (tmp_path / "stat").write_text("garbage\n")
    assert read_cpu_and_tasks(str(tmp_path)) is None
    (tmp_path / "meminfo").write_text("MemTotal:       1000 kB\nMemFree:  10 kB\n")
    assert read_meminfo(str(tmp_path)) is None        # no MemAvailable: psutil estimates
    (tmp_path / "meminfo").write_text("MemTotal: 1000 kB\nMemAvailable: 250 kB\n")
    assert read_meminfo(str(tmp_path)) == (1024000, 256000)
    assert read_meminfo(str(tmp_path / "none")) is None


def test_host_cpu_ratio_counts_guest_time_once(tmp_path, monkeypatch):
    stats = iter(["cpu  100 0 0 100 0 0 0 0 50 0\nprocesses 1\n",
                  "cpu  200 0 0 200 0 0 0 0 100 0\nprocesses 1\n"])

    def fake(proc="/proc"):
        (tmp_path / "stat").write_text(next(stats))
        return read_cpu_and_tasks(str(tmp_path))
    monkeypatch.setattr("infertop.probes.server.process.read_cpu_and_tasks", fake)
    probe = ProcessProbe(pid=os.getpid())
    probe.collect_blocking()
    s = probe.collect_blocking()
    (r,) = s.find("host.cpu_ratio")
    # +100 user (its +50 guest is already inside it) and +100 idle: busy 100 of 200
    # (counting guest twice would read 150/250)
    assert r.value == pytest.approx(0.5)


def test_a_new_child_shows_the_next_tick_and_an_exited_one_at_once():
    now = [1000.0]
    probe = ProcessProbe(pid=os.getpid(), rediscover_every=5.0, clock=lambda: now[0])
    first = probe.collect_blocking()
    assert tree_of(first)[:1] == (os.getpid(),)
    kid = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys; p = subprocess.Popen(['sleep', '60']);"
         " print(p.pid, flush=True); sys.stdin.read(); p.kill(); p.wait()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert kid.stdin is not None and kid.stdout is not None
    try:
        grandchild = int(kid.stdout.readline())
        now[0] += 1.0    # well inside rediscover_every: no timed re-listing would see it
        s = probe.collect_blocking()
        assert kid.pid in tree_of(s) and grandchild in tree_of(s)
        assert {r.label("pid") for r in s.find("process.info")} >= {str(kid.pid),
                                                                    str(grandchild)}
        assert set(tree_of(s)) == {os.getpid()} | {
            p.pid for p in psutil.Process().children(recursive=True)}
    finally:
        kid.stdin.close()
        kid.wait(30)
    now[0] += 1.0
    s = probe.collect_blocking()
    assert kid.pid not in tree_of(s) and grandchild not in tree_of(s)


@pytest.mark.parametrize("length", [0, 100, 4096, 8192, 10000])
def test_read_proc_file_reads_all_of_a_file_of_any_length(tmp_path, length):
    from infertop.probes.server.proctree import read_proc_file
    data = bytes(i % 251 for i in range(length))
    (tmp_path / "f").write_bytes(data)
    assert read_proc_file(str(tmp_path / "f"), 4096) == data
    with pytest.raises(OSError):
        read_proc_file(str(tmp_path / "missing"))


def test_thread_times_agree_with_psutil():
    from infertop.probes.server.proctree import read_thread_times
    mine = sorted(read_thread_times(os.getpid()))
    theirs = sorted(psutil.Process().threads(), key=lambda t: t.id)
    assert [tid for tid, _ in mine] == [t.id for t in theirs]   # the same threads
    for (_, secs), t in zip(mine, theirs):
        assert secs == pytest.approx(t.user_time + t.system_time, abs=0.5)   # a moment apart
    with pytest.raises(FileNotFoundError):
        read_thread_times(2 ** 22 + 7)    # above any pid_max: no such process


def test_member_reads_agree_with_psutil():
    from infertop.probes.server.proctree import read_member
    m = read_member(os.getpid())
    p = psutil.Process()
    with p.oneshot():
        assert m["status"] == p.status() and m["threads"] == p.num_threads()
        assert m["cpu"] == pytest.approx(sum(p.cpu_times()[:2]), abs=0.5)
        assert m["rss"] == pytest.approx(p.memory_info().rss, rel=0.2)
        ctx = p.num_ctx_switches()
    read = m["ctx"]
    assert isinstance(read, tuple)
    assert read[0] <= ctx.voluntary and read[1] <= ctx.involuntary
    assert m["denied"] == []
    with pytest.raises(FileNotFoundError):
        read_member(2 ** 22 + 7)


def test_without_a_proc_to_list_the_probe_reads_through_psutil():
    """Where /proc cannot be listed (not Linux) the tree comes from psutil's children()
    and each member's counters from psutil: same readings."""
    kid = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                           stdin=subprocess.PIPE)
    assert kid.stdin is not None
    try:
        probe = ProcessProbe(pid=os.getpid())
        probe._ptree = None
        probe.collect_blocking()
        s = probe.collect_blocking()
        assert kid.pid in tree_of(s)
        for key in ("process.cpu_ratio", "process.rss_bytes", "process.threads",
                    "process.ctx_switches_total", "process.state", "thread.cpu_ratio"):
            rows = [r for r in s.find(key) if r.label("pid") == str(os.getpid())]
            assert rows and all(r.status is Status.OK for r in rows), key
    finally:
        kid.stdin.close()
        kid.wait(30)
