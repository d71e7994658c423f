"""One recording, played through today's pipeline and kept as time series (pure).

``summarize(snapshots)`` feeds a recording's Snapshots through a Pipeline (History ->
derive -> rules, exactly as replay does) and keeps what ``compare`` and ``report`` need:
every numeric reading a user sees (raw gauges and derived rates, quantiles, ratios) as
(time, value) points per series, the findings' raises and clears with the last evidence
and remedy of each, and the server's settings and facts.

Labels that name a process instance (pid, tid, ppid), a scrape target (instance) or a
device serial (uuid, pci_bus_id) are dropped, so the same quantity matches across two
recordings of two server runs; series that then coincide are added (cores, bytes,
counts) or averaged (ratios, latencies).  Ticks with requests in flight (running or
waiting) are marked ``loaded``: a before/after comparison compares load with load, not a
recording's idle start with the other's busy middle.  Bounded: at most ``max_ticks`` snapshots and
``max_series`` series are kept (the rest is counted, not silently lost).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from . import qbound
from .findings import Finding, FindingEvent
from .keys import SPECS
from .model import Kind, Labels, Status, make_labels
from .pipeline import Evaluator, Pipeline

# "prefill": the prefill instances of a P/D pair's TTFT split (pd.ttft_split_seconds),
# scrape targets too
VOLATILE_LABELS = frozenset({"instance", "pid", "tid", "ppid", "uuid", "pci_bus_id",
                             "prefill"})
ADDITIVE_UNITS = frozenset({"cores", "bytes", "count", "tokens/s", "1/s", "bytes/s", "W", "blocks",
                            "blocks/s"})
FACT_KEYS = ("server.setting", "kv.config", "model.info", "gpu.info", "server.info")
SeriesId = tuple[str, Labels]
MAX_EVENTS = 10_000


def stable_labels(labels: Labels, roles: dict[str, str] | None = None) -> Labels:
    """``labels`` without the run-specific ones.  ``roles`` (instance -> prefill/decode):
    a P/D pair's instance keeps its role instead of its address, so the prefill and the
    decode instance's TTFT stay two series (merged, their p99s were averaged)."""
    out = tuple((k, v) for k, v in labels if k not in VOLATILE_LABELS)
    if roles:
        role = roles.get(dict(labels).get("instance", ""))
        if role:
            return make_labels(out, role=role)
    return out


def fact_name(key: str, labels: Labels) -> str:
    """A setting's or fact's name in the settings table: ``max_num_seqs``,
    ``kv.config block_size``, ``gpu.info gpu=0``."""
    d = dict(labels)
    if key == "server.setting":
        return d.get("name", "?")
    extra = " ".join(f"{k}={v}" for k, v in stable_labels(labels)
                     if k not in ("model", "engine") or key != "kv.config")
    if key == "kv.config":
        return f"kv {d.get('name', '?')}"
    return f"{key} {extra}".strip()


@dataclass
class RunSummary:
    ticks: int = 0
    start: float = 0.0
    end: float = 0.0
    series: dict[SeriesId, list[tuple[float, float]]] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    events: list[FindingEvent] = field(default_factory=list)
    findings: dict[tuple[str, Labels], Finding] = field(default_factory=dict)  # last seen
    settings: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)   # name -> last status/reason
    loaded: set[float] = field(default_factory=set)  # tick times with requests in flight
    # series -> tick time -> "<"/">": ticks whose value is only a bound (qbound.py)
    bounds: dict[SeriesId, dict[float, str]] = field(default_factory=dict)
    unchecked: dict[str, list[str]] = field(default_factory=dict)  # rule code -> why not
    dropped_ticks: int = 0
    dropped_series: int = 0
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def duration(self) -> float:
        return max(0.0, self.end - self.start)

    def values(self, sid: SeriesId, loaded_only: bool = False) -> list[float]:
        pts = self.series.get(sid, ())
        if loaded_only and self.loaded:
            return [v for t, v in pts if t in self.loaded]
        return [v for _, v in pts]

    def bound_side(self, sid: SeriesId, loaded_only: bool = False) -> str:
        """"<" or ">" when at least half of the series' (loaded) ticks are only bounds: its
        median is then a bound too, and no change from or to it is a measured one."""
        marks = self.bounds.get(sid)
        if not marks:
            return ""
        times = [t for t, _ in self.series.get(sid, ())
                 if not (loaded_only and self.loaded) or t in self.loaded]
        sides = [marks[t] for t in times if t in marks]
        if not times or 2 * len(sides) < len(times):
            return ""
        return max(set(sides), key=sides.count)

    def intervals(self) -> list[tuple[str, Labels, float, float | None, FindingEvent]]:
        """(code, subject, raised at, cleared at or None, the raise event), in raise order:
        each raise paired with the next clear of the same code and subject."""
        open_: dict[tuple[str, Labels], FindingEvent] = {}
        out: list[list] = []
        index: dict[tuple[str, Labels], int] = {}
        for e in self.events:
            k = (e.code, stable_labels(e.subject))
            if e.kind == "raised" and k not in open_:
                open_[k] = e
                index[k] = len(out)
                out.append([e.code, k[1], e.time, None, e])
            elif e.kind == "cleared" and k in open_:
                out[index.pop(k)][3] = e.time
                del open_[k]
        return [tuple(x) for x in out]

    def raised(self) -> dict[tuple[str, Labels], FindingEvent]:
        """(code, subject) -> its first raise."""
        out: dict[tuple[str, Labels], FindingEvent] = {}
        for e in self.events:
            if e.kind == "raised":
                out.setdefault((e.code, stable_labels(e.subject)), e)
        return out


