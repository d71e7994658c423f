"""One tick through the core: Snapshot -> History -> derived readings -> Findings -> Frame.

The TUI, ``snapshot --json`` and ``doctor`` all go through this, so the screen, the JSON
and the report can never disagree about a value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from .findings import Finding
from .history import History
from .keys import SPECS
from .model import LAYERS, Kind, Layer, Reading, Snapshot, Status


class Evaluator(Protocol):
    def evaluate(self, history: History, snapshot: Snapshot, derived: list[Reading]) -> list[Finding]:
        ...


@dataclass
class Frame:
    """What a pane draws: the newest Snapshot, the derived readings, active findings."""

    snapshot: Snapshot
    derived: list[Reading]
    history: History
    findings: list[Finding] = field(default_factory=list)
    window: float = 60.0
    _all: list[Reading] | None = field(default=None, repr=False, compare=False)
    _index: dict[str, list[Reading]] | None = field(default=None, repr=False, compare=False)

    def all_readings(self) -> list[Reading]:
        """Current readings as a user reads them: raw gauges and infos, derived rates and
        quantiles; raw cumulative counters and histogram buckets stay in History."""
        if self._all is None:
            self._all = [r for r in self.snapshot.readings()
                         if r.kind not in (Kind.COUNTER, Kind.HISTOGRAM)] + self.derived
        return self._all

    def by_key(self, key: str) -> list[Reading]:
        """Readings of one key (indexed once per frame: panes ask hundreds of times)."""
        if self._index is None:
            idx: dict[str, list[Reading]] = {}
            for r in self.all_readings():
                idx.setdefault(r.key, []).append(r)
            self._index = idx
        return self._index.get(key, [])

    def layer_readings(self, layer: Layer) -> list[Reading]:
        return [r for r in self.all_readings()
                if r.key in SPECS and layer in SPECS[r.key].layers]

    def layers(self) -> dict[str, list[Reading]]:
        return {layer.value: self.layer_readings(layer) for layer in LAYERS}

    def findings_for(self, layer: Layer) -> list[Finding]:
        return [f for f in self.findings if f.layer is layer]

    def sources_ok(self) -> bool:
        """At least one source read something of the server or its GPUs this tick (exit
        code 3 otherwise).  The host's own CPU and memory alone do not count: they are
        always there, even when infertop found nothing it was asked to watch."""
        return any(s.status is Status.OK and any(not r.key.startswith("host.") for r in s.readings)
                   for s in self.snapshot.samples.values())


class Pipeline:
    def __init__(self, diagnoser: Evaluator | None = None, window: float = 60.0,
                 max_points: int = 900) -> None:
        from .derive import derive  # local: keep import order trivial for the boundary test
        self._derive = derive
        self.history = History(max_points=max_points)
        self.diagnoser = diagnoser
        self.window = window
        # the Diagnoser's config says which finish reasons are errors and how long a GPU
        # error event counts: derive uses the same, so DEC-004/HW-005 read what is shown
        cfg = getattr(diagnoser, "config", None)
        th = getattr(cfg, "thresholds", None)
        self._derive_opts: dict[str, Any] = {} if th is None else {
            "error_reasons": th.error_reasons, "event_window": th.error_event_window}
        self.timeline: Any = None   # the source's epoch: a new demo scenario starts over

    def reset(self) -> None:
        """Forget everything (a replay seek backwards rebuilds from the start)."""
        self.history = History(max_points=self.history.max_points)
        if self.diagnoser is not None and hasattr(self.diagnoser, "reset"):
            self.diagnoser.reset()

    def feed(self, snap: Snapshot, timeline: Any = None) -> Frame:
        """One tick.  ``timeline`` is the source's epoch (demo scenarios bump it): when it
        changes, History and findings restart, so a scenario switch is no counter reset."""
        if timeline != self.timeline:
            self.timeline = timeline
            self.reset()
        self.history.add(snap)
        derived = self._derive(self.history, self.window, **self._derive_opts)
        self.history.add_readings(snap.time, derived)
        findings = (self.diagnoser.evaluate(self.history, snap, derived)
                    if self.diagnoser is not None else [])
        return Frame(snap, derived, self.history, findings, self.window)
