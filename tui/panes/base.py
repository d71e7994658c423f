"""What every layer pane shares: the render context, inline finding highlights, rows.

A pane is a Static whose content is rebuilt from a Frame by a pure ``render`` function;
panes never do I/O and never call probes.  Severity shows twice: the pane's CSS class
(border colour, from the theme) and the flagged reading itself (styled, code beside it).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Any, Iterable

from rich.console import RenderableType
from rich.text import Text
from textual.widgets import Static

from infertop.history import Series
from infertop.model import Layer, Reading, Status
from infertop.findings import Severity
from infertop.pidmap import gpu_holders
from infertop.pipeline import Frame
from infertop.units import fmt_reading, sparkline

from ..options import CaptureSummaries



@dataclass
class PaneContext:
    frame: Frame
    styles: dict[str, str]          # role -> Rich style, from the theme (themes/)
    wide: bool = False              # zoomed or large terminal: show more columns/rows
    height: int = 0                 # content rows of the pane being drawn
    width: int = 0                  # content columns of the pane being drawn
    summaries: CaptureSummaries = field(default_factory=CaptureSummaries)  # capture results
    extras_cache: dict[str, Any] = field(default_factory=dict)  # per-frame derived lookups

    # -- findings -----------------------------------------------------------------------
    def flag(self, key: str, labels: Iterable[tuple[str, str]] = ()) -> tuple[str, str] | None:
        """(severity, code) of the worst active finding whose evidence is this reading."""
        want = dict(labels)
        best: tuple[str, str] | None = None
        for f in self.frame.findings:
            for ev in f.evidence:
                if ev.key != key:
                    continue
                ev_labels = dict(ev.labels)
                if any(want.get(k) != v for k, v in ev_labels.items() if k in want):
                    continue
                if best is None or f.severity > best[0]:
                    best = (f.severity, f.code)
        return (best[0].value, best[1]) if best else None

    # -- readings -----------------------------------------------------------------------
    def readings(self, key: str, **labels: str) -> list[Reading]:
        rs = self.frame.by_key(key)
        if not labels:
            return rs
        return [r for r in rs if all(r.label(k) == v for k, v in labels.items())]

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
              **labels: str) -> Text:
        series = self.series(key, **labels)
        if not series:
            return Text("")
        vals = series[0].values()
        return Text(sparkline(vals, width, lo, hi), style=self.styles["spark"])

    def series(self, key: str, **labels: str) -> list[Series]:
        return self.frame.history.find(key, **labels)

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


class Columns:
    """A light table rendered straight to Text.

    Rich's Table measures every cell on every paint; at one repaint a second for six
    panes that was most of infertop's CPU.  Panes only need left-aligned columns, so
    this pads cells to the widest one (capped) and joins them: about 10x cheaper, and a
    Text compares by value, so an unchanged pane is not repainted at all.
    """

    def __init__(self, headers: list[str] | None = None, *, header_style: str = "",
                 widths: list[int] | None = None, max_width: int = 26, gap: int = 2) -> None:
        self.headers = headers
        self.header_style = header_style
        self.widths = widths            # fixed widths (None: fit to content)
        self.max_width = max_width
        self.gap = gap
        self.rows: list[list[Text]] = []

    def add_row(self, *cells: RenderableType | str) -> None:
        self.rows.append([c if isinstance(c, Text) else Text(str(c)) for c in cells])

    def __bool__(self) -> bool:
        return bool(self.rows)

    def to_text(self) -> Text:
        rows = list(self.rows)
        if self.headers:
            rows.insert(0, [Text(h, style=self.header_style) for h in self.headers])
        ncol = max((len(r) for r in rows), default=0)
        if self.widths:
            widths = list(self.widths) + [self.max_width] * (ncol - len(self.widths))
        else:
            widths = [min(self.max_width, max((r[i].cell_len for r in rows if i < len(r)),
                                              default=0)) for i in range(ncol)]
        out = Text(no_wrap=True, overflow="ellipsis", end="")
        pad = " " * self.gap
        for n, row in enumerate(rows):
            if n:
                out.append("\n")
            for i, cell in enumerate(row):
                if i:
                    out.append(pad)
                w = widths[i]
                if cell.cell_len > w:
                    cell = cell.copy()
                    cell.truncate(w, overflow="ellipsis")
                out.append_text(cell)
                if i < len(row) - 1:
                    out.append(" " * (w - cell.cell_len))
        return out


def kv_table(rows: list[tuple[str, RenderableType, RenderableType | str]], *,
             label_width: int = 14, narrow: bool = False) -> Columns:
    """Label / value / sparkline rows, the common pane body (narrow: 80x24 panes)."""
    t = Columns(widths=[12, 22, 10] if narrow else [label_width, 30, 24], gap=1)
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


class LayerPane(Static):
    """A pane for one layer; subclasses set ``layer`` and implement ``render_frame``."""

    pane_layer: Layer = Layer.HARDWARE
    can_focus = True

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("waiting for the first tick…", classes="pane", **kwargs)
        self.border_title = f"{self.pane_layer.index + 1} {self.pane_layer.value}"
        self.worst: str | None = None
        self.last_renderable: RenderableType | None = None

    def render_frame(self, ctx: PaneContext) -> RenderableType:  # pragma: no cover - abstract
        raise NotImplementedError

    def show(self, ctx: PaneContext) -> None:
        findings = ctx.frame.findings_for(self.pane_layer)
        worst = max((f.severity for f in findings), default=None)
        worst = worst.value if worst is not None else None
        if worst != self.worst:
            for s in Severity:
                self.set_class(s.value == worst, f"sev-{s.value}")
            self.worst = worst
        ctx.wide = self.size.width >= 110
        ctx.height = max(0, self.size.height - 2)
        ctx.width = max(0, self.size.width - 4)
        codes = " ".join(sorted({f.code for f in findings}))
        self.border_subtitle = f"{worst.upper()} {codes}" if worst else ""
        content = self.render_frame(ctx)
        if isinstance(content, Columns):
            content = content.to_text()
        if content != self.last_renderable:   # Text compares by value: skip idle repaints
            self.last_renderable = content
            self.update(content, layout=False)   # the grid fixes the size: no re-layout
