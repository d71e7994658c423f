"""The per-GPU process list's user and command for processes outside the server's tree
(issue 11, item 2): the NVML probe reads who runs each pid NVML lists, with the command
line cleaned and its secrets redacted, and guesses nothing from inside a container."""

from __future__ import annotations

import subprocess
import sys

import psutil

from helpers.fake_pynvml import FakeGPU, FakeNVML, GiB, ManualClock
from helpers.panes import pane_text
from infertop.pipeline import Pipeline
from infertop.probes.nvml.owners import GpuProcessOwners
from infertop.probes.nvml.probe import NvmlProbe
from infertop.tui.zoom_table import TableView


def sleeper(*args: str) -> subprocess.Popen:
    """A process whose command line carries a secret and a terminal escape."""
    return subprocess.Popen([sys.executable, "-c", "import sys, time; time.sleep(600)",
                             *args], stdin=subprocess.DEVNULL)


async def test_nvml_probe_names_the_owner_of_a_gpu_process_outside_the_tree():
    p = sleeper("--api-key", "sk-live-SECRET123", "\x1b]0;pwned\x07")
    try:
        fake = FakeNVML([FakeGPU(processes=[(p.pid, 3 * GiB), (2**22 + 17, GiB)],
                                 process_sm={p.pid: 40})], clock=ManualClock())
        probe = NvmlProbe(nvml_module=fake.module, clock=fake.clock)
        assert (await probe.open()).available
        if not probe._owners.host_ns:           # run in a container: its pids are its own
            probe._owners.host_ns = True         # (and so are the fake NVML's)
        snap_sample = await probe.collect()
        owner = psutil.Process(p.pid).username()
    finally:
        p.kill()
        p.wait()
        await probe.close()
    owners = {r.label("pid"): r for r in snap_sample.readings if r.key == "process.gpu_owner"}
    assert set(owners) == {str(p.pid)}          # the pid that does not exist: nothing made up
    r = owners[str(p.pid)]
    assert r.label("user") == owner and r.label("name").startswith("python")
    assert r.text is not None
    assert "SECRET123" not in r.text and "<redacted>" in r.text and "\x1b" not in r.text
    # the zoomed memory pane lists it with that user and command
    from infertop.model import Snapshot
    frame = Pipeline().feed(Snapshot(1.0, {"nvml": snap_sample}, 1, {}))
    text = pane_text("memory", frame, width=200, height=20, view=TableView())
    row = next(ln for ln in text.splitlines() if ln.split()[1:2] == [str(p.pid)])
    assert owner in row.split() and "(not the server)" in row and "<redacted>" in row
    assert "40 %" in row and "SECRET" not in text and "\x1b" not in text


def test_inside_a_nested_pid_namespace_owners_are_not_guessed(tmp_path):
    (tmp_path / "self" / "ns").mkdir(parents=True)
    (tmp_path / "self" / "ns" / "pid").symlink_to("pid:[4026532711]")   # a container's own
    owners = GpuProcessOwners(proc=str(tmp_path))
    assert not owners.host_ns and "nested PID namespace" in owners.why_not
    assert owners.readings([psutil.Process().pid]) == []
    (tmp_path / "self" / "ns" / "pid").unlink()
    (tmp_path / "self" / "ns" / "pid").symlink_to("pid:[4026531836]")   # the host's
    assert GpuProcessOwners(proc=str(tmp_path)).host_ns
