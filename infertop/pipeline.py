"""One tick through the core: Snapshot -> History -> derived readings -> Findings -> Frame.

The TUI, ``snapshot --json`` and ``doctor`` all go through this, so the screen, the JSON
and the report can never disagree about a value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from . import qbound
from .findings import Finding
from .history import History
from .keys import SPECS
from .meta import ProcessMeta
from .model import LAYERS, Labels, Layer, Reading, Snapshot, Status
from .reading_index import CUMULATIVE, ReadingIndex


class Evaluator(Protocol):
    def evaluate(self, history: History, snapshot: Snapshot, derived: list[Reading],
                 index: ReadingIndex | None = None) -> list[Finding]:
        ...

    def missing_inputs(self, history: History) -> dict[str, list[str]]:
        ...

    def window_needed(self) -> dict[str, float]:
        ...


@dataclass
class Frame:
    """What a pane draws: the newest Snapshot, the derived readings, active findings."""

    snapshot: Snapshot
    derived: list[Reading]
    history: History
    findings: list[Finding] = field(default_factory=list)
    window: float = 60.0
    # the last good readings of a source that stopped answering, marked STALE with their
    # age: drawn dimmed, never as live (rules do not see them: a dead server is judged
    # by SRV rules, not on old values)
    stale: list[Reading] = field(default_factory=list)
    _all: list[Reading] | None = field(default=None, repr=False, compare=False)
    # the tick's readings by key, shared with the rules' Context (the pipeline builds it
    # once; a Frame made by hand builds its own on first use)
    readings_index: ReadingIndex | None = field(default=None, repr=False, compare=False)
    _index: dict[str, list[Reading]] | None = field(default=None, repr=False, compare=False)
    _by_label: dict[tuple[str, str], dict[str, list[Reading]]] | None = field(
        default=None, repr=False, compare=False)
    _by_labels: dict[tuple[str, tuple[str, ...]], dict[tuple[str, ...], list[Reading]]] = \
        field(default_factory=dict, repr=False, compare=False)
    _exact: dict[str, dict[Labels, Reading]] = field(default_factory=dict, repr=False,
                                                      compare=False)
    # (key, label name) pairs by_label was asked for and had not built: the Pipeline's,
    # shared by its frames, so prepare builds what the panes read (None: a frame by hand)
    asked: set[tuple[str, str]] | None = field(default=None, repr=False, compare=False)

    @property
    def time(self) -> float:
        """The frame's clock: its snapshot's time (mutes, --low-bandwidth marks)."""
        return self.snapshot.time

    def all_readings(self) -> list[Reading]:
        """Current readings as a user reads them: raw gauges and infos, derived rates and
        quantiles; raw cumulative counters and histogram buckets stay in History."""
        if self._all is None:
            self._all = [r for r in self.snapshot.readings()
                         if r.kind not in CUMULATIVE] + self.derived + \
                [r for r in self.stale if r.kind not in CUMULATIVE]
        return self._all

    def reading_index(self) -> ReadingIndex:
        """The tick's readings by key (reading_index.py), the one the rules read."""
        if self.readings_index is None:
            self.readings_index = ReadingIndex(self.snapshot, self.derived)
        return self.readings_index

    def by_key(self, key: str) -> list[Reading]:
        """Readings of one key as all_readings has them (the tick's index, plus this
        frame's STALE readings: panes ask hundreds of times)."""
        if self._index is None:
            idx = self.reading_index().shown
            stale = [r for r in self.stale if r.kind not in CUMULATIVE]
            if stale:
                extra: dict[str, list[Reading]] = {}
                for r in stale:
                    extra.setdefault(r.key, []).append(r)
                idx = dict(idx)      # the shared lists stay as the rules saw them
                for key_, rs in extra.items():
                    idx[key_] = idx.get(key_, []) + rs
            self._index = idx
        return self._index.get(key, [])

    def by_label(self, key: str, name: str) -> dict[str, list[Reading]]:
        """Readings of ``key`` grouped by their value of label ``name`` ("" when absent),
        built once per frame: the panes look readings up a row at a time (gpu=, pid=)."""
        idx = self._by_label
        if idx is None:
            idx = self._by_label = {}
        got = idx.get((key, name))
        if got is None:
            got = {}
            for r in self.by_key(key):
                got.setdefault(r.label(name), []).append(r)
            idx[(key, name)] = got
            if self.asked is not None:
                self.asked.add((key, name))   # the next frames build it in prepare
        return got

    def by_labels(self, key: str,
                  names: tuple[str, ...]) -> dict[tuple[str, ...], list[Reading]]:
        """Readings of ``key`` grouped by their values of several labels (``names``, in
        that order; "" when absent), built once per frame: rows looked up by (gpu, pid)."""
        got = self._by_labels.get((key, names))
        if got is None:
            got = self._by_labels[(key, names)] = {}
            for r in self.by_key(key):
                got.setdefault(tuple(r.label(n) for n in names), []).append(r)
        return got

    def by_exact_labels(self, key: str) -> dict[Labels, Reading]:
        """The reading of ``key`` for each label set (the last, when several share one),
        built once per frame: the same engine's other readings carry the same labels."""
        got = self._exact.get(key)
        if got is None:
            got = self._exact[key] = {r.labels: r for r in self.by_key(key)}
        return got

    def prepare(self, names: tuple[str, ...] = ("gpu", "pid")) -> Frame:
        """Build the indexes the panes read through (by key; by the labels rows are
        looked up by) now, in the calling thread.  The app calls it in its pipeline
        thread, so the event loop's share of a tick follows the rows drawn, not the
        readings held (64 -> 256 GPUs doubled the panes' time before).  Returns self.

        Which: the (key, label) pairs asked of this pipeline's earlier frames that they
        had not built (``asked``); until there are some, every key by each of ``names``.
        The panes read ~30 of the ~170 (key, gpu/pid) pairs on 8 GPUs: building them all
        was a tenth of the pipeline thread.  A pair asked for the first time is built
        where it is asked (once), and by prepare from then on."""
        self.by_key("")
        asked = self.asked
        pairs = tuple(asked) if asked else \
            tuple((key, name) for key in self._index or () for name in names)
        record, self.asked = asked, None   # building here is not being asked
        try:
            for key, name in pairs:          # (a snapshot: the event loop may add to asked)
                self.by_label(key, name)
        finally:
            self.asked = record
        return self

    def layer_readings(self, layer: Layer) -> list[Reading]:
        return [r for r in self.all_readings()
                if r.key in SPECS and layer in SPECS[r.key].layers]

    def layers(self) -> dict[str, list[Reading]]:
        return {layer.value: self.layer_readings(layer) for layer in LAYERS}

    def findings_for(self, layer: Layer) -> list[Finding]:
        return [f for f in self.findings if f.layer is layer]

    def sources_ok(self) -> bool:
        """At least one source read the server or its GPUs this tick (exit code 3
        otherwise).  The host's CPU and memory and the process tree alone do not count:
        they are there even when the server infertop was asked to watch is dead."""
        return any(s.status is Status.OK and name not in HOST_SOURCES and
                   any(not r.key.startswith("host.") for r in s.readings)
                   for name, s in self.snapshot.samples.items())

    def unreachable_servers(self) -> dict[str, str]:
        """Server sources (``server:*``) that could not be read this tick -> why: an
        error, a bad URL (unavailable), or no answer yet at all."""
        return unreachable_servers(self.snapshot)


