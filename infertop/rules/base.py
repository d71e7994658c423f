"""What every rule module shares: the per-tick Context, Candidates, Rule, small helpers.

A rule is a pure function ``check(ctx) -> Iterable[Candidate]``: the conditions that hold
*now*, one per subject (a GPU, a server engine, a process).  It never decides when to
raise or clear; the engine's hysteresis does, so every rule stays a plain table lookup
plus comparisons, easy to test and cheap to run each tick.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeGuard, cast

from .. import qbound
from ..config import DiagnosisConfig, Thresholds
from ..findings import Evidence, RuleSpec, Severity
from ..history import History, Series
from ..keys import SPECS
from ..keysym import Input
from ..model import (
    Kind,
    Labels,
    Reading,
    Snapshot,
    Status,
    Valued,
    has_value,
    make_labels,
)
from ..pidmap import map_gpu_pids
from ..reading_index import ReadingIndex
from ..servers import registry
from ..units import fmt_count, natural_key
from ..windowstat import median, recent_values, share
from .window import covered, window_words

# Readings probes send on a slow cadence (facts that rarely change): when the newest
# snapshot lacks them, the newest value in History (this recent) stands in.  Fast readings
# never do: a source that stopped answering must not keep a finding alive on old values.
FACT_MAX_AGE = 30.0
SLOW_KEYS = frozenset({
    "gpu.power_limit_watts", "gpu.sm_clock_max_hz", "gpu.mem_clock_max_hz",
    "gpu.ecc_uncorrected_total", "gpu.ecc_corrected_total", "gpu.mig_enabled",
    "gpu.nvlink_links_active", "process.gpu_mem_bytes", "process.gpu_sm_ratio",
    "thread.cpu_ratio", "host.cpu_count", "host.top_cpu_cores",
} | {k for k, s in SPECS.items() if s.kind is Kind.INFO})

# statuses whose readings carry a value (model.has_value)
_VALUED = (Status.OK, Status.STALE)

# Rules that compare a window's median need a shorter raise delay than the global one:
# the median itself crosses only once about half of ``judge_window`` has been past the
# threshold, so a step is raised ~judge_window/2 + 3 s after it began, and a single
# spike never moves the median at all.
JUDGED_RAISE_AFTER = 3.0

# a queue is "there" when requests wait on at least this share of the judge window's ticks
QUEUED_SHARE = 0.5

# process roles that run the model (their threads launch kernels)
ENGINE_ROLES = ("engine_core", "worker", "scheduler", "shard", "server")


@dataclass(slots=True)
class Candidate:
    """A condition that holds this tick for one subject (the engine adds the code)."""

    subject: Labels
    severity: Severity
    evidence: tuple[Evidence, ...]
    title: str | None = None
    remedy: str | None = None


@dataclass(frozen=True)
class Rule:
    spec: RuleSpec
    check: Callable[[Context], Iterable[Candidate]]

    @property
    def code(self) -> str:
        return self.spec.code

    @property
    def required(self) -> tuple[Input, ...]:
        # RuleSpec.__post_init__ made every input an Input (checked against SPECS)
        return cast("tuple[Input, ...]", self.spec.inputs)


@dataclass(frozen=True, slots=True)
class Proc:
    pid: str
    ppid: str
    name: str
    role: str
    kind: str
    cmdline: str

    @property
    def is_python(self) -> bool:
        # the kind says (infertop/servers: vLLM, SGLang, TRT-LLM, TGI's shards, "python")
        return registry.is_python(self.kind, self.role) or "python" in self.name.lower()


class Context:
    """One tick's view for the rules: current readings indexed once, History for trends."""

    def __init__(self, history: History, snapshot: Snapshot, derived: list[Reading],
                 cfg: DiagnosisConfig, series_index: dict[str, list[Series]],
                 state: dict, raised: Mapping[tuple[str, Labels], Severity] | None = None,
                 index: ReadingIndex | None = None) -> None:
        self.history = history
        self.snapshot = snapshot
        self.cfg = cfg
        self.t: Thresholds = cfg.thresholds
        self.now = snapshot.time
        self.window = cfg.diagnosis.window
        self.judge_window = cfg.diagnosis.judge_window
        self.hold_margin = cfg.diagnosis.hold_margin
        self.rule_code = ""         # set by the engine before each rule's check
        # (code, subject) -> the severity its finding is raised at now
        self._raised: Mapping[tuple[str, Labels], Severity] = raised or {}
        # (code, subject) whose condition held this check only through a relaxed
        # threshold (the engine re-judges an escalation that leaned on one: hysteresis
        # holds the level that is raised, it never lifts a subject to a higher one)
        self.relaxed_used: set[tuple[str, Labels]] = set()
        self.strict = False         # the engine's re-judgement: no threshold relaxes
        self._medians: dict[tuple[str, Labels], float | None] = {}
        self.state = state  # the Diagnoser's scratch: memoised fits, highest link seen
        self._hidx = series_index
        # the tick's readings by key: the Pipeline's, which its Frame (the panes) reads too
        if index is None:
            index = ReadingIndex(snapshot, derived)
        self._by_key = index.raw
        self._derived_by_key = index.derived
        self._derived_idx: dict[str, dict[Labels, Reading]] = {}
        self._ok: dict[str, list[Valued]] = {}
        self._exact: dict[str, dict[Labels, Valued]] = {}
        self._per_gpu: dict[str, dict[str, Valued]] = {}
        self._gpus_by_root: dict[str, list[str]] | None = None
        self._tp_groups: list[tuple[str, ...]] | None = None
        self._procs: dict[str, Proc] | None = None
        self._fallback: dict[str, list[Reading]] = {}
        self._has: dict[tuple[str, Labels], bool] = {}

    # -- current readings ---------------------------------------------------------------
    def all(self, key: str) -> list[Reading]:
        """Every reading of ``key`` this tick, whatever its status (History stands in for
        slow-cadence facts the snapshot lacks)."""
        got = self._by_key.get(key)
        if got is not None:
            return got
        if key not in SLOW_KEYS:
            return []
        fb = self._fallback.get(key)
        if fb is None:
            fb = self._fallback[key] = self._from_history(key)
        return fb

    def _from_history(self, key: str) -> list[Reading]:
        out = []
        for s in self._hidx.get(key, ()):
            if s.last_seen < self.now - FACT_MAX_AGE or s.status is not Status.OK:
                continue
            if s.kind is Kind.HISTOGRAM:
                continue
            v = s.last()
            if v is None and s.text is None:
                continue
            out.append(Reading(s.key, v if v is not None else 1.0, s.unit, s.labels, Status.OK,
                               "", s.kind, s.text))
        return out

    def ok(self, key: str) -> list[Valued]:
        """Readings of ``key`` with a value (OK or STALE); computed once per tick."""
        got = self._ok.get(key)
        if got is None:     # has_value(r), inline: every reading of ~60 keys a tick
            got = self._ok[key] = [r for r in self.all(key)  # type: ignore[misc]
                                   if r.value is not None and r.status in _VALUED]
        return got

    def has(self, key: str, labels: Labels = ()) -> bool:
        for r in self.ok(key):
            if not labels or all(r.label(k) == v for k, v in labels):
                return True
        return False

    def has_input(self, spec: Input) -> bool:
        # asked for every rule every tick, the same inputs by many rules: once a tick each
        memo = self._has
        for alt in spec.alternatives:
            got = memo.get(alt)
            if got is None:
                got = memo[alt] = self.has(*alt)
            if got:
                return True
        return False

    def exact(self, key: str, labels: Labels) -> Valued | None:
        """The reading of ``key`` with exactly these labels (OK/STALE), or None."""
        idx = self._exact.get(key)
        if idx is None:
            idx = self._exact[key] = {r.labels: r for r in self.ok(key)}
        return idx.get(labels)

    def value(self, key: str, labels: Labels) -> float | None:
        r = self.exact(key, labels)
        return r.value if r is not None else None

    def per_gpu(self, key: str) -> dict[str, Valued]:
        """GPU index -> reading (computed once per tick; do not modify)."""
        got = self._per_gpu.get(key)
        if got is None:
            got = self._per_gpu[key] = {g: r for r in self.ok(key) if (g := r.label("gpu"))}
        return got

    def peer(self, key: str, labels: Labels) -> Valued | None:
        """The reading of ``key`` for the same server/engine as ``labels``: exact labels,
        else one whose labels agree on every label name both have."""
        r = self.exact(key, labels)
        if r is not None:
            return r
        want = dict(labels)
        for c in self.ok(key):
            if all(want.get(k, v) == v for k, v in c.labels):
                return c
        return None

    def _derived_of(self, key: str) -> dict[Labels, Reading]:
        got = self._derived_idx.get(key)
        if got is None:   # built on first use: most ticks need a few keys
            got = self._derived_idx[key] = {r.labels: r for r in
                                            self._derived_by_key.get(key, ())}
        return got

    def derived_of(self, key: str) -> list[Valued]:
        return [r for r in self._derived_of(key).values() if has_value(r)]

    def derived(self, key: str, labels: Labels) -> float | None:
        r = self._derived_of(key).get(labels)
        return r.value if r is not None and r.ok else None

    def derived_bound(self, key: str, labels: Labels) -> str:
        """"<" or ">" when the derived reading is a quantile its histogram only bounds
        (qbound.py: its value is then the bound), "" for a measured value."""
        r = self._derived_of(key).get(labels)
        got = qbound.of(r.reason) if r is not None else None
        return got[0] if got else ""

    def setting(self, name: str) -> str | None:
        for r in self.all("server.setting"):
            if r.label("name") == name and r.text is not None:
                return r.text
        return None

    # -- judging a window, not a tick ---------------------------------------------------
    def median(self, r: Reading) -> float | None:
        """The median of ``r``'s series over the last ``judge_window`` seconds: what the
        rules compare with thresholds.  None while History does not reach back half the
        window (a rule then does not judge: start-up, or a source just back)."""
        key = (r.key, r.labels)
        if key not in self._medians:
            s = self.history.get(r.key, r.labels)
            self._medians[key] = median(recent_values(s, self.judge_window, self.now)) \
                if s is not None else None
        return self._medians[key]

    def median_of(self, rs) -> float | None:
        """Mean of several readings' medians (GPUs of one server); None if any lacks one."""
        ms = [self.median(r) for r in rs]
        got = [m for m in ms if m is not None]
        return sum(got) / len(got) if got and len(got) == len(ms) else None

    def share(self, r: Reading, at_least: float) -> float | None:
        """Share of the ticks of the last ``judge_window`` seconds on which ``r`` read at
        least ``at_least``: for small counts (waiting requests), whose median is 0 or 1.
        None while History does not reach back half the window."""
        s = self.history.get(r.key, r.labels)
        vals = recent_values(s, self.judge_window, self.now) if s is not None else None
        return share(vals, lambda v: v >= at_least)

    def queue_evidence(self, waiting: Reading, share: float, at_least: float) -> Evidence:
        """Evidence for 'requests wait': the share of ticks with a queue, and the queue now."""
        return Evidence(waiting.key, waiting.labels, share, QUEUED_SHARE, ">=", "ratio",
                        f"share of the ticks of the last {self.judge_window:g} s with "
                        f">= {at_least:g} waiting; {fmt_count(waiting.value)} waiting now")

    @property
    def median_note(self) -> str:
        return f"median over {self.judge_window:g} s"

    def past(self, value: float | None, op: str, threshold: float,
             subject: Labels, level: Severity | None = None) -> TypeGuard[float]:
        """``value op threshold``; while this rule's finding for ``subject`` is raised, the
        threshold relaxes by ``hold_margin`` towards healthy (a Schmitt trigger): a value
        hovering at the threshold keeps its finding instead of clearing and re-raising.

        Per level: ``level`` is the severity this comparison earns (a rule that picks its
        level by thresholds passes it); its threshold relaxes only while the finding is
        raised at that level or above, so a hold never lifts a subject to a higher level
        (a GPU held at 91 C with the warning raised is not critical at 92 C relaxed).
        None: a condition every level needs (it relaxes while any level is raised).
        False for None (no value: nothing to judge), so a True narrows ``value`` to float."""
        if value is None:
            return False
        if _compare(value, op, threshold):
            return True
        if self.strict or not self.hold_margin:
            return False
        key = (self.rule_code, subject)
        held = self._raised.get(key)
        if held is None or (level is not None and held < level):
            return False
        m = self.hold_margin
        relaxed = threshold * (1 - m) if op in (">=", ">") else threshold * (1 + m)
        if _compare(value, op, relaxed):
            if level is None:   # a per-level hold cannot lift: no strict re-run needed
                self.relaxed_used.add(key)
            return True
        return False

    def rate_words(self, key: str, labels: Labels) -> str:
        """Evidence's words for a judged rate's span (``Series.window_rate``): "over the
        last 60 s" once History covers the window, else the window and the seconds of it
        covered (the rate is then over the whole window, as Prometheus's ``rate()``)."""
        s = self.history.get(key, labels)
        if s is None or covered(s, self.window, self.now):
            return f"over the last {self.window:.0f} s"
        first = s.first_time() or self.now
        return (f"over the {self.window:.0f} s window, of which {self.now - first:.0f} s "
                "covered (as Prometheus's rate())")

    def window_words(self, s: Series | None) -> str:
        return window_words(s, self.window, self.now)

    def in_window(self, key: str, labels: Labels) -> str:
        """"in the last 60 s", or "in the 5 s covered of the 60 s window" while History
        is younger than the window (evidence for counts over the window)."""
        s = self.history.get(key, labels)
        if s is None:   # a count summed over series (finish reasons): the oldest of them
            want = set(labels)
            got = [x for x in self._hidx.get(key, ()) if want <= set(x.labels)
                   and x.first_time() is not None]
            s = min(got, key=lambda x: x.first_time() or 0.0) if got else None
        return window_words(s, self.window, self.now)

    # -- history ------------------------------------------------------------------------
    def series(self, key: str, labels: Labels) -> Series | None:
        return self.history.get(key, labels)

    def series_of(self, key: str) -> list[Series]:
        """Current series of ``key`` (seen on the newest tick)."""
        return [s for s in self._hidx.get(key, ()) if s.last_seen >= self.now]

    # -- processes ------------------------------------------------------------------------
    @property
    def procs(self) -> dict[str, Proc]:
        if self._procs is None:
            self._procs = {}
            for r in self.all("process.info"):
                pid = r.label("pid")
                if pid:
                    self._procs[pid] = Proc(pid, r.label("ppid"), r.label("name"),
                                            r.label("role"), r.label("kind"), r.text or "")
        return self._procs

    def root_of(self, pid: str) -> str:
        """The top-most known ancestor of ``pid`` (the server's root process)."""
        seen = set()
        cur = pid
        while cur in self.procs and self.procs[cur].ppid in self.procs and cur not in seen:
            seen.add(cur)
            cur = self.procs[cur].ppid
        return cur

    def gpus_by_root(self) -> dict[str, list[str]]:
        """Server root pid -> GPUs its processes hold memory on (NVML per-process list;
        256 MiB or more: a CUDA context alone is ~500 MiB, a monitoring tool less)."""
        if self._gpus_by_root is None:
            held = [(r.label("gpu"), int(r.label("pid")), r.value)
                    for r in self.ok("process.gpu_mem_bytes")
                    if r.label("pid").isdigit() and r.label("gpu") and r.value >= 256 * 2**20]
            known = self.procs
            if known:   # NVML's host pids matched to the tree as the screen does (pidmap):
                # directly or through the PID-namespace aliases; another program's are not
                tree = {int(p) for p in known if p.isdigit()}
                pm = self.snapshot.process_meta()
                aliases = list(pm.pid_aliases) if pm else []
                matched, _ = map_gpu_pids(tree, held, aliases)
            else:       # no process tree read: each GPU process stands for itself
                matched = {}
                for gpu, pid, _ in held:
                    matched.setdefault(pid, []).append(gpu)
            out: dict[str, set[str]] = {}
            for pid, gpus in matched.items():
                out.setdefault(self.root_of(str(pid)), set()).update(gpus)
            self._gpus_by_root = {k: sorted(v, key=natural_key) for k, v in out.items()}
        return self._gpus_by_root

    @property
    def tp_groups(self) -> list[tuple[str, ...]]:
        if self._tp_groups is None:
            self._tp_groups = tp_groups(self)
        return self._tp_groups


