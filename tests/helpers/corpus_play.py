"""Play a recorded incident through the real Pipeline/Diagnoser, headless."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from infertop.pipeline import Pipeline
from infertop.recording import decode, iter_snapshots
from infertop.rules.engine import Diagnoser


@dataclass(frozen=True)
class Played:
    times: tuple[float, ...]
    active: tuple[dict[str, str], ...]       # code -> layer, per tick
    causes: tuple[dict[str, tuple[str, ...]], ...] = ()   # code -> caused_by, per tick
    events: tuple = ()              # the Diagnoser's raises and clears
    last_findings: tuple = ()       # the findings active on the last tick

    def first(self, code: str, after: float = float("-inf")) -> float | None:
        """Time the code was first active at or after ``after``."""
        return next((t for t, a in zip(self.times, self.active) if code in a and t >= after),
                    None)

    def ever(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for a in self.active:
            out.update(a)
        return out

    def ever_before(self, t0: float) -> set[str]:
        return {c for t, a in zip(self.times, self.active) if t < t0 for c in a}


def play(path: Path) -> Played:
    dec = decode(path.read_bytes(), path.name)
    diag = Diagnoser()
    pipeline = Pipeline(diag)
    times, active, causes = [], [], []
    frame = None
    for snap in iter_snapshots(dec):
        frame = pipeline.feed(snap)
        times.append(snap.time)
        active.append({f.code: f.layer.value for f in frame.findings})
        causes.append({f.code: f.caused_by for f in frame.findings})
    return Played(tuple(times), tuple(active), tuple(causes),
                  tuple(diag.events), tuple(frame.findings) if frame is not None else ())