# sources about the host and the server's processes: readable whether or not the server
# answers, so they never make a run "healthy" on their own
HOST_SOURCES = frozenset({"process"})
SERVER_PREFIX = "server:"


def server_pid(snap: Snapshot) -> Any:
    """The server process the process source follows this tick (None when unknown)."""
    s = snap.samples.get("process")
    meta = s.meta if s is not None else None
    return meta.server.pid if isinstance(meta, ProcessMeta) and meta.server else None


def unreachable_servers(snap: Snapshot) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, cap in snap.capabilities.items():
        if name.startswith(SERVER_PREFIX) and not cap.available:
            out[name] = cap.reason or "unavailable"
    for name, s in snap.samples.items():
        if not name.startswith(SERVER_PREFIX):
            continue
        if s.status is Status.ERROR or (s.status is Status.STALE and not s.readings):
            out[name] = s.reason or s.status.value
    return out


class Pipeline:
    def __init__(self, diagnoser: Evaluator | None = None, window: float = 60.0,
                 max_points: int = 900) -> None:
        from .derive import (
            derive,  # local: keep import order trivial for the boundary test
        )
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
        # per source: (time, raw readings) of its last OK tick; per server instance: the
        # derived readings of that tick (shown STALE while the source is down)
        self._last_good: dict[str, tuple[float, tuple[Reading, ...]]] = {}
        # (the tick's derived readings, filtered to the instance only when they are
        # shown: a scan of every derived reading each tick for an outage that rarely comes)
        self._last_derived: dict[str, tuple[Reading, ...]] = {}
        self._last_good_pid: dict[str, Any] = {}   # server source -> its process then
        # what a report of the run says: when it began, and on how many ticks a server
        # or GPU source answered (the last tick alone may be an outage)
        self.first_time: float | None = None
        self.ticks_read = 0
        # (key, label) lookups the panes made on this pipeline's frames (Frame.prepare)
        self.asked: set[tuple[str, str]] = set()

    # -- what a report of the run says (doctor): the same shape for a fleet (fleet.py) --
    def missing_inputs(self) -> dict[str, list[str]]:
        """Rules not checked, and why (the Diagnoser's missing_inputs on this History)."""
        return self.diagnoser.missing_inputs(self.history) if self.diagnoser else {}

    def window_needed(self) -> dict[str, float]:
        """Rule code -> seconds a run needs before that rule can raise (the Diagnoser's)."""
        return self.diagnoser.window_needed() if self.diagnoser else {}

    @property
    def rules_total(self) -> int:
        """Rules this pipeline judges (checked or not)."""
        return len(getattr(self.diagnoser, "scope", ()))

    @property
    def events(self) -> list:
        """Every raise and clear of the run, oldest first."""
        return list(getattr(self.diagnoser, "events", ()))

    def reset(self) -> None:
        """Forget everything (a replay seek backwards rebuilds from the start)."""
        self.history = History(max_points=self.history.max_points)
        self._last_good, self._last_derived, self._last_good_pid = {}, {}, {}
        self.first_time, self.ticks_read = None, 0
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
        index = ReadingIndex(snap, derived)    # read by the rules, then the panes
        findings = (self.diagnoser.evaluate(self.history, snap, derived, index)
                    if self.diagnoser is not None else [])
        frame = Frame(snap, derived, self.history, findings, self.window,
                      stale=self._stale_last_good(snap, derived), readings_index=index,
                      asked=self.asked)
        if self.first_time is None:
            self.first_time = snap.time
        if frame.sources_ok():
            self.ticks_read += 1
        return frame

    def _stale_last_good(self, snap: Snapshot, derived: list[Reading]) -> list[Reading]:
        """Remember each source's last good tick; for a source in ERROR now, its last
        good readings (and, for a server, the rates and quantiles of that tick) marked
        STALE with their age, for as long as History keeps series (expire_after)."""
        out: list[Reading] = []
        kept: tuple[Reading, ...] = ()
        pid = server_pid(snap)
        for name, s in snap.samples.items():
            instance = name[len(SERVER_PREFIX):] if name.startswith(SERVER_PREFIX) else None
            if s.status is Status.OK:
                self._last_good[name] = (snap.time, s.readings)
                self._last_good_pid[name] = pid
                if instance is not None:
                    self._last_derived[instance] = kept = kept or tuple(derived)
                continue
            if s.status is not Status.ERROR or s.readings or name not in self._last_good:
                continue
            when, readings = self._last_good[name]
            age = snap.time - when
            if age > self.history.expire_after:
                continue
            then = self._last_good_pid.get(name)
            if instance is not None and then is not None and pid is not None and pid != then:
                continue   # a new server process (restarting): the old one's values died
                #            with it; shown beside the new one's settings they would mix two
            why = f"{s.reason or 'source not answering'}; last good value {age:.0f} s old"
            out += [_stale(r, why) for r in readings if r.ok]
            if instance is not None:
                out += [_stale(r, why) for r in self._last_derived.get(instance, ())
                        if r.ok and r.label("instance") == instance]
        return out


def _stale(r: Reading, why: str) -> Reading:
    """``r`` as a stale repeat; a quantile only a bucket bound limits keeps its bound
    ("<300 ms*", not "300 ms*": the note leads the reason, qbound.of reads it back)."""
    bound = r.reason if qbound.of(r.reason) is not None else ""
    return r.with_status(Status.STALE, f"{bound}; {why}" if bound else why)
