"""The render context a pane draws a Frame through: lookups, finding tags, sparklines."""

from __future__ import annotations

import heapq
import textwrap
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from rich.text import Text

from infertop.evidence_text import subject_evidence
from infertop.findings import Evidence, Finding, Severity
from infertop.history import Series
from infertop.meta import ProcessMeta, ServerMeta
from infertop.model import Layer, Reading, Status
from infertop.pidmap import gpu_holders
from infertop.pipeline import Frame
from infertop.textclean import clean
from infertop.units import fmt_reading, sparkline

from ..options import CaptureSummaries
from ..zoom_table import ZOOM_ROWS, TableView
from .cells import EMPTY, Cell, TickMemo, fast_text, str_cell

# Sparklines are trends: they are redrawn every TREND_SECONDS of the source's clock, not on
# every tick (values are).  A line whose only change is a sparkline sliding one block is
# then left alone four ticks out of five: fewer lines repainted, fewer bytes to the
# terminal, less CPU at idle (issue 11).  The trend lags its values by under 5 s.
TREND_SECONDS = 5.0


class FrameLookups:
    """One Frame's lookups, shared by the panes that draw it: built once a tick (each
    is computed on first use and kept in ``extras_cache``), read by six panes.  Nothing
    about one pane is kept here: a pane draws through a PaneContext of its own
    (``pane()``), so no pane's state can leak into the next pane's draw."""

    def __init__(self, frame: Frame, styles: dict[str, str], *,
                 summaries: CaptureSummaries | None = None, trends: dict | None = None,
                 extras_cache: dict[Any, Any] | None = None,
                 values: TickMemo | None = None) -> None:
        self.frame = frame
        self.styles = styles          # role -> Rich style, from the theme (themes/)
        # capture results the panes show (py-spy, nsys, GIL)
        self.summaries = summaries if summaries is not None else CaptureSummaries()
        # per-frame derived lookups (the panes of a tick share them)
        self.extras_cache: dict[Any, Any] = {} if extras_cache is None else extras_cache
        # sparklines drawn in this TREND_SECONDS slot, kept across frames by the app (a
        # fresh one draws every sparkline from the newest values)
        self.trends: dict = {} if trends is None else trends
        # value cells (value_text) by what they show, kept by the app for two ticks (a
        # fresh one: made anew); ``turn()`` it once a tick
        self.values = TickMemo() if values is None else values

    def pane(self, *, layer: Layer | None = None, zoom_key: str = "",
             view: TableView | None = None, wide: bool = False, height: int = 0,
             width: int = 0) -> PaneContext:
        """A context for one pane's draw: these lookups, and that pane's own state."""
        return PaneContext(self.frame, self.styles, summaries=self.summaries,
                           trends=self.trends, extras_cache=self.extras_cache,
                           values=self.values, layer=layer,
                           zoom_key=zoom_key, view=view, wide=wide, height=height,
                           width=width)

    def subjects(self) -> dict[str, list[tuple[Evidence, Finding]]]:
        """key -> (evidence, finding) for the reading each finding is *about* (once per frame).

        The subject is what a person should look at: evidence that crossed a threshold, not
        the context readings a finding quotes; for a spread across a group (PAR-001 on GPUs
        0,1,2,3) it is the member farthest from the group's median, the straggler."""
        if "subjects" not in self.extras_cache:
            idx: dict[str, list[tuple[Evidence, Finding]]] = {}
            for f in self.frame.findings:
                for ev in subject_evidence(f):
                    idx.setdefault(ev.key, []).append((ev, f))
            self.extras_cache["subjects"] = idx
        return self.extras_cache["subjects"]

    def severity_of(self, code: str) -> int:
        ranks = self.extras_cache.get("code_ranks")
        if ranks is None:
            ranks = {}
            for f in self.frame.findings:
                ranks[f.code] = max(ranks.get(f.code, 0), f.severity.rank)
            self.extras_cache["code_ranks"] = ranks
        return ranks.get(code, 0)

    def readings(self, key: str, **labels: str) -> list[Reading]:
        """Readings of ``key`` with these labels; indexed per (key, label names) once per
        frame, so a pane asking once per row stays linear (20,000 engine series)."""
        if not labels:
            return self.frame.by_key(key)
        if len(labels) == 1:     # most lookups (gpu=, pid=): the frame's index, built in
            (name, value), = labels.items()      # the pipeline's thread (Frame.prepare)
            return self.frame.by_label(key, name).get(str(value), [])
        names = tuple(sorted(labels))
        return self.frame.by_labels(key, names).get(tuple(str(labels[n]) for n in names), [])

    def distinct(self, key: str) -> int:
        """1 if one engine (instance, engine) reports ``key``, 2 if more (then the rows of
        that key say which engine they are); stops at the second: O(1) for 20,000."""
        ck = ("n", key)
        if ck not in self.extras_cache:
            seen: set = set()
            for r in self.frame.by_key(key):
                seen.add((r.label("instance"), r.label("engine")))
                if len(seen) > 1:
                    break
            self.extras_cache[ck] = len(seen)
        return self.extras_cache[ck]

    def exact(self, key: str, labels: tuple) -> Reading | None:
        """The reading of ``key`` with exactly these labels (a dict lookup: the same engine's
        other readings carry the same labels)."""
        return self.frame.by_exact_labels(key).get(labels)

    def engine_tag(self, r: Reading) -> str:
        """' e1' / ' :8001 e1': which engine a repeated reading belongs to ('' if only one)."""
        if self.distinct(r.key) <= 1:
            return ""
        inst, eng = r.label("instance"), r.label("engine")
        many = self.distinct_instances(r.key) > 1
        box = self.container_of(inst) if inst and many else ""
        where = f" {box}" if box else f" :{inst.rsplit(':', 1)[-1]}" if inst and many else ""
        return where + (f" e{eng}" if eng else "")

    def container_of(self, instance: str) -> str:
        """The container or namespace/pod of the server read at ``instance`` ('' on the
        host): on a node with a server per pod, engines are named by their pod."""
        ck = ("c",)
        if ck not in self.extras_cache:
            self.extras_cache[ck] = {
                n.split(":", 1)[1]: clean(s.meta.container) for n, s in
                self.frame.snapshot.samples.items()
                if n.startswith("server:") and isinstance(s.meta, ServerMeta)
                and s.meta.container}
        return self.extras_cache[ck].get(instance, "")

    def distinct_instances(self, key: str) -> int:
        """How many servers (each --url is a source ``server:<instance>``) are read; a
        count of sources, not a pass over 20,000 engine series."""
        ck = ("i",)
        if ck not in self.extras_cache:
            self.extras_cache[ck] = sum(1 for n in self.frame.snapshot.samples
                                        if n.startswith("server:"))
        return self.extras_cache[ck]

    def flagged_values(self, label: str) -> set[str]:
        """Values of ``label`` (gpu, pid, engine) that some finding is about."""
        ck = ("f", label)
        if ck not in self.extras_cache:
            self.extras_cache[ck] = {v for pairs in self.subjects().values() for ev, _ in pairs
                                     for k, v in ev.labels if k == label}
        return self.extras_cache[ck]

    def one(self, key: str, **labels: str) -> Reading | None:
        if len(labels) == 1:     # readings(), inline: ~220 calls a tick, most by gpu= or pid=
            (name, value), = labels.items()
            rs = self.frame.by_label(key, name).get(str(value))
        else:
            rs = self.readings(key, **labels)
        return rs[0] if rs else None

    def spark(self, key: str, width: int = 16, lo: float | None = None, hi: float | None = None,
              /, **labels: str) -> Cell:
        history = self.frame.history
        # a new History (scenario switch, replay seek) is a new slot too
        slot = (id(history), int(history.now // TREND_SECONDS))
        trends = self.trends
        if trends.get("slot") != slot:
            trends.clear()
            trends["slot"] = slot
        if len(labels) == 1:      # most: gpu= or pid= (no sort)
            (name, value), = labels.items()
            labels_t: tuple = ((name, str(value)),)
        else:
            labels_t = tuple(sorted((k, str(v)) for k, v in labels.items()))
        ck = (key, labels_t, width, lo, hi)
        got = trends.get(ck)
        if got is None:
            exact = history.get(key, labels_t)
            series = [exact] if exact is not None else self.series(key, **labels)
            got = trends[ck] = sparkline(series[0].tail(width), width, lo, hi) if series else ""
        return str_cell(got, self.styles["spark"]) if got else EMPTY

    def series(self, key: str, **labels: str) -> list[Series]:
        if not labels:
            return self.frame.history.find(key)
        names = tuple(sorted(labels))
        ik = ("s", key, names)
        idx = self.extras_cache.get(ik)
        if idx is None:   # one pass over the key's series, then a dict lookup per row
            idx = {}
            for s in self.frame.history.find(key):
                idx.setdefault(tuple(s.label(n) for n in names), []).append(s)
            self.extras_cache[ik] = idx
        return idx.get(tuple(str(labels[n]) for n in names), [])

    def gpu_holders(self) -> tuple[dict[str, str], list[int]]:
        """NVML pid -> the server process (role) holding GPU memory, across PID namespaces,
        and the GPU pids outside the server's tree."""
        if "gpu_holders" not in self.extras_cache:
            names = {int(r.label("pid")): r.label("role") or r.label("name")
                     for r in self.readings("process.info") if r.label("pid").isdigit()}
            procs = [(int(r.label("gpu") or 0), int(r.label("pid")), r.value or 0.0)
                     for r in self.readings("process.gpu_mem_bytes") if r.label("pid").isdigit()]
            snap = self.frame.snapshot
            pm = snap.process_meta()
            held, outside = gpu_holders(list(pm.tree) if pm and pm.tree else list(names),
                                        procs, list(pm.pid_aliases) if pm else [], names)
            self.extras_cache["gpu_holders"] = ({str(k): v for k, v in held.items()}, outside)
        return self.extras_cache["gpu_holders"]

    def source_reason(self, prefix: str) -> str | None:
        """Why sources have nothing: capabilities, errors, or what the probe says it looked
        for; every matching source (several --url servers each get their line)."""
        snap = self.frame.snapshot
        why = [cap.reason for name, cap in snap.capabilities.items()
               if name.startswith(prefix) and not cap.available]
        for name, s in snap.samples.items():
            if not name.startswith(prefix):
                continue
            if s.status is not Status.OK:
                why.append(f"{s.status.value}: {s.reason}")
            elif s.reason:
                why.append(s.reason)
            elif isinstance(s.meta, ProcessMeta) and s.meta.reason:
                why.append(s.meta.reason)
        return "\n".join(why) or None


@lru_cache(maxsize=512)
def wrapped(text: str, width: int) -> str:
    """``text`` wrapped to ``width`` columns, each of its lines on its own (a pane's notes
    are the same from tick to tick: wrapped once)."""
    return "\n".join(ln for part in text.split("\n") for ln in textwrap.wrap(part, width) or [""])


# a value's style by its status (the rest: none)
_STATUS_ROLES = {Status.STALE: "stale", Status.ERROR: "crit", Status.UNSUPPORTED: "muted",
                 Status.NODATA: "muted"}


def styled_value(txt: str, style: str | Any, flag: tuple[str, str] | None,
                 styles: dict[str, str]) -> Cell:
    """A value's text in its status's style; flagged, in its finding's severity's and
    with the code after it (Text(txt, style), stylize(severity), append(" CODE"))."""
    if not flag:
        return Cell.of_text(txt, style)
    sev_style = styles[flag[0]]
    t = Text(txt, style=style)
    t.stylize(sev_style)
    t.append(f" {flag[1]}", style=sev_style)
    return Cell.from_text(t)


class PaneContext(FrameLookups):
    """What one pane draws through: its Frame's shared lookups (FrameLookups) and this
    pane's own state, which no other pane sees: its layer, its size, its zoom, and the
    finding subjects it tagged while drawing.  One per pane and draw (LayerPane.draw)."""

    def __init__(self, frame: Frame, styles: dict[str, str], *, wide: bool = False,
                 height: int = 0, width: int = 0, layer: Layer | None = None,
                 zoom_key: str = "", view: TableView | None = None,
                 summaries: CaptureSummaries | None = None, trends: dict | None = None,
                 extras_cache: dict[Any, Any] | None = None,
                 values: TickMemo | None = None) -> None:
        super().__init__(frame, styles, summaries=summaries, trends=trends,
                         extras_cache=extras_cache, values=values)
        self.wide = wide              # zoomed or large terminal: show more columns/rows
        self.height = height          # content rows of the pane being drawn
        self.width = width            # content columns of the pane being drawn
        self.layer = layer            # the layer of the pane being drawn
        self.zoom_key = zoom_key      # the key that zooms the pane being drawn ("" = zoomed)
        self.view = view              # a zoomed pane's sort/filter/scroll (None: not zoomed)
        self.tagged: set = set()      # subject evidence tagged in this pane's draw
        self._subjects: dict | None = None   # subjects(), kept for flag()

    def flag(self, key: str, labels: Iterable[tuple[str, str]] = ()) -> tuple[str, str] | None:
        """(severity, code) of the worst active finding whose subject is this reading."""
        subjects = self._subjects
        if subjects is None:
            subjects = self._subjects = self.subjects()
        about = subjects.get(key)
        if not about:       # most readings: no finding is about their key
            return None
        want = dict(labels)
        best: tuple[Severity, str] | None = None
        hit: Evidence | None = None
        for ev, f in about:
            if any(want.get(k) != v for k, v in ev.labels if k in want):
                continue
            if best is None or f.severity > best[0]:
                best, hit = (f.severity, f.code), ev
        if best is None:
            return None
        self.tagged.add((hit, best[1]))
        return best[0].value, best[1]

    def untagged(self, layer: Layer) -> list[tuple[Evidence, Finding]]:
        """This layer's finding subjects the pane drew no tag for (a column it does not
        show at this width, a direction it does not show): they get a line of their own."""
        return [(ev, f) for f in self.frame.findings_for(layer) for ev in subject_evidence(f)
                if (ev, f.code) not in self.tagged]

    def top(self, rs: list[Reading], n: int, relevance=None) -> tuple[list[Reading], int]:
        """Flagged readings, then the ``n`` most relevant (default: largest value) in their
        original order, and how many were left out: a pane builds rows only for what it
        can show, in time linear in the readings."""
        if len(rs) <= n:
            return rs, 0
        flagged = [r for r in rs if self.flag(r.key, r.labels)] \
            if rs and rs[0].key in self.subjects() else []
        rest = [r for r in rs if not self.flag(r.key, r.labels)] if flagged else rs
        keyf = relevance or (lambda r: r.value if r.ok and r.value is not None else -1.0)
        chosen = {id(r) for r in heapq.nlargest(max(0, n - len(flagged)), rest, key=keyf)}
        keep = flagged + [r for r in rest if id(r) in chosen]
        return keep, len(rs) - len(keep)

    def pick(self, items: list[str], label: str, n: int | None = None) -> tuple[list[str], int]:
        """The items (GPU indices, pids) worth a row: those a finding is about, then the
        first others up to ``n`` (default: the pane's height); and how many were left out.
        Rows are built only for these, so drawing is linear in what is shown."""
        n = self.row_cap if n is None else n
        if len(items) <= n:
            return items, 0
        flagged = self.flagged_values(label)
        first = [i for i in items if i in flagged]
        rest = [i for i in items if i not in flagged][:max(0, n - len(first))]
        keep = set(first) | set(rest)
        return [i for i in items if i in keep], len(items) - len(keep)

    @property
    def row_cap(self) -> int:
        """At most this many rows of one table are worth building (the pane's height; a
        zoomed pane's tables scroll, sort and filter: up to ZOOM_ROWS rows)."""
        if self.view is not None:
            return ZOOM_ROWS
        return max(4, self.height) if self.height else 400

    def value_text(self, r: Reading | None, *, key: str | None = None) -> Cell:
        """A reading's value styled by status and by any finding that points at it (its
        code after it).  The Cell is shared (immutable): kept in ``values`` by what
        decides it (status, value, unit, reason, text, the finding's tag, the styles), so
        a value shown every tick is formatted once while it does not change."""
        styles = self.styles
        if r is None:
            flag = self.flag(key or "", ())
            style = ""
            mk: tuple = (None, flag, styles[flag[0]] if flag else None)
        else:
            flag = self.flag(key or r.key, r.labels)
            status = r.status
            role = _STATUS_ROLES.get(status)
            style = styles[role] if role else ""
            v = r.value
            # 0 and -0.0 are equal keys but print "0" and "-0": zeros by their repr
            mk = (status, v if v else repr(v), r.unit, r.reason, r.text, style, flag,
                  styles[flag[0]] if flag else None)
        values = self.values       # TickMemo.get, inline (~170 calls a tick)
        got = values.now.get(mk)
        if got is None:
            got = values.before.get(mk)
            if got is None:
                got = styled_value(fmt_reading(r), style, flag, styles)
            values.now[mk] = got
        return got

    def note(self, text: str, role: str = "muted") -> Text:
        """A message for the pane, wrapped to its width (a reason is worth reading whole)."""
        return fast_text(wrapped(text, max(20, self.width or 76)), self.styles[role])
