"""The host's top CPU consumers (probes/server/host_top.py), read for SCH-004 only while
the host is near saturation, against a fake /proc and the real one."""

from __future__ import annotations

import os
from pathlib import Path

from infertop.probes.server.host_top import HostTopCpu, parse_stat


def _stat(pid: int, comm: str, ppid: int, ticks: int, start: int = 1000) -> str:
    # fields after the comm: state ppid pgrp session tty tpgid flags minflt cminflt majflt
    # cmajflt utime stime cutime cstime priority nice threads itrealvalue starttime
    rest = ["R", ppid, 1, 1, 0, -1, 0, 0, 0, 0, 0, ticks, 0, 0, 0, 20, 0, 1, 0, start]
    return f"{pid} ({comm}) " + " ".join(str(x) for x in rest) + "\n"


def _proc(root: Path, procs: dict[int, tuple[str, int, int]]) -> None:
    for pid, (comm, ppid, ticks) in procs.items():
        d = root / str(pid)
        d.mkdir(exist_ok=True)
        (d / "stat").write_text(_stat(pid, comm, ppid, ticks))


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_top_consumers_with_the_servers_tree_marked(tmp_path):
    clock = Clock()
    top = HostTopCpu(proc=str(tmp_path), clock=clock, every=5.0, at=0.8)
    top._hz = 100.0
    tree = {100}
    _proc(tmp_path, {1: ("init", 0, 0), 100: ("python", 1, 0), 101: ("VLLM::Worker", 100, 0),
                     900: ("hog.py", 1, 0), 901: ("weird) name", 1, 0)})
    assert top.scan(0.95, tree) is None               # the first scan is the baseline
    clock.t = 5.0
    _proc(tmp_path, {1: ("init", 0, 1), 100: ("python", 1, 20), 101: ("VLLM::Worker", 100, 250),
                     900: ("hog.py", 1, 495), 901: ("weird) name", 1, 300)})
    got = top.scan(0.95, tree)
    assert got is not None
    assert [(p, n, round(c, 2), mine) for p, n, c, mine in got] == [
        (900, "hog.py", 0.99, False), (901, "weird) name", 0.6, False),
        (101, "VLLM::Worker", 0.5, True),               # a descendant of the tree's root
        (100, "python", 0.04, True), (1, "init", 0.0, False)][:len(got)]


def test_no_scan_below_the_near_saturation_mark_nor_more_often_than_every(tmp_path):
    clock = Clock()
    top = HostTopCpu(proc=str(tmp_path), clock=clock, every=5.0, at=0.8)
    calls = []
    top._read_all = lambda: (calls.append(clock.t), ({}, {}, {}))[1]   # type: ignore
    for t in range(10):
        clock.t = float(t)
        top.scan(0.5, set())
    assert calls == []                                # a calm host costs nothing
    for t in range(10, 20):
        clock.t = float(t)
        top.scan(0.9, set())
    assert calls == [10.0, 15.0]


def test_parse_stat_of_the_real_proc():
    got = parse_stat(Path(f"/proc/{os.getpid()}/stat").read_text())
    assert got is not None
    comm, ppid, ticks, start = got
    assert ppid == os.getppid() and ticks >= 0 and start > 0 and comm


def test_the_scan_mark_comes_from_the_config(tmp_path):
    # it was a constant (0.8): a user who lowers SCH-004's threshold, or the scan's own,
    # in --config got no top consumers below 80 %
    import argparse

    from infertop.cli.sources import make_live_source
    cfg = tmp_path / "c.toml"
    cfg.write_text("[thresholds]\nhost_top_scan_at = 0.5\n")

    def scan_at(*extra: str) -> float:
        args = argparse.Namespace(url=[], pid=None, no_gpu=True, interval=1.0,
                                  kv_events=None, config=str(cfg) if extra else None)
        hub = make_live_source(args)
        probe = next(p for p in hub.probes if p.name == "process")
        return probe._top.at

    assert scan_at() == 0.8                     # the default
    assert scan_at("--config") == 0.5
    # never above SCH-004's own threshold: the readings must be there when it raises
    cfg.write_text("[thresholds]\nhost_cpu_saturated = 0.6\n")
    assert scan_at("--config") == 0.6


def test_the_config_is_parsed_once_per_run(monkeypatch, capsys):
    # the live source (its scan mark) and the pipeline (the rules) both need the config:
    # it was read and parsed twice at start-up; now once and passed to both
    import socket

    import infertop.config
    from infertop.cli.main import main
    calls = []
    real = infertop.config.load_config

    def counting(path=None):
        calls.append(path)
        return real(path)

    monkeypatch.setattr(infertop.config, "load_config", counting)
    with socket.socket() as s:   # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    main(["snapshot", "--no-gpu", "--url", f"http://127.0.0.1:{port}", "--window", "1",
          "--interval", "0.5"])
    assert len(calls) == 1
