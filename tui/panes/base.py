"""What every layer pane shares: the render context, inline finding highlights, rows.

A pane is a Static whose content is rebuilt from a Frame by a pure ``render`` function;
panes never do I/O and never call probes.  Severity shows twice: the pane's CSS class
(border colour, from the theme) and the flagged reading itself (styled, code beside it).
"""

from __future__ import annotations

import heapq
import re
import statistics
import textwrap
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from rich.console import RenderableType
from rich.containers import Lines
from rich.segment import Segment
from rich.style import Style as RichStyle
from rich.text import Span, Text
from textual.app import RenderResult
from textual.content import Content
from textual.geometry import Region
from textual.reactive import Reactive
from textual.strip import Strip
from textual.visual import Visual, visualize
from textual.widgets import Static

from infertop.history import Series
from infertop.model import Layer, Reading, Status
from infertop.findings import Evidence, Finding, Severity
from infertop.pidmap import gpu_holders
from infertop.pipeline import Frame
from infertop.units import fmt_reading, sparkline

from ..options import CaptureSummaries
from ..zoom_table import (TABLE_BINDINGS, ZOOM_ROWS, TableView, ZoomTableKeys, arrowed,
                          position_line, row_text, view_order)

# Sparklines are trends: they are redrawn every TREND_SECONDS of the source's clock, not on
# every tick (values are).  A line whose only change is a sparkline sliding one block is
# then left alone four ticks out of five: fewer lines repainted, fewer bytes to the
# terminal, less CPU at idle (issue 11).  The trend lags its values by under 5 s.
TREND_SECONDS = 5.0