def _compare(value: float, op: str, threshold: float) -> bool:
    if op == ">=":
        return value >= threshold
    if op == ">":
        return value > threshold
    if op == "<=":
        return value <= threshold
    if op == "<":
        return value < threshold
    raise ValueError(f"unknown comparison {op!r}")


def tp_groups(ctx: Context) -> list[tuple[str, ...]]:
    """GPUs that form one tensor-parallel group each.

    From NVML's per-process lists: the GPUs a server's process tree uses; split into
    groups of ``tensor_parallel_size`` when that setting is known (data-parallel replicas
    of one server are separate groups; TP=1 means no group).  Without process lists, the
    GPUs holding memory, split by ``tensor_parallel_size`` when known.  Unknown: none.
    """
    tp_text = ctx.setting("tensor_parallel_size")
    tp = _int(tp_text)
    dp = _int(ctx.setting("data_parallel_size"))
    by_root = ctx.gpus_by_root()
    if by_root:
        gpu_sets = list(by_root.values())
    elif tp and tp >= 2:
        used = [g for g, r in ctx.per_gpu("gpu.mem_used_bytes").items()
                if (r.value or 0) >= ctx.t.weights_min_bytes]
        gpu_sets = [sorted(used, key=natural_key)]
    else:
        return []
    groups: list[tuple[str, ...]] = []
    for gpus in gpu_sets:
        if tp is not None:
            if tp < 2:
                continue
            if len(gpus) % tp == 0:
                groups += [tuple(gpus[i:i + tp]) for i in range(0, len(gpus), tp)]
            continue
        if len(gpus) >= 2 and (dp is None or dp <= 1):
            groups.append(tuple(gpus))
    return groups


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    m = re.match(r"\s*(\d+)", text)
    return int(m.group(1)) if m else None


