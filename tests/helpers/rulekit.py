"""Test kit for the diagnosis rules: Snapshots from plain dicts, a feeder, a case harness.

``tick({"gpu.util_ratio": {"gpu=0": 0.95}, "host.cpu_ratio": 0.3})`` builds one Snapshot
(readings grouped into nvml/process/server samples like the real probes); ``Feed`` runs
snapshots through the real Pipeline (History -> derive -> Diagnoser) one second apart.
A ``Case`` describes one rule by its tick data: healthy, bad, just above/below the
threshold, and which inputs to drop; the generic table tests in test_rules_*.py run every
case through the same raise/quiet/clear/no-flap/missing-input checks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from helpers.snapkit import reading, sample, snap
from infertop.config import DiagnosisConfig
from infertop.findings import Finding
from infertop.keys import SPECS
from infertop.model import Kind, Reading, Snapshot, Status, make_labels
from infertop.pipeline import Pipeline
from infertop.rules.engine import Diagnoser

SERVER = "server:local"


@dataclass(frozen=True)
class HistValue:
    buckets: tuple[tuple[float, float], ...]
    count: float
    sum: float


class Hist:
    """A cumulative histogram that grows as a server's would."""

    def __init__(self, bounds=(0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1.0, 2.5, 5.0, 10.0)):
        self.bounds = tuple(bounds) + (math.inf,)
        self.counts = [0.0] * len(self.bounds)
        self.count = 0.0
        self.sum = 0.0

    def observe(self, v: float, n: float = 1) -> Hist:
        for i, b in enumerate(self.bounds):
            if v <= b:
                self.counts[i] += n
                break
        self.count += n
        self.sum += v * n
        return self

    def value(self) -> HistValue:
        cum, acc = [], 0.0
        for b, c in zip(self.bounds, self.counts):
            acc += c
            cum.append((b, acc))
        return HistValue(tuple(cum), self.count, self.sum)


def _labels(spec: str) -> tuple[tuple[str, str], ...]:
    if not spec:
        return ()
    return make_labels(dict(p.split("=", 1) for p in spec.split(",")))


def _source(key: str) -> str:
    if key.startswith("gpu."):
        return "nvml"
    if key.startswith(("process.", "thread.", "host.")) or key == "server.setting":
        return "process"
    return SERVER


def make_reading(key: str, labels, v: Any) -> Reading:
    spec = SPECS[key]
    if isinstance(v, Status):
        return Reading(key, None, spec.unit, labels, v, f"{v.value} for the test", spec.kind)
    if isinstance(v, HistValue):
        return Reading(key, v.count, spec.unit, labels, Status.OK, "", Kind.HISTOGRAM, None,
                       v.buckets, v.sum)
    if isinstance(v, str):
        return reading(key, 1.0, text=v, **dict(labels))
    return reading(key, float(v), **dict(labels))


def tick(t: float, data: dict[str, Any], status: dict[str, Status] | None = None) -> Snapshot:
    """One Snapshot: ``data`` maps key -> value, or key -> {"label=v,...": value}.
    Values: numbers, text (INFO), HistValue, or a Status (a reading without value)."""
    by_source: dict[str, list[Reading]] = {}
    for key, val in data.items():
        items = val.items() if isinstance(val, dict) else [("", val)]
        for lab, v in items:
            by_source.setdefault(_source(key), []).append(make_reading(key, _labels(lab), v))
    status = status or {}
    samples = {}
    for name in set(by_source) | set(status):
        st = status.get(name, Status.OK)
        rs = () if st is Status.ERROR else tuple(by_source.get(name, ()))
        samples[name] = sample(name, t, list(rs), st, "connection refused" if st is Status.ERROR else "")
    return snap(t, *samples.values())


class Feed:
    """Snapshots one ``dt`` apart through the real pipeline; remembers every finding."""

    def __init__(self, config: DiagnosisConfig | None = None, t0: float = 1_000_000.0,
                 dt: float = 1.0) -> None:
        self.diag = Diagnoser(config)
        self.pipe = Pipeline(self.diag, window=self.diag.config.diagnosis.window)
        self.t = t0
        self.dt = dt
        self.findings: list[Finding] = []

    @property
    def history(self):
        return self.pipe.history

    def tick(self, data: dict[str, Any], status: dict[str, Status] | None = None):
        self.findings = self.pipe.feed(tick(self.t, data, status)).findings
        assert self.diag.rule_errors == {}, self.diag.rule_errors
        self.t += self.dt
        return self.findings

    def run(self, make: Callable[[], dict[str, Any]], n: int, **kw):
        for _ in range(n):
            self.tick(make(), **kw)
        return self.findings

    def active(self, code: str) -> list[Finding]:
        return [f for f in self.findings if f.code == code]

    def events(self, code: str, kind: str) -> list:
        return [e for e in self.diag.events if e.code == code and e.kind == kind]