def summarize(snapshots: Iterable, diagnoser: Evaluator | None, *, window: float = 60.0,
              max_ticks: int = 20_000, max_series: int = 5_000,
              meta: dict[str, Any] | None = None) -> RunSummary:
    pipe = Pipeline(diagnoser, window=window)
    out = RunSummary(meta=dict(meta or {}))
    for snap in snapshots:
        if out.ticks >= max_ticks:
            out.dropped_ticks += 1
            continue
        frame = pipe.feed(snap)
        t = snap.time
        if out.ticks == 0:
            out.start = t
        out.end = t
        out.ticks += 1
        acc: dict[SeriesId, list[float]] = {}
        bounded: dict[SeriesId, str] = {}
        in_flight = sum(r.value for key in ("server.requests_running", "server.requests_waiting")
                        for r in snap.readings(key) if r.ok and math.isfinite(r.value))
        if in_flight > 0:
            out.loaded.add(t)
        readings = frame.all_readings()
        roles = {r.label("instance"): r.text for r in readings
                 if r.key == "server.disagg_role" and r.text in ("prefill", "decode")}
        if roles:   # the pair's roles are a fact of the run (which sides were read)
            out.settings["P/D roles read"] = ", ".join(sorted(set(roles.values())))
        for r in readings:
            if r.key in FACT_KEYS:
                if r.text is not None and r.status in (Status.OK, Status.STALE):
                    out.settings[fact_name(r.key, r.labels)] = r.text
                continue
            if r.kind is Kind.INFO or r.value is None or r.status is not Status.OK or \
                    not math.isfinite(r.value):
                continue
            sid = (r.key, stable_labels(r.labels, roles))
            acc.setdefault(sid, []).append(r.value)
            b = qbound.of(r.reason) if r.reason else None
            if b is not None:
                bounded[sid] = b[0]
            if r.key not in out.units:
                out.units[r.key] = r.unit or (SPECS[r.key].unit if r.key in SPECS else "")
        for sid, vals in acc.items():
            pts = out.series.get(sid)
            if pts is None:
                if len(out.series) >= max_series:
                    out.dropped_series += 1
                    continue
                pts = out.series[sid] = []
            v = sum(vals) if out.units.get(sid[0]) in ADDITIVE_UNITS else sum(vals) / len(vals)
            pts.append((t, v))
            if sid in bounded:
                out.bounds.setdefault(sid, {})[t] = bounded[sid]
        for f in frame.findings:
            out.findings[(f.code, stable_labels(f.subject))] = f
        evs = getattr(diagnoser, "events", None) or []
        if evs:
            # the diagnoser keeps a bounded deque: take what is new since the last tick
            start = 0
            if out.events:
                last = out.events[-1]
                start = next((i + 1 for i in range(len(evs) - 1, -1, -1) if evs[i] is last), 0)
            out.events.extend(evs[start:][:max(0, MAX_EVENTS - len(out.events))])
        for name, s in snap.samples.items():
            out.sources[name] = s.status.value + (f": {s.reason}" if s.reason else "")
    missing = getattr(diagnoser, "missing_inputs", None)
    if missing is not None and out.ticks:
        out.unchecked = missing(pipe.history)   # what the rules could not check, and why
    return out
