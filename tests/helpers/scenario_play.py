"""Play a shipped scenario headless once and keep what the tests look at.

Each scenario is played once per test session (a cache): every Snapshot, the phase it
belongs to, a History fed with all of them, and the derived readings (rates, quantiles)
at the end of each phase, over that phase's last 30 seconds.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from functools import cache

from infertop.derive import derive
from infertop.history import History
from infertop.model import Reading, Snapshot
from infertop.probes.sources.demo import DemoSource

WINDOW = 30.0


@dataclass
class Played:
    name: str
    snaps: list[Snapshot] = field(default_factory=list)
    phases: list[str] = field(default_factory=list)
    derived: dict[str, list[Reading]] = field(default_factory=dict)
    history: History = field(default_factory=lambda: History(max_points=600))
    source: DemoSource | None = None

    def phase_snaps(self, phase: str, last: int | None = None) -> list[Snapshot]:
        got = [s for s, p in zip(self.snaps, self.phases) if p == phase]
        assert got, f"{self.name}: no phase {phase!r} (have {sorted(set(self.phases))})"
        return got[-last:] if last else got

    def values(self, phase: str, key: str, last: int | None = None, **labels) -> list[float]:
        out = []
        for s in self.phase_snaps(phase, last):
            v = s.value(key, **labels)
            if v is not None:
                out.append(v)
        return out

    def mean(self, phase: str, key: str, last: int | None = 15, **labels) -> float:
        vals = self.values(phase, key, last, **labels)
        assert vals, f"{self.name}/{phase}: no {key} {labels}"
        return statistics.fmean(vals)

    def derived_value(self, phase: str, key: str, **labels) -> float | None:
        for r in self.derived[phase]:
            if r.key == key and all(r.label(k) == v for k, v in labels.items()):
                return r.value
        return None

    def quantile(self, phase: str, key: str, q: float, **labels) -> float | None:
        return self.derived_value(phase, key, quantile=str(q), **labels)


def play_fresh(name: str | None, *, dialect: str | None = None, seed: int | None = None,
               ticks: int | None = None) -> Played:
    src = DemoSource(name, loop=False, seed=seed, dialect=dialect)
    out = Played(name or "tour", source=src)
    prev = None
    while ticks is None or len(out.snaps) < ticks:
        snap = src.next_sync()
        if snap is None:
            break
        phase = src.phase.name
        if prev is not None and phase != prev:
            out.derived[prev] = derive(out.history, WINDOW)
        out.history.add(snap)
        out.snaps.append(snap)
        out.phases.append(phase)
        prev = phase
    if prev is not None:
        out.derived[prev] = derive(out.history, WINDOW)
    return out


@cache
def play(name: str, dialect: str | None = None) -> Played:
    return play_fresh(name, dialect=dialect)
