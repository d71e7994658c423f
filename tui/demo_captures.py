"""Captures bundled for the demo: what `p` shows on a scenario, from a real capture.

A demo has no process to attach py-spy to, so a presenter's `p` shows a py-spy dump
taken from a real vLLM 0.32 server (bundled/vllm-0.32-pyspy-dump.txt, py-spy 0.4.3's own
text), labelled as that bundled capture, never as a capture of the simulated server.  (In
the TUI, not infertop/demo: the core does not import the probes' capture types.)
"""

from __future__ import annotations

import re
from pathlib import Path

from infertop.probes.capture.pyspy_dump import DumpResult, ProcessDump, StackFrame, ThreadDump

PYSPY_DUMP = "vllm-0.32-pyspy-dump.txt"

_PROCESS = re.compile(r"^Process (\d+): (.*)$")
_THREAD = re.compile(r'^Thread (\d+|0x[0-9A-Fa-f]+) \(([a-z+]+)\): "(.*)"$')
_FRAME = re.compile(r"^\s+(.*) \((.*):(\d+)\)$")


def role_of(command: str) -> str:
    """vLLM's process titles and entry points -> infertop's roles."""
    if "EngineCore" in command:
        return "engine_core"
    if "VLLM::Worker" in command:
        return "worker"
    if "resource_tracker" in command:
        return "helper"
    if "api_server" in command or "vllm serve" in command:
        return "api_server"
    return "server"


def parse_dump_text(text: str) -> list[ProcessDump]:
    """py-spy's text layout ("Process N: cmd", 'Thread T (state): "name"', indented frames)
    -> ProcessDumps; '#' comment lines and the "Python v3..." lines are skipped."""
    procs: list[ProcessDump] = []
    thread: ThreadDump | None = None
    for line in text.splitlines():
        if not line.strip() or line.startswith(("#", "Python v")):
            continue
        m = _PROCESS.match(line)
        if m:
            cmd = m.group(2).strip()
            procs.append(ProcessDump(int(m.group(1)), role_of(cmd), cmd))
            thread = None
            continue
        m = _THREAD.match(line)
        if m and procs:
            tid_s, state, name = m.groups()
            tid = int(tid_s, 16) if tid_s.startswith("0x") else int(tid_s)
            thread = ThreadDump(procs[-1].pid, tid, None if tid_s.startswith("0x") else tid,
                                name or None, state.startswith("active"), "gil" in state, [])
            procs[-1].threads.append(thread)
            continue
        m = _FRAME.match(line)
        if m and thread is not None:
            thread.frames.append(StackFrame(m.group(1), m.group(2), int(m.group(3))))
    return procs


def bundled_dump(now: float) -> DumpResult:
    text = (Path(__file__).parent / "bundled" / PYSPY_DUMP).read_text(encoding="utf-8")
    return DumpResult(parse_dump_text(text), time=now, duration=0.0)
