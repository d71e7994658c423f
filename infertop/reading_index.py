"""One tick's readings indexed by key once, for the rules and for the panes.

The rules' Context (rules/base.py) looks every reading of the snapshot up by key (counters
too: rates are judged from History, but a counter's presence and status are inputs); the
Frame the panes draw (pipeline.py) looks up what a person reads: gauges, infos and the
derived rates and quantiles.  Both read the lists built here, in one pass over the
snapshot in the pipeline's thread, instead of each walking every reading again (20,000
engine series on a big server).  The lists are shared (``shown`` and ``raw`` hold the
same list where they agree): callers never modify them.
"""

from __future__ import annotations

from .model import Kind, Reading, Snapshot

# kept in History, not shown as current readings (a raw counter or bucket means nothing
# to read; its rate or quantile is derived)
CUMULATIVE = (Kind.COUNTER, Kind.HISTOGRAM)


class ReadingIndex:
    """Readings of one snapshot and its derived readings, by key (in arrival order)."""

    __slots__ = ("raw", "derived", "shown")

    def __init__(self, snapshot: Snapshot, derived: list[Reading]) -> None:
        # every reading of the snapshot, whatever its kind or status (the rules)
        self.raw: dict[str, list[Reading]] = {}
        # derived readings (rates, quantiles, ratios)
        self.derived: dict[str, list[Reading]] = {}
        # what a user reads: raw readings but cumulative ones, then every derived one
        # (the Frame: the panes, the JSON)
        self.shown: dict[str, list[Reading]] = {}
        raw, shown = self.raw, self.shown
        cumulative: set[str] = set()     # keys with a counter or a histogram among them
        for s in snapshot.samples.values():
            for r in s.readings:
                key = r.key
                lst = raw.get(key)
                if lst is None:
                    raw[key] = [r]
                else:
                    lst.append(r)
                if r.kind in CUMULATIVE:
                    cumulative.add(key)
        for key, lst in raw.items():
            if key not in cumulative:     # the same list when nothing is left out (most keys)
                shown[key] = lst
                continue
            kept = [r for r in lst if r.kind not in CUMULATIVE]
            if kept:
                shown[key] = lst if len(kept) == len(lst) else kept
        for r in derived:
            lst = self.derived.get(r.key)
            if lst is None:
                self.derived[r.key] = [r]
            else:
                lst.append(r)
        for key, lst in self.derived.items():     # every derived reading is shown
            got = shown.get(key)
            shown[key] = list(lst) if got is None else got + lst