@dataclass
class PaneContext:
    frame: Frame
    styles: dict[str, str]          # role -> Rich style, from the theme (themes/)
    wide: bool = False              # zoomed or large terminal: show more columns/rows
    height: int = 0                 # content rows of the pane being drawn
    width: int = 0                  # content columns of the pane being drawn
    summaries: CaptureSummaries = field(default_factory=CaptureSummaries)  # capture results
    extras_cache: dict[Any, Any] = field(default_factory=dict)  # per-frame derived lookups
    zoom_key: str = ""              # the key that zooms the pane being drawn ("" = zoomed)
    layer: Layer | None = None      # the layer of the pane being drawn
    tagged: set = field(default_factory=set)   # subject evidence tagged in this pane's draw
    view: TableView | None = None   # a zoomed pane's sort/filter/scroll (None: not zoomed)
    # sparklines drawn in this TREND_SECONDS slot, kept across frames by the app (a fresh
    # context draws every sparkline from the newest values)
    trends: dict = field(default_factory=dict)

    # -- findings -----------------------------------------------------------------------
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

    def flag(self, key: str, labels: Iterable[tuple[str, str]] = ()) -> tuple[str, str] | None:
        """(severity, code) of the worst active finding whose subject is this reading."""
        want = dict(labels)
        best: tuple[Severity, str] | None = None
        hit: Evidence | None = None
        for ev, f in self.subjects().get(key, ()):
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

    def severity_of(self, code: str) -> int:
        ranks = self.extras_cache.get("code_ranks")
        if ranks is None:
            ranks = {}
            for f in self.frame.findings:
                ranks[f.code] = max(ranks.get(f.code, 0), f.severity.rank)
            self.extras_cache["code_ranks"] = ranks
        return ranks.get(code, 0)

    # -- readings -----------------------------------------------------------------------
    def readings(self, key: str, **labels: str) -> list[Reading]:
        """Readings of ``key`` with these labels; indexed per (key, label names) once per
        frame, so a pane asking once per row stays linear (20,000 engine series)."""
        rs = self.frame.by_key(key)
        if not labels:
            return rs
        if len(labels) == 1:     # most lookups (gpu=, pid=): the frame's index, built in
            (name, value), = labels.items()      # the pipeline's thread (Frame.prepare)
            return self.frame.by_label(key, name).get(str(value), [])
        names = tuple(sorted(labels))
        ik = ("r", key, names)
        idx = self.extras_cache.get(ik)
        if idx is None:
            idx = {}
            for r in rs:
                idx.setdefault(tuple(r.label(n) for n in names), []).append(r)
            self.extras_cache[ik] = idx
        return idx.get(tuple(str(labels[n]) for n in names), [])

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
        ck = ("x", key)
        idx = self.extras_cache.get(ck)
        if idx is None:
            idx = self.extras_cache[ck] = {r.labels: r for r in self.frame.by_key(key)}
        return idx.get(labels)

    def engine_tag(self, r: Reading) -> str:
        """' e1' / ' :8001 e1': which engine a repeated reading belongs to ('' if only one)."""
        if self.distinct(r.key) <= 1:
            return ""
        inst, eng = r.label("instance"), r.label("engine")
        many = self.distinct_instances(r.key) > 1
        where = f" :{inst.rsplit(':', 1)[-1]}" if inst and many else ""
        return where + (f" e{eng}" if eng else "")

    def distinct_instances(self, key: str) -> int:
        """How many servers (each --url is a source ``server:<instance>``) are read; a
        count of sources, not a pass over 20,000 engine series."""
        ck = ("i",)
        if ck not in self.extras_cache:
            self.extras_cache[ck] = sum(1 for n in self.frame.snapshot.samples
                                        if n.startswith("server:"))
        return self.extras_cache[ck]

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

    def flagged_values(self, label: str) -> set[str]:
        """Values of ``label`` (gpu, pid, engine) that some finding is about."""
        ck = ("f", label)
        if ck not in self.extras_cache:
            self.extras_cache[ck] = {v for pairs in self.subjects().values() for ev, _ in pairs
                                     for k, v in ev.labels if k == label}
        return self.extras_cache[ck]

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

    def one(self, key: str, **labels: str) -> Reading | None:
        rs = self.readings(key, **labels)
        return rs[0] if rs else None

    def value_text(self, r: Reading | None, *, key: str | None = None) -> Text:
        """A reading's value styled by status and by any finding that points at it."""
        txt = fmt_reading(r)
        style = ""
        if r is not None:
            if r.status is Status.STALE:
                style = self.styles["stale"]
            elif r.status in (Status.ERROR,):
                style = self.styles["crit"]
            elif r.status in (Status.UNSUPPORTED, Status.NODATA):
                style = self.styles["muted"]
        flag = self.flag(key or (r.key if r else ""), r.labels if r else ())
        t = Text(txt, style=style)
        if flag:
            sev, code = flag
            t.stylize(self.styles[sev])
            t.append(f" {code}", style=self.styles[sev])
        return t

    def spark(self, key: str, width: int = 16, lo: float | None = None, hi: float | None = None,
              /, **labels: str) -> Text:
        history = self.frame.history
        # a new History (scenario switch, replay seek) is a new slot too
        slot = (id(history), int(history.now // TREND_SECONDS))
        trends = self.trends
        if trends.get("slot") != slot:
            trends.clear()
            trends["slot"] = slot
        labels_t = tuple(sorted((k, str(v)) for k, v in labels.items()))
        ck = (key, labels_t, width, lo, hi)
        got = trends.get(ck)
        if got is None:
            exact = history.get(key, labels_t)
            series = [exact] if exact is not None else self.series(key, **labels)
            got = trends[ck] = sparkline(series[0].tail(width), width, lo, hi) if series else ""
        return Text(got, style=self.styles["spark"]) if got else Text("")

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
            held, outside = gpu_holders(snap.meta("tree") or list(names), procs,
                                        [tuple(a) for a in snap.meta("pid_aliases") or []], names)
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
            elif s.reason or s.meta.get("reason"):
                why.append(s.reason or s.meta["reason"])
        return "\n".join(why) or None

    def note(self, text: str, role: str = "muted") -> Text:
        """A message for the pane, wrapped to its width (a reason is worth reading whole)."""
        width = max(20, self.width or 76)
        lines = [ln for part in text.split("\n") for ln in textwrap.wrap(part, width) or [""]]
        return Text("\n".join(lines), style=self.styles[role])


CODE_RE = re.compile(r"\b[A-Z]{2,5}-\d{3}\b")   # a finding code drawn beside a reading


def subject_evidence(f: Finding) -> list[Evidence]:
    """The evidence a finding is about (see ``PaneContext.subjects``).

    A triggering reading (one with a threshold) is its own subject, unless it aggregates a
    group (a label such as ``gpus=0,1,2,3``): then the group member among the context
    readings that is farthest from the members' median is.  A finding with only context
    readings is about all of them."""
    trig = [e for e in f.evidence if e.threshold is not None]
    if not trig:
        return list(f.evidence)
    out: list[Evidence] = []
    for e in trig:
        if not any("," in v for _, v in e.labels):
            out.append(e)
            continue
        members = [c for c in f.evidence if c.threshold is None and c.key == e.key
                   and isinstance(c.value, (int, float))]
        if len(members) < 2:
            out.append(e)
            continue
        median = statistics.median(float(c.value) for c in members)
        out.append(max(members, key=lambda c: abs(float(c.value) - median)))
    return out


class Columns:
    """A light table rendered straight to Text.

    Rich's Table measures every cell on every paint; at one repaint a second for six
    panes that was most of infertop's CPU.  Panes only need left-aligned columns, so
    this pads cells to the widest one (capped) and joins them: about 10x cheaper, and a
    Text compares by value, so an unchanged pane is not repainted at all.
    """

    def __init__(self, headers: list[str] | None = None, *, header_style: str = "",
                 widths: list[int] | None = None, max_width: int = 26, gap: int = 2,
                 cut: tuple[int, ...] = (0,), drop: tuple[int, ...] | None = None) -> None:
        self.headers = headers
        # fitting a table into a narrow pane (``fit_columns``): a value with its unit is
        # never cut.  Labels (``cut``: the first column, commands) shrink first; then whole
        # columns go, in the order ``drop`` names (default: from the right)
        self.cut = cut
        self.cut_min = CUT_MIN       # a cut column keeps at least this many columns
        self.drop = drop
        self.header_style = header_style
        self.widths = widths            # fixed widths (None: fit to content)
        self.max_width = max_width
        self.gap = gap
        self.rows: list[list[Text]] = []
        self.codes: list[tuple[str, ...]] = []   # finding codes drawn in each row
        self.prio: list[float] = []              # lower is kept first when rows are cut
        self.more = 0           # rows known but never built (the pane could not show them)
        self.main = False       # the table a zoomed pane's keys act on first
        self.hidden = 0         # rows the last to_text left out (built or not)

    def add_row(self, *cells: RenderableType | str, prio: float = 0.0) -> None:
        row = [c if isinstance(c, Text) else Text(str(c)) for c in cells]
        self.rows.append(row)
        self.codes.append(tuple(m for c in row for m in CODE_RE.findall(c.plain)))
        self.prio.append(prio)

    def __bool__(self) -> bool:
        return bool(self.rows)

    def lines(self) -> int:
        return len(self.rows) + (1 if self.headers else 0) + (1 if self.more else 0)

    def flagged_first(self, rank=None) -> list[int]:
        """Row order: rows tagged with a finding first (worst first), then the rest."""
        order = range(len(self.rows))
        if not any(self.codes):
            return list(order)
        rank = rank or (lambda code: 1)
        return sorted(order, key=lambda i: -max((rank(c) for c in self.codes[i]), default=0))

    def to_text(self, limit: int | None = None, rank=None, hint: str = "",
                width: int = 0, say_more: bool = True) -> Text:
        """The table in at most ``limit`` lines: flagged rows first and never cut before
        the others, then the rest by priority; a last line says how many rows are not
        shown (``hint`` says how to see them).  ``say_more=False``: no such line, the
        count is left in ``self.hidden`` (``fit`` says one "+N more" for the whole pane)."""
        order = self.flagged_first(rank)
        head = 1 if self.headers else 0
        hidden = self.more
        extra = 1 if say_more else 0              # the line for "+N more"
        if limit is not None and head + len(order) + (extra if hidden else 0) > limit:
            if limit < head + 1 + extra:          # no room for a row: only the count
                self.hidden = len(order) + hidden
                return more_line(self.hidden, hint) if say_more else Text("", end="")
            room = limit - head - extra
            nflag = sum(1 for i in order if self.codes[i])
            keep_flag = order[:min(nflag, room)]
            others = sorted(order[nflag:], key=lambda i: (self.prio[i], i))[:max(0, room - nflag)]
            kept = set(keep_flag) | set(others)
            hidden += len(order) - len(kept)
            order = keep_flag + sorted(others)
        self.hidden = hidden
        out = self._draw(order, None, width)
        if hidden and say_more:
            out.append("\n")
            out.append(more_line(hidden, hint))
        return out

    def window_text(self, view: TableView, limit: int, rank=None, width: int = 0,
                    styles: dict[str, str] | None = None) -> Text:
        """A zoomed pane's table in ``limit`` lines: the rows ``view`` filters and sorts,
        from its scroll offset, and a last line saying where the window is.  Only the
        window's rows are drawn (column widths too come from them)."""
        order = view_order(self.rows, self.flagged_first(rank), view)
        head = 1 if self.headers else 0
        room = max(1, limit - head - 1)
        view.headers = list(self.headers or [])
        view.rows, view.page = len(order), room
        view.clamp()
        first = view.offset
        shown = order[first:first + room]
        above = sum(1 for i in order[:first] if self.codes[i])
        below = sum(1 for i in order[first + room:] if self.codes[i])
        self.hidden = 0          # the position line says what is not on screen
        out = self._draw(shown, arrowed(view.headers, view) if self.headers else None,
                         width, skip=view.col_offset)
        view.columns = len(view.headers)
        hidden_flags = sum(1 for c in self.codes if c) - sum(1 for i in order if self.codes[i])
        line = position_line(view, first, len(shown), len(order), above, below, self.more,
                             hidden_flags)
        if out.plain or self.headers:
            out.append("\n")
        out.append(line, style=(styles or {}).get("muted", "italic"))
        return out

    def _draw(self, order: list[int], headers: list[str] | None = None,
              width: int = 0, skip: int = 0) -> Text:
        """The header and the rows ``order`` names, padded into columns (``skip``: that
        many columns after the first are scrolled out of view, ←/→ on a zoomed pane)."""
        headers = self.headers if headers is None else headers
        head = 1 if headers else 0
        rows = [self.rows[i] for i in order]
        if headers:
            rows.insert(0, [Text(h, style=self.header_style) for h in headers])
        if skip:
            rows = [r[:1] + r[1 + skip:] for r in rows]
        ncol = max((len(r) for r in rows), default=0)
        if self.widths:
            widths = list(self.widths) + [self.max_width] * (ncol - len(self.widths))
        else:
            widths = [min(self.max_width, max((r[i].cell_len for r in rows if i < len(r)),
                                              default=0)) for i in range(ncol)]
        coded: set[int] = set()
        for r, row in zip(order, rows[head:]):   # a finding's code is never cut off
            if self.codes[r]:
                for i, cell in enumerate(row):
                    if CODE_RE.search(cell.plain):
                        coded.add(i)
                        if i < len(widths) - 1:
                            widths[i] = max(widths[i], cell.cell_len)
        if width and _table_width(widths, self.gap) > width:
            keep = fit_columns(widths, width, self.gap, self.cut, self.drop, coded,
                               self.cut_min)
            if len(keep) < ncol:
                rows = [[r[i] for i in keep if i < len(r)] for r in rows]
                widths = [widths[i] for i in keep]
        # the whole table as one plain string and one list of spans, offset by hand: a
        # Text.append per cell cleans and measures each piece again (most of a pane's cost)
        pad = " " * self.gap
        codes = [()] * head + [self.codes[r] for r in order]
        parts: list[str] = []
        spans: list[Span] = []
        pos = 0
        for n, row in enumerate(rows):
            if n:
                parts.append("\n")
                pos += 1
            if width and codes[n]:
                line = self._row_text(row, widths, pad)
                if line.cell_len > width:
                    line = _keep_codes(line, codes[n], width)
                pos = _put(line, pos, parts, spans)
                continue
            last = len(row) - 1
            for i, cell in enumerate(row):
                if i:
                    parts.append(pad)
                    pos += len(pad)
                w = widths[i]
                cells = cell.cell_len
                if cells > w:
                    cell = cut_cell(cell, w)
                    cells = cell.cell_len
                pos = _put(cell, pos, parts, spans)
                if i < last and w > cells:
                    parts.append(" " * (w - cells))
                    pos += w - cells
        return Text("".join(parts), no_wrap=True, overflow="ellipsis", end="", spans=spans)

    @staticmethod
    def _row_text(row: list[Text], widths: list[int], pad: str) -> Text:
        """One row as a Text of its own (a flagged row that may need cutting to keep its
        finding code in view)."""
        line = Text(no_wrap=True, end="")
        for i, cell in enumerate(row):
            if i:
                line.append(pad)
            w = widths[i]
            if cell.cell_len > w:
                cell = cut_cell(cell, w)
            line.append_text(cell)
            if i < len(row) - 1:
                line.append(" " * (w - cell.cell_len))
        return line


def cut_cell(cell: Text, w: int) -> Text:
    """``cell`` cut to ``w`` columns with a cut mark, never inside a number: "GPU 12…"
    would read as a value, so the cut moves back before the digits ("GPU …")."""
    out = cell.copy()
    out.truncate(w, overflow="ellipsis")
    plain = out.plain
    if len(plain) >= 2 and plain.endswith("…") and plain[-2] in DIGITS:
        keep = len(plain) - 1
        while keep and plain[keep - 1] in DIGITS:
            keep -= 1
        out = out[:keep]
        out.append("…")
    return out


DIGITS = frozenset("0123456789.,")


def fit_lines(text: Text, width: int) -> Text:
    """A free-form part of a pane (a line of readings, a note) in ``width`` columns: a
    line too long loses whole fields from its end (fields are two spaces apart: "run 19
    wait 222  queue p99 2.1 min"), then is cut between words, never inside a number."""
    if text.cell_len <= width and "\n" not in text.plain:
        return text
    lines = text.split("\n", allow_blank=True)
    if all(line.cell_len <= width for line in lines):
        return text
    out = []
    for line in lines:
        if line.cell_len > width:
            plain = line.plain
            cut = plain.rfind("  ", 0, width)
            if cut <= 0:
                cut = plain.rfind(" ", 0, width - 1)
                line = line[:cut].copy() if cut > 0 else cut_cell(line, width)
                if cut > 0:
                    line.append(" …")
            else:
                line = line[:cut]
            line.rstrip()
        out.append(line)
    return Text("\n", no_wrap=True, overflow="ellipsis", end="").join(out)


def _table_width(widths: list[int], gap: int) -> int:
    return sum(widths) + gap * max(0, len(widths) - 1)


CUT_MIN = 6     # a label shrinks to this many columns ("0 H10…") before a column goes


def fit_columns(widths: list[int], width: int, gap: int, cut: tuple[int, ...],
                drop: tuple[int, ...] | None, coded: set[int],
                cut_min: int = 6) -> list[int]:
    """Make a table ``width`` columns wide without cutting a value: shrink the cuttable
    columns (``cut``: labels, commands; ``widths`` is changed in place) to CUT_MIN, then
    leave out whole columns in ``drop``'s order (default right to left), a column holding
    a finding's code last; then give what is left over back to the cut columns.  Returns
    the columns kept, in order.  Column 0 always stays (it says what the row is)."""
    n = len(widths)
    natural = list(widths)
    for i in cut:
        if i < n:
            widths[i] = min(widths[i], cut_min)
    keep = list(range(n))
    order = [i for i in (drop if drop is not None else range(n - 1, 0, -1)) if 0 < i < n]
    order += [i for i in range(n - 1, 0, -1) if i not in order]   # then any other
    order = [i for i in order if i not in coded] + [i for i in order if i in coded]
    for i in order:
        if _table_width([widths[k] for k in keep], gap) <= width:
            break
        keep.remove(i)
    spare = width - _table_width([widths[k] for k in keep], gap)
    for i in cut:
        if i in keep and spare > 0:
            grow = min(spare, natural[i] - widths[i])
            widths[i] += grow
            spare -= grow
    return keep


def at_row(strip: Strip, y: int) -> Strip:
    """``strip`` (rendered as row 0) with the selection offsets of row ``y``."""
    if not y:
        return strip
    out = []
    for seg in strip:
        st = seg.style
        if st is not None and st._meta is not None and "offset" in st.meta:
            ox, oy = st.meta["offset"]
            st = st + RichStyle.from_meta({"offset": (ox, oy + y)})
        out.append(Segment(seg.text, st, seg.control))
    return Strip(out, strip.cell_length)


def _put(cell: Text, pos: int, parts: list[str], spans: list[Span]) -> int:
    """Append ``cell``'s text and its styles (shifted to ``pos``) to a line being built;
    returns the position after it."""
    plain = cell.plain
    end = pos + len(plain)
    if cell.style:
        spans.append(Span(pos, end, cell.style))
    for sp in cell.spans:
        spans.append(Span(pos + sp.start, pos + sp.end, sp.style))
    parts.append(plain)
    return end


def _keep_codes(line: Text, codes: tuple[str, ...], width: int) -> Text:
    """A flagged row wider than the pane: cut it before the edge so that its finding
    codes stay visible at the end (the widget would cut them off otherwise)."""
    tail = " " + " ".join(dict.fromkeys(codes))
    start = line.plain.find(codes[0])
    if 0 <= start and start + len(tail) <= width:
        return line   # the code itself is on screen
    style = next((sp.style for sp in line.spans
                  if line.plain[sp.start:sp.end].strip() == codes[0]), "")
    cut = line[: max(1, width - len(tail) - 1)]
    cut.append("…")
    cut.append(tail, style=style)
    return cut


def more_line(n: int, hint: str = "") -> Text:
    return Text(f"+{n} more" + (f" ({hint})" if hint else ""), style="italic")


def kv_table(rows: Sequence[tuple[str, RenderableType, RenderableType | str]], *,
             label_width: int = 14, narrow: bool = False) -> Columns:
    """Label / value / sparkline rows, the common pane body (narrow: 80x24 panes)."""
    longest = max((len(r[0]) for r in rows), default=0)   # engine-labelled rows: " e1"
    t = Columns(widths=[max(12, min(20, longest)), 22, 10] if narrow else
                [max(label_width, min(24, longest)), 30, 24], gap=1)
    for label, value, extra in rows:
        t.add_row(label, value, extra)
    return t


def grid(headers: list[str], *, styles: dict[str, str], max_width: int = 26) -> Columns:
    return Columns(headers, header_style=styles["header"], max_width=max_width)


def group(*parts: "Text | Columns | None") -> Text:
    """Stack parts into one Text (one paint, comparable with the previous frame)."""
    out = Text(no_wrap=True, overflow="ellipsis", end="")
    first = True
    for p in parts:
        if p is None or (isinstance(p, Columns) and not p):
            continue
        if not first:
            out.append("\n")
        first = False
        out.append_text(p.to_text() if isinstance(p, Columns) else p)
    return out


class Optional:
    """A part of a pane that gives its rows away first when the pane is short
    (legends, trend tables, hints)."""

    def __init__(self, part: "Text | Columns | None") -> None:
        self.part = part


def _lines(part: "Text | Columns") -> int:
    return part.lines() if isinstance(part, Columns) else part.plain.count("\n") + 1


def subject_lines(ctx: PaneContext, missing: list[tuple[Evidence, Finding]]) -> Text | None:
    """One line per finding subject that no row of the pane tagged: the reading behind a
    finding is on screen even when the pane has no column for it at this size."""
    if not missing:
        return None
    out = Text(no_wrap=True, overflow="ellipsis", end="")
    for n, (ev, f) in enumerate(missing):
        if n:
            out.append("\n")
        sev = f.severity.value
        text = short_evidence(ev)
        if ctx.width and len(f.code) + 1 + len(text) > ctx.width:   # 80x24: the value
            text = short_evidence(ev, compare=False)     # stays, its threshold goes
        out.append(f.code, style=ctx.styles.get(sev, ""))
        out.append(" " + text, style=ctx.styles.get(sev, ""))
    return out


_SUFFIXES = ("_bytes_per_second", "_per_second", "_ratio", "_seconds", "_bytes", "_total",
             "_celsius", "_watts", "_hz")
_NAMESPACE_SHOWN = {"kv": "KV"}
_WHO = {"gpu": "GPU {}", "engine": "e{}", "pid": "pid {}", "gpus": "GPUs {}"}


def short_evidence(ev: Evidence, compare: bool = True) -> str:
    """'GPU 0 pcie rx 52.3 GiB/s >= 46.9 GiB/s': who, what, how much, against what; short
    enough for a 36-column pane (the full form is on the findings screen, `f`)."""
    who = " ".join(_WHO[k].format(v) for k, v in ev.labels if k in _WHO)
    ns, _, name = ev.key.partition(".")
    if ns in _NAMESPACE_SHOWN:   # "usage" alone says nothing: "KV usage"
        name = f"{_NAMESPACE_SHOWN[ns]}_{name}"
    for suf in _SUFFIXES:
        if name.endswith(suf):
            name = name[: -len(suf)]
            break
    plain = Evidence(ev.key, (), ev.value, ev.threshold if compare else None, ev.op,
                     ev.unit, bound=ev.bound).describe()
    return " ".join(x for x in (who, name.replace("_", " "), plain[len(ev.key) + 1:]) if x)


def fit(ctx: PaneContext, *parts: "Text | Columns | Optional | None") -> Text:
    """Stack parts into the pane's height.  When they do not fit, optional parts go
    first, then tables give up rows (flagged rows last), sharing the room fairly; a table
    with no row left is not drawn at all (a header alone says nothing), and one last line
    says how many rows the whole pane hides ("+N more (press K to zoom)").  A finding's
    row is never the one cut while others remain."""
    # Text, Columns or Optional(part) until the optional parts are settled below
    items: list[Any] = [p for p in parts if p is not None and not (isinstance(p, Columns) and not p)
             and not (isinstance(p, Optional) and (p.part is None or
                                                   (isinstance(p.part, Columns) and not p.part)))]
    height = ctx.height or 10**9
    hint = f"press {ctx.zoom_key} to zoom" if ctx.zoom_key else ""
    rank = ctx.severity_of

    def total(xs) -> int:
        return sum(_lines(x.part if isinstance(x, Optional) else x) for x in xs)

    if ctx.layer is not None:     # a finding's reading the pane has no column for
        lost = subject_lines(ctx, ctx.untagged(ctx.layer))
        if lost is not None:
            items.insert(0, lost)
    while total(items) > height and any(isinstance(x, Optional) for x in items):
        last = max(i for i, x in enumerate(items) if isinstance(x, Optional))
        items.pop(last)
    items = [x.part if isinstance(x, Optional) else x for x in items]
    tables = [i for i, x in enumerate(items) if isinstance(x, Columns)]
    # a table's own lines: header and rows (its "+N more" goes into the pane's one line)
    need = {i: items[i].lines() - (1 if items[i].more else 0) for i in tables}
    target = _view_target(ctx, items, tables, need)   # a zoomed pane's scrolling table
    fixed = sum(_lines(x) for x in items if not isinstance(x, Columns))
    limits: dict[int, int] = {}
    if fixed + sum(need.values()) + any(items[i].more for i in tables) > height:
        room = max(0, height - fixed - 1)     # one line for the pane's "+N more"
        # first what must show: a table's flagged rows with its header
        for i in tables:
            nflag = sum(1 for c in items[i].codes if c)
            head = 1 if items[i].headers else 0
            limits[i] = min(need[i], head + nflag) if nflag else 0
        if target is not None:    # it scrolls: its header, a row and its position line
            limits[target] = min(need[target], 3)
        room -= sum(limits.values())
        # then water-filling, small tables whole; a header needs a row under it (the
        # scrolling table last: it takes what is left)
        order = sorted(tables, key=lambda i: (i == target, need[i]))
        for n, i in enumerate(order):
            share = max(0, room) // (len(order) - n)
            give = min(need[i] - limits[i], share)
            head = 1 if items[i].headers else 0
            if limits[i] == 0 and give <= head:
                give = 0
            limits[i] += give
            room -= give
    if ctx.view is not None and ctx.width:    # zoomed: columns widen to the terminal
        for i in tables:                        # (fit_columns narrows what cannot fit)
            items[i].max_width = max(items[i].max_width, ctx.width - 10)
    lines: list[Text] = []
    hidden = 0
    for n, p in enumerate(items):
        if n == target:
            lines.append(p.window_text(ctx.view, limits.get(n, need[n]), rank, ctx.width,
                                       ctx.styles))
        elif isinstance(p, Columns):
            if limits.get(n, 1) <= 0:
                hidden += len(p.rows) + p.more
                continue
            t = p.to_text(limits.get(n), rank, hint, ctx.width, say_more=False)
            hidden += p.hidden
            if t.plain:
                lines.append(t)
        else:
            lines.append(fit_lines(p, ctx.width) if ctx.width else p)
    if hidden:
        lines.append(more_line(hidden, hint))
    return Text("\n", no_wrap=True, overflow="ellipsis", end="").join(lines)


def _view_target(ctx: PaneContext, items: list, tables: list[int],
                 need: dict[int, int]) -> int | None:
    """The table a zoomed pane's keys act on (``t`` cycles through the tables with a
    header), and the lines it wants: the rows its filter keeps plus its position line."""
    view = ctx.view
    if view is None:
        return None
    # the pane's main table first (memory: the process list), then the others in order
    sortable = sorted((i for i in tables if items[i].headers), key=lambda i: not items[i].main)
    view.tables = len(sortable)
    if not sortable:
        return None
    target = sortable[view.table % len(sortable)]
    t = items[target]
    q = view.query.strip().lower()
    n = sum(1 for r in t.rows if q in row_text(r)) if q else len(t.rows)
    need[target] = 1 + max(1, n) + 1
    view.last_rows = t.rows     # `s` looks at them to start a numeric column largest first
    return target


class LayerPane(ZoomTableKeys, Static):
    """A pane for one layer; subclasses set ``layer`` and implement ``render_frame``."""

    pane_layer: Layer = Layer.HARDWARE
    can_focus = True
    # no links in a pane: Textual would restyle every rendered line for them (112 -> 78 us
    # a changed line at 160x48, ~30 changed lines a tick)
    auto_links: Reactive[bool] = Reactive(False)
    BINDINGS = TABLE_BINDINGS     # zoomed: scroll, sort, filter its table (zoom_table.py)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("waiting for the first tick…", classes="pane", **kwargs)
        self.border_title = f"{self.pane_layer.position + 1} {self.pane_layer.value}"
        self.worst: str | None = None
        self.last_renderable: RenderableType | None = None
        self.table_view = TableView()        # kept while zoomed out and in again
        self._last_ctx: PaneContext | None = None
        self._subtitle = ""
        self._painted: RenderableType | None = None   # what render() hands Textual
        self._painted_lines: Lines | None = None   # ... line by line, when it is Text
        self._strips: dict[int, Strip] = {}     # row -> its rendered line (paint drops changed)
        self._strips_key: tuple = ()             # (width, base style) the strips were made at

    def render_frame(self, ctx: PaneContext) -> RenderableType:  # pragma: no cover - abstract
        raise NotImplementedError

    def draw(self, ctx: PaneContext, zoomed: bool = False,
             view: TableView | None = None) -> RenderableType:
        """render_frame with the context set for this pane (its layer, its zoom key, and
        when zoomed its table's sort, filter and scroll)."""
        ctx.layer = self.pane_layer
        ctx.zoom_key = "" if zoomed else str(self.pane_layer.position + 1)
        ctx.tagged = set()
        ctx.view = view if zoomed else None
        try:
            return self.render_frame(ctx)
        finally:
            ctx.view = None      # the context is shared by the six panes of a tick

    def _framed_by_title(self) -> bool:
        """The 80x24 layout: the pane has a title line and no bottom border (CSS)."""
        try:
            return self.screen.has_class("-small")
        except Exception:     # no running app (drawn from a test)
            return False

    def is_zoomed(self) -> bool:
        """Zoomed on the main screen (app.zoomed) or on a fleet node's screen."""
        try:
            holder = self.screen if hasattr(self.screen, "zoomed") else self.app
        except Exception:     # no running app (drawn from a test)
            return False
        return getattr(holder, "zoomed", None) == self.pane_layer.position

    def on_resize(self, _event) -> None:
        """Zoomed in or out, or the terminal resized: draw the frame again at the new size
        (the zoom key draws before the layout gives the pane its new size)."""
        if self._last_ctx is not None and self.display:
            self.redraw_table()

    def redraw_table(self) -> None:
        """A table key was pressed: draw the same frame again with the new view.  While a
        poll feeds the pipeline in its thread History is not read; that poll draws next."""
        ctx = self._last_ctx
        if ctx is None or getattr(self.app, "polling", False):
            return
        self.show(ctx)

    def show(self, ctx: PaneContext) -> None:
        findings = ctx.frame.findings_for(self.pane_layer)
        sev = max((f.severity for f in findings), default=None)
        worst = sev.value if sev is not None else None
        if worst != self.worst:
            for s in Severity:
                self.set_class(s.value == worst, f"sev-{s.value}")
            self.worst = worst
        ctx.wide = self.size.width >= 110
        ctx.height = max(1, self.size.height)   # Widget.size is the content area already
        ctx.width = max(1, self.size.width)
        codes = " ".join(sorted({f.code for f in findings}))
        subtitle = f"{worst.upper()} {codes}" if worst else ""
        if self._framed_by_title():   # 80x24: no bottom line, the codes go in the title
            subtitle = "|" + subtitle
        if subtitle != self._subtitle:   # setting it repaints the whole pane, even unchanged
            self._subtitle = subtitle
            name = f"{self.pane_layer.position + 1} {self.pane_layer.value}"
            if subtitle.startswith("|"):
                self.border_title = f"{name} {subtitle[1:]}" if subtitle[1:] else name
                self.border_subtitle = ""
            else:
                self.border_title, self.border_subtitle = name, subtitle
        zoomed = self.is_zoomed()
        self._last_ctx = ctx
        content = self.draw(ctx, zoomed, self.table_view)
        if isinstance(content, Columns):
            content = content.to_text()
        if content != self.last_renderable:   # Text compares by value: skip idle repaints
            self.last_renderable = content
            self.paint(content)

    def render(self) -> RenderResult:
        return self._painted if self._painted is not None else super().render()

    def paint(self, content: RenderableType) -> None:
        """Show ``content``, repainting only the lines that changed.

        Textual repaints (and writes to the terminal) the whole region of a widget that
        is refreshed; a pane changes a few values a tick, so refreshing only the changed
        lines' regions cuts the bytes written and the compositor's work several times
        over.  Line by line only when line n of the Text is row n of the pane: no line
        wraps (a no_wrap Text, or every line fits the width) and the line count is the
        same as before; otherwise the whole pane.  The grid fixes the size: never a re-layout."""
        old = self._painted_lines
        self._painted = content
        width = self.size.width
        new = content.split("\n", allow_blank=True) if isinstance(content, Text) else None
        if new is None or not isinstance(content, Text) or len(new) > self.size.height or \
                (not content.no_wrap and any(line.cell_len > width for line in new)):
            self._painted_lines = None   # wraps, or not Text: Textual renders it whole
            self._strips.clear()
            self.refresh()
            return
        self._painted_lines = new
        if old is None or len(old) != len(new):
            self._strips.clear()
            self.refresh()
            return
        changed = [y for y, (a, b) in enumerate(zip(old, new)) if a != b]
        for y in changed:
            self._strips.pop(y, None)
        if changed:
            self.refresh(*(Region(0, y, width, 1) for y in changed))

    def render_line(self, y: int) -> Strip:
        """One row of the pane: its line of the painted Text, rendered alone and kept until
        paint changes it (Textual's default renders the whole content for any dirty row).
        While text is selected, Textual renders the whole Text: its highlight and the
        offsets a drag records span lines."""
        lines = self._painted_lines
        if lines is None or self.text_selection is not None:
            return super().render_line(y)
        self._dirty_regions.clear()     # nothing for the default whole-content render
        width, style = self.size.width, self.visual_style
        key = (width, style)
        if key != self._strips_key:     # resized, or a new theme: every line anew
            self._strips.clear()
            self._strips_key = key
        strip = self._strips.get(y)
        if strip is None:
            if y < len(lines):
                strip = self.line_strip(lines[y], y, width, style)
            else:
                strip = Strip.blank(width, style.rich_style)
            self._strips[y] = strip
        return strip

    def line_strip(self, line: Text, y: int, width: int, style) -> Strip:
        """``line`` as Textual renders row ``y`` of the whole Text: each segment's style
        carries its (x, y) offset, which a mouse selection reads (rendering the line alone
        through Visual.to_strips stamped every row y=0, so a drag on row 5 selected row 0's
        text).  A line that fits and holds no tab needs no wrapping or cropping: its
        segments are made here directly (Content.render, as FormattedLine.to_strip does),
        about a third cheaper; any other goes through Textual and gets its row stamped."""
        content = visualize(self, line)
        if isinstance(content, Content) and content.cell_length <= width \
                and "\t" not in content.plain:
            segments = []
            x = 0
            for text, text_style in content.render(style, end="", parse_style=self._get_style):
                segments.append(Segment(text, (style + text_style).rich_style_with_offset(x, y)))
                x += len(text)
            return Strip(segments, content.cell_length)
        return at_row(Visual.to_strips(self, content, width, 1, style)[0], y)
