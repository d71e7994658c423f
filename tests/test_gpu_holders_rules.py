"""The rules and the screen agree on which GPUs a server holds, inside a container too:
NVML reports host pids, the process tree its own (PID-namespace) pids, and the process
probe's ``pid_aliases`` pair them (rules' Context.gpus_by_root, the panes' gpu_holders)."""

from __future__ import annotations

from dataclasses import replace

from helpers.rulekit import tick
from infertop.config import DiagnosisConfig
from infertop.history import History
from infertop.meta import ProcessMeta
from infertop.pipeline import Frame
from infertop.rules.base import Context
from infertop.themes import roles
from infertop.tui.panes.context import PaneContext

GIB = float(1 << 30)
# the tree sees itself as 7 (API server) and 8, 9 (workers); NVML says 4107, 4108, 4109
TREE = {"pid=7,ppid=1,name=python,role=api_server,kind=vllm": "vllm serve m",
        "pid=8,ppid=7,name=VLLM::Worker,role=worker,kind=vllm": "VLLM::Worker",
        "pid=9,ppid=7,name=VLLM::Worker,role=worker,kind=vllm": "VLLM::Worker"}
GPU_MEM = {"gpu=0,pid=4108": 20 * GIB, "gpu=1,pid=4109": 20 * GIB,
           "gpu=2,pid=999": 20 * GIB}      # another container's process
ALIASES = [[4107, 7], [4108, 8], [4109, 9]]


def _snapshot(aliases):
    snap = tick(1000.0, {"process.info": TREE, "process.gpu_mem_bytes": GPU_MEM})
    proc = replace(snap.samples["process"], meta=ProcessMeta(
        tree=(7, 8, 9), pid_aliases=tuple((a, p) for a, p in aliases)))
    return replace(snap, samples={**snap.samples, "process": proc})


def _rules_view(snap):
    return Context(History(), snap, [], DiagnosisConfig(), {}, {}).gpus_by_root()


def test_rules_map_host_pids_through_the_aliases():
    assert _rules_view(_snapshot(ALIASES)) == {"7": ["0", "1"]}


def test_rules_and_screen_name_the_same_gpus():
    snap = _snapshot(ALIASES)
    held, outside = PaneContext(Frame(snap, [], History()), roles({})).gpu_holders()
    assert held == {"4108": "worker", "4109": "worker"} and outside == [999]
    gpus_on_screen = sorted(r.label("gpu") for r in snap.samples["process"].readings
                            if r.key == "process.gpu_mem_bytes" and r.label("pid") in held)
    assert _rules_view(snap)["7"] == gpus_on_screen


def test_without_aliases_host_pids_match_nothing_in_the_tree():
    assert _rules_view(_snapshot([])) == {}
