"""Captures bundled for the demo: what `p`, `P`, `G` and `n` show on a scenario, from
bundled captures (real py-spy dumps; an nsys stats example), labelled as bundled.

A demo has no process to attach py-spy to, so a presenter's `p` shows a py-spy dump
taken from a real vLLM 0.32 server (bundled/vllm-0.32-pyspy-dump.txt, py-spy 0.4.3's own
text), labelled as that bundled capture, never as a capture of the simulated server.  (In
the TUI, not infertop/demo: the core does not import the probes' capture types.)
"""

from __future__ import annotations

import collections
import functools
import re
from pathlib import Path

from rich.text import Text

from infertop.probes.capture.gil_sampler import GilAggregate, GilSample, GilSampler
from infertop.probes.capture.nsys import NsysResult, parse_stats_csv, summarize_stats
from infertop.probes.capture.pyspy_dump import (
    DumpResult,
    ProcessDump,
    StackFrame,
    ThreadDump,
)
from infertop.probes.capture.pyspy_record import RecordResult, ThreadProfile, summarize

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


# -- P and G: a sample set of real dumps (bundled/vllm-0.32-pyspy-samples.txt) ------------
PYSPY_SAMPLES = "vllm-0.32-pyspy-samples.txt"
SAMPLE_RATE = 100            # the samples stand for py-spy record's default rate (1 s per 100)
_SET = re.compile(r"^## set (\S+)\s*$")
_SAMPLE = re.compile(r"^## sample (\d+)\s*$")


def parse_sample_sets(text: str) -> dict[str, list[tuple[int, list[ProcessDump]]]]:
    """'## set NAME' / '## sample N' headers, each sample a py-spy dump counted N times."""
    sets: dict[str, list[tuple[int, list[str]]]] = {}
    current: list[tuple[int, list[str]]] | None = None
    for line in text.splitlines():
        m = _SET.match(line)
        if m:
            current = sets.setdefault(m.group(1), [])
            continue
        m = _SAMPLE.match(line)
        if m and current is not None:
            current.append((int(m.group(1)), []))
            continue
        if current:
            current[-1][1].append(line)
    return {name: [(n, parse_dump_text("\n".join(lines))) for n, lines in samples]
            for name, samples in sets.items()}


@functools.lru_cache(maxsize=1)
def _sample_sets() -> dict[str, list[tuple[int, list[ProcessDump]]]]:
    """The bundled file, read and parsed once (P, G and the labels all ask for it)."""
    text = (Path(__file__).parent / "bundled" / PYSPY_SAMPLES).read_text(encoding="utf-8")
    return parse_sample_sets(text)


def staged(scenario: str) -> bool:
    """True when the scenario has its own set: real stacks in the mix the scenario
    describes (its GIL share is the scenario's, not a measurement), which the labels say."""
    return scenario != "busy" and scenario in _sample_sets()


def sample_set(scenario: str) -> list[tuple[int, list[ProcessDump]]]:
    """The scenario's own set where the file has one, else the busy vLLM's."""
    sets = _sample_sets()
    return sets.get(scenario) or sets["busy"]


def bundled_record(scenario: str) -> RecordResult:
    """What `P` would produce from these samples: the live path's own counting (py-spy's
    on-CPU stacks per thread, GIL-holding samples) and its own ``summarize``."""
    samples = sample_set(scenario)
    total = sum(n for n, _ in samples)
    frames: dict[StackFrame, int] = {}
    threads: dict[tuple[int, str], ThreadProfile] = {}
    stacks: dict[tuple[int, str], collections.Counter] = {}
    pids: dict[int, str] = {}
    for n, procs in samples:
        for p in procs:
            pids[p.pid] = p.role
            for t in p.threads:
                key = (p.pid, t.tid_text)
                tp = threads.setdefault(key, ThreadProfile(p.pid, p.role, t.tid_text, t.name or ""))
                if t.owns_gil:
                    tp.gil += n
                if t.active:
                    tp.active += n
                    # dump frames are leaf first; record's stacks are root first
                    stack = tuple(frames.setdefault(f, len(frames)) for f in reversed(t.frames))
                    stacks.setdefault(key, collections.Counter())[stack] += n
    result = RecordResult(sorted(pids.items()), total / SAMPLE_RATE, total / SAMPLE_RATE,
                          SAMPLE_RATE, threads=list(threads.values()),
                          intervals={pid: total for pid in pids}, frames=list(frames),
                          stacks=stacks)
    result.summary = summarize(result)
    result.notes.append(f"DEMO: bundled sample set ({PYSPY_SAMPLES}): real py-spy dumps of a "
                        "vLLM 0.32 server, not a recording of this simulated one; nothing saved")
    if staged(scenario):
        result.notes.append(f"DEMO: the stacks are real; their mix (who holds the GIL, how "
                            f"often) is set to what {scenario} describes, not measured")
    return result


def bundled_gil(scenario: str) -> tuple[int, str, GilAggregate]:
    """What `G`'s sampler would aggregate from these samples: (pid, role, aggregate) of the
    process it samples (the engine core, else the API server, as the live `G` picks)."""
    samples = sample_set(scenario)
    procs = {p.pid: p.role for _, ps in samples for p in ps}
    pid = next((q for q, role in procs.items() if role == "engine_core"), next(iter(procs)))
    sampler = GilSampler(window=sum(n for n, _ in samples))
    for n, ps in samples:
        for p in ps:
            if p.pid != pid:
                continue
            holder = next((t.label for t in p.threads if t.owns_gil), None)
            active = {t.label: t.active or t.owns_gil for t in p.threads}
            for _ in range(n):
                sampler.history.setdefault(pid, collections.deque()).append(
                    GilSample(0.0, pid, holder, active))
    return pid, procs[pid], sampler.aggregate(pid)


def gil_text(pid: int, role: str, agg: GilAggregate, style: str = "",
             staged: bool = False) -> Text:
    """The scheduling pane's GIL line (as `G` shows it live), labelled bundled."""
    held = "n/a" if agg.gil_held_share is None else f"{agg.gil_held_share * 100:.0f}%"
    t = Text(f"GIL held {held}", style=style, no_wrap=True)
    if agg.holder_share:
        t.append(f" by {next(iter(agg.holder_share))}")
    t.append(f" (pid {pid} {role})")
    # the label leads its line: a narrow pane cuts the end, never the word "bundled"
    # short (the pane cuts a longer line to "bundled…"); a staged set says it is staged
    what = ("the scenario's GIL mix on real stacks" if staged
            else f"{agg.samples} real vLLM 0.32 dumps, not this server")
    t.append(f"\n  bundled: {what}", style="dim")
    return t


# -- n: an nsys stats example (bundled/nsys-example_*.csv) ----------------------------------
NSYS_BASE = "nsys-example"


def bundled_nsys() -> NsysResult:
    """The `nsys stats` tables the live `n` reads, from a bundled example (the layout of
    `nsys stats --format csv -o BASE`); there is no real nsys capture on this project's box."""
    folder = Path(__file__).parent / "bundled"

    def table(report: str) -> list[dict]:
        return parse_stats_csv((folder / f"{NSYS_BASE}_{report}.csv").read_text(encoding="utf-8"))
    summary = summarize_stats(table("cuda_gpu_kern_sum"), table("cuda_api_sum"),
                              table("cuda_gpu_mem_time_sum"))
    return NsysResult("bundled example", summary=summary, notes=[
        "DEMO: bundled example, not from this machine (nsys stats tables in tui/bundled/)"])