def ev(r: Reading | None, key: str, labels: Labels, value, threshold, op: str,
       note: str = "") -> Evidence:
    """Evidence from a reading (its unit), or from a key when there is no reading object."""
    unit = r.unit if r is not None else (SPECS[key].unit if key in SPECS else "")
    return Evidence(key, labels, value, threshold, op, unit, note)


def sub(**labels: object) -> Labels:
    if len(labels) == 1:      # sub(gpu=...) for every GPU of several rules every tick
        (name, value), = labels.items()
        return ((name, str(value)),)
    return make_labels(labels)


def without(labels: Labels, *names: str) -> Labels:
    return tuple((k, v) for k, v in labels if k not in names)


def server_subject(labels: Labels) -> Labels:
    """A server reading's identity without its quantile/reason/etc. labels."""
    return tuple((k, v) for k, v in labels if k in ("instance", "engine", "model"))


def describe_subject(labels: Labels) -> str:
    d = dict(labels)
    if "gpu" in d and len(d) == 1:
        return f"GPU {d['gpu']}"
    if "gpus" in d:
        return f"GPUs {d['gpus']}"
    return " ".join(f"{k}={v}" for k, v in labels)


def split_slope(points: list[tuple[float, float, float]]):
    """Growth exponent of y in x from (x, y, weight) points: split them by x into a lower
    and an upper half of the total weight, take each half's weighted mean x and y, and
    return (log(y_hi/y_lo) / log(x_hi/x_lo), (x_lo, x_hi), (y_lo, y_hi)); None when the
    halves do not differ in x."""
    pts = sorted(p for p in points if p[0] > 0 and p[1] > 0 and p[2] > 0)
    total = sum(p[2] for p in pts)
    lo: list[tuple[float, float, float]] = []
    hi: list[tuple[float, float, float]] = []
    acc = 0.0
    for p in pts:
        (lo if acc < total / 2 else hi).append(p)
        acc += p[2]
    if not lo or not hi:
        return None

    def mean(side, i):
        return sum(p[i] * p[2] for p in side) / sum(p[2] for p in side)

    x_lo, x_hi, y_lo, y_hi = mean(lo, 0), mean(hi, 0), mean(lo, 1), mean(hi, 1)
    if x_hi <= x_lo * (1 + 1e-9):
        return None
    return math.log(y_hi / y_lo) / math.log(x_hi / x_lo), (x_lo, x_hi), (y_lo, y_hi)