class Case:
    """One rule's table row. Methods return the full tick data (they may advance counters).

    ``windowed``: the condition is a rate/quantile over a window, so a burst cannot be
    'too short' and the finding outlives the condition by up to ``lag`` seconds.
    """

    code: str = ""
    lag: float = 0.0
    windowed: bool = False
    warmup: int = 3
    missing: tuple[str, ...] = ()
    # noisy-input checks: the config threshold (``thresholds.NAME``) that ``at(x)`` puts
    # the judged reading at; None for rules not judged by a window median
    threshold: str | None = None

    def at(self, x: float) -> dict[str, Any]:
        """Tick data with the judged reading at ``x`` and everything else as in ``bad``."""
        raise NotImplementedError

    def bad_side(self) -> int:
        """+1 when the condition is 'at or above the threshold', -1 for 'at or below'."""
        return 1

    def good(self) -> dict[str, Any]:
        raise NotImplementedError

    def bad(self) -> dict[str, Any]:
        raise NotImplementedError

    def hi(self) -> dict[str, Any]:
        return self.bad()

    def lo(self) -> dict[str, Any]:
        return self.good()

    def __repr__(self) -> str:
        return self.code


def drop(data: dict[str, Any], keys) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in keys}


def gpus(n: int, value: Any) -> dict[str, Any]:
    return {f"gpu={i}": value for i in range(n)}


# ---- the generic table checks (each test_rules_<layer>.py runs them over its cases) ----
def timing(code: str, config: DiagnosisConfig | None = None) -> tuple[float, float]:
    spec = next(s for s in Diagnoser(config).catalogue() if s.code == code)
    # the catalogue fills in the timing in force (None only in a rule's own declaration)
    assert spec.raise_after is not None and spec.clear_after is not None, spec
    return spec.raise_after, spec.clear_after


PREFIX_LAYER = {"HW": "hardware", "KRN": "kernels", "MEM": "memory", "SCH": "scheduling",
                "PAR": "parallelism", "DEC": "decoding"}


def judge_lag(code: str) -> float:
    """Seconds a median-judged rule needs before its median crosses (the whole judge
    window, to be safe: the median turns after about half of it); 0 for other rules."""
    spec = next(s for s in Diagnoser().catalogue() if s.code == code)
    return DiagnosisConfig().diagnosis.judge_window if spec.judged.startswith("median") else 0.0


def _bad_ticks(case: Case) -> int:
    ra, _ = timing(case.code)
    return int(ra) + 3 + getattr(case, "build", 0) + int(judge_lag(case.code))


def check_raises(case: Case) -> Finding:
    f = Feed()
    f.run(case.good, case.warmup)
    start = f.t
    f.run(case.bad, _bad_ticks(case))
    raised = f.events(case.code, "raised")
    assert len(raised) == 1, f"{case.code}: expected one raise, got {raised}"
    act = f.active(case.code)
    assert act, f"{case.code} not active; active: {[x.code for x in f.findings]}"
    fin = act[0]
    assert fin.layer.value == (PREFIX_LAYER.get(case.code.split("-")[0]) or  # FLT: its spec's
                               next(s.layer.value for s in Diagnoser().catalogue()
                                    if s.code == case.code))
    assert fin.remedy and fin.title and fin.evidence
    assert any(e.threshold is not None and e.op for e in fin.evidence), fin.evidence
    assert fin.since >= start
    ra, _ = timing(case.code)
    assert raised[0].time - fin.since >= ra - 1e-9  # held raise_after before raising
    return fin


def check_quiet_when_healthy(case: Case) -> None:
    f = Feed()
    f.run(case.good, 40)
    assert not f.events(case.code, "raised"), f.findings


def check_quiet_when_too_short(case: Case) -> None:
    """A burst shorter than raise_after (or, for a median-judged rule, shorter than half
    its judge window: the median does not move) raises nothing."""
    ra, _ = timing(case.code)
    lag = judge_lag(case.code)
    f = Feed()
    f.run(case.good, max(case.warmup, int(lag)))
    f.run(case.bad, max(1, min(int(lag) // 2 - 1, int(ra) - 1)) if lag else max(1, int(ra) - 2))
    f.run(case.good, 20)
    assert not f.events(case.code, "raised"), f.diag.events


def check_clears(case: Case) -> None:
    ra, ca = timing(case.code)
    f = Feed()
    f.run(case.good, case.warmup)
    f.run(case.bad, _bad_ticks(case))
    assert f.events(case.code, "raised")
    healthy_from = f.t
    lag = case.lag + judge_lag(case.code)
    limit = int(lag + ca + 5)
    for _ in range(limit):
        f.tick(case.good())
        if f.events(case.code, "cleared"):
            break
    cleared = f.events(case.code, "cleared")
    assert len(cleared) == 1, f"{case.code} did not clear within {limit} healthy ticks"
    waited = cleared[0].time - healthy_from
    assert waited >= ca - 1e-9, f"cleared after {waited} s, before clear_after={ca}"
    assert waited <= lag + ca + 2
    assert not f.active(case.code)


def check_no_flap(case: Case) -> None:
    f = Feed()
    f.run(case.good, case.warmup)
    for i in range(30):                     # hovering around the threshold from healthy
        f.tick(case.hi() if i % 2 == 0 else case.lo())
    f.run(case.bad, _bad_ticks(case))       # a real episode
    for i in range(40):                     # hovering again while raised
        f.tick(case.hi() if i % 2 == 0 else case.lo())
    raised = f.events(case.code, "raised")
    assert len(raised) == 1, f"{case.code} raised {len(raised)} times: {f.diag.events}"
    assert not f.events(case.code, "cleared")


def threshold_of(case: Case) -> float:
    assert case.threshold is not None, f"{case.code}: no threshold to read"
    section, name = case.threshold.split(".")
    return getattr(getattr(DiagnosisConfig(), section), name)


def check_jitter_raises_once(case: Case, seed: int = 1) -> None:
    """A reading jittering +-5 % around its threshold (real GPM/KV readings do) raises at
    most once from healthy and never clears while it hovers; then a real episode and more
    hovering: exactly one raise over the whole run, no clear."""
    import random
    rng = random.Random(f"{case.code}/{seed}")
    th = threshold_of(case)

    def noisy():
        return case.at(th * (1 + rng.uniform(-0.05, 0.05)))

    f = Feed()
    f.run(case.good, case.warmup)
    f.run(noisy, 60)
    assert len(f.events(case.code, "raised")) <= 1, f.diag.events
    assert not f.events(case.code, "cleared"), f.diag.events
    f.run(case.bad, _bad_ticks(case))
    f.run(noisy, 60)
    raised = f.events(case.code, "raised")
    assert len(raised) == 1, f"{case.code} raised {len(raised)} times: {f.diag.events}"
    assert not f.events(case.code, "cleared"), f.diag.events
    assert f.active(case.code)


def check_jitter_past_threshold_raises(case: Case, seed: int = 2) -> None:
    """A reading that sits past its threshold but jitters across it on some ticks (SM
    active 30, 31, 29 % against a 30 % limit) raises within raise_after + half the judge
    window + 2 s (10 s for the 3 s rules) and stays raised."""
    import random
    rng = random.Random(f"{case.code}/{seed}")
    th = threshold_of(case)
    # 'past' is the bad side: bad() and good() tell which way it lies
    f = Feed()
    f.run(case.good, case.warmup)
    start = f.t
    sign = case.bad_side()

    def noisy():
        return case.at(th * (1 + sign * 0.04 + rng.uniform(-0.05, 0.05)))

    ra, _ = timing(case.code)
    within = ra + judge_lag(case.code) / 2 + 2
    for _ in range(int(within) + 1):
        f.tick(noisy())
        if f.active(case.code):
            break
    got = f.events(case.code, "raised")
    assert got and got[0].time - start <= within, \
        f"{case.code} not raised within {within:g} s: {f.diag.events}"
    f.run(noisy, 60)
    assert len(f.events(case.code, "raised")) == 1 and not f.events(case.code, "cleared")


def check_single_spike_quiet(case: Case) -> None:
    """One bad tick among healthy ones does not move a median: nothing raises."""
    f = Feed()
    f.run(case.good, 15)
    for _ in range(3):
        f.tick(case.bad())
        f.run(case.good, 14)
    assert not f.events(case.code, "raised"), f.diag.events


def check_missing_inputs(case: Case) -> None:
    ra, _ = timing(case.code)
    f = Feed()
    f.run(lambda: drop(case.good(), case.missing), case.warmup)
    f.run(lambda: drop(case.bad(), case.missing), int(ra) + 10 + getattr(case, "build", 0))
    assert not f.events(case.code, "raised"), f.findings
    why = f.diag.missing_inputs(f.history)
    assert case.code in why, why
    assert any(m in " ".join(why[case.code]) for m in case.missing), why[case.code]
