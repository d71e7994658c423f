"""A line plot in braille dots, drawn straight to a Rich Text (pure: data in, Text out).

Each character cell holds 2x4 dots, so a 150x30 plot has 300x120 dots of resolution.
Written by hand rather than taken from a plotting library because it is drawn on the
event loop once a second: for 900 points x 8 series at 150x30, benchmarks/bench_plot.py
measured 5.5 ms here against plotille 85 ms, textual-plot 130 ms and plotext (behind
textual-plotext) 315 ms, which would stall the screen for a good part of each tick.

Work is linear in points + cells: points are binned per dot column (min, max, first,
last), vertical runs set a whole cell's dots with one precomputed mask.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.text import Text

# dot bits of a braille cell (U+2800 + bits): [column][row] for 2 columns x 4 rows
_BITS = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))
# _MASK[side][a][b]: the dots of rows a..b (inclusive) in one column of a cell
_MASK = tuple(tuple(tuple(sum(_BITS[side][r] for r in range(a, b + 1)) if b >= a else 0
                          for b in range(4)) for a in range(4)) for side in range(2))


@dataclass(frozen=True)
class Trace:
    """One line: its name (legend), style and points (x, y) in increasing x."""

    name: str
    xs: Sequence[float]
    ys: Sequence[float]
    style: str = ""


@dataclass
class Canvas:
    """The dots of a plot area ``width`` x ``height`` cells, and which trace owns a cell."""

    width: int
    height: int

    def __post_init__(self) -> None:
        self.bits = [0] * (self.width * self.height)
        self.owner = [-1] * (self.width * self.height)

    @property
    def dots_x(self) -> int:
        return 2 * self.width

    @property
    def dots_y(self) -> int:
        return 4 * self.height

    def span(self, dc: int, r0: int, r1: int, who: int) -> None:
        """Dots of dot column ``dc`` from dot row r0 to r1 (either order; 0 = top)."""
        if r0 > r1:
            r0, r1 = r1, r0
        cx, side = dc >> 1, dc & 1
        masks = _MASK[side]
        w = self.width
        bits, owner = self.bits, self.owner
        for cy in range(r0 >> 2, (r1 >> 2) + 1):
            base = cy << 2
            a = r0 - base if r0 > base else 0
            b = r1 - base if r1 < base + 3 else 3
            i = cy * w + cx
            bits[i] |= masks[a][b]
            owner[i] = who

    def line(self, trace: Trace, who: int, x0: float, x1: float, y0: float, y1: float,
             gap: float | None = None) -> None:
        """Draw ``trace`` scaled from [x0, x1] x [y0, y1]; points farther apart than ``gap``
        in x are not joined (a source that stopped answering leaves a hole, not a ramp)."""
        xs, ys = trace.xs, trace.ys
        if not xs:
            return
        nx, ny = self.dots_x - 1, self.dots_y - 1
        sx = nx / (x1 - x0) if x1 > x0 else 0.0
        sy = ny / (y1 - y0) if y1 > y0 else 0.0
        prev_c: int | None = None  # the last dot drawn in the previous column (column,
        prev_r = 0                 # row; the row is read only while the column is set)
        prev_x = None
        col: int | None = None     # the column being drawn, its rows lo..hi and last row
        lo = hi = last = 0         # (read only while col is set)
        for x, y in zip(xs, ys):
            if y is None or y != y:  # None or NaN: a hole
                prev_c = prev_x = None
                continue
            c = int((x - x0) * sx + 0.5)
            c = 0 if c < 0 else nx if c > nx else c
            r = int((y1 - y) * sy + 0.5)
            r = 0 if r < 0 else ny if r > ny else r
            joined = prev_x is not None and (gap is None or x - prev_x <= gap)
            if c == col and joined:
                if r < lo:
                    lo = r
                elif r > hi:
                    hi = r
                last = r
            else:
                if col is not None:
                    self.span(col, lo, hi, who)
                    prev_c, prev_r = col, last
                if not joined:
                    prev_c = None
                if prev_c is not None and c > prev_c + 1:   # interpolate across columns
                    steps = c - prev_c
                    rr = prev_r
                    for k in range(1, steps):
                        nr = prev_r + (r - prev_r) * k // steps
                        self.span(prev_c + k, rr, nr, who)
                        rr = nr
                    prev_r = rr
                col, last = c, r
                lo = hi = r
                if prev_c is not None:   # join the previous column's last dot to this one
                    lo, hi = min(lo, prev_r), max(hi, prev_r)
            prev_x = x
        if col is not None:
            self.span(col, lo, hi, who)

    def rows(self, styles: Sequence[str]) -> list[Text]:
        """One Text per cell row; a cell takes the style of the last trace that drew in it."""
        out = []
        w = self.width
        for cy in range(self.height):
            t = Text(no_wrap=True, end="")
            run: list[str] = []
            run_owner = -2
            row_bits = self.bits[cy * w:(cy + 1) * w]
            row_owner = self.owner[cy * w:(cy + 1) * w]
            for b, o in zip(row_bits, row_owner):
                if o != run_owner:
                    if run:
                        t.append("".join(run), style=styles[run_owner] if run_owner >= 0 else "")
                    run, run_owner = [], o
                run.append(chr(0x2800 + b) if b else " ")
            if run:
                t.append("".join(run), style=styles[run_owner] if run_owner >= 0 else "")
            out.append(t)
        return out


def nice_step(span: float, count: int) -> float:
    """A 1-2-5 step giving about ``count`` intervals over ``span``."""
    if span <= 0 or count <= 0:
        return 1.0
    raw = span / count
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def y_ticks(lo: float, hi: float, rows: int, base: float = 1.0) -> list[float]:
    """Tick values: both ends first (always labelled), then 1-2-5 multiples of ``base``
    inside, about one every 3 rows (2**30 for bytes: whole GiB, not 46.6 GiB)."""
    step = nice_step((hi - lo) / base, max(1, rows // 3)) * base
    out = [hi, lo] if hi > lo else [lo]
    v = math.ceil(lo / step - 1e-9) * step
    while v < hi - step * 1e-9:
        if v > lo + step * 1e-9:
            out.append(round(v, 12))
        v += step
    return out


def y_labels(y0: float, y1: float, height: int, y_fmt: Callable[[float], str],
             base: float = 1.0) -> list[str]:
    return [y_fmt(v) for v in y_ticks(y0, y1, height, base)]


def plot_area(traces: Sequence[Trace], width: int, height: int, *, x0: float, x1: float,
              y0: float, y1: float, y_fmt: Callable[[float], str],
              gap: float | None = None, label_w: int = 0, base: float = 1.0) -> list[Text]:
    """The plot rows with a y axis: ``height`` lines of ``width`` cells in all (labels,
    axis and dots); labels take at least ``label_w`` columns (panels stacked over one x
    axis line up).  The caller adds the title above and the x axis below."""
    ticks = y_ticks(y0, y1, height, base)
    labels = [y_fmt(v) for v in ticks]
    lw = max([label_w] + [len(s) for s in labels])
    area_w = max(2, width - lw - 1)
    canvas = Canvas(area_w, height)
    for i, tr in enumerate(traces):
        canvas.line(tr, i, x0, x1, y0, y1, gap)
    rows = canvas.rows([tr.style for tr in traces])
    # the row of each tick: the cell holding its dot row
    at: dict[int, str] = {}
    ny = canvas.dots_y - 1
    for v, s in zip(ticks, labels):
        r = int((y1 - v) / (y1 - y0) * ny + 0.5) if y1 > y0 else ny
        at.setdefault(min(height - 1, max(0, r >> 2)), s)
    out = []
    for cy, row in enumerate(rows):
        lab = at.get(cy)
        line = Text(no_wrap=True, end="")
        line.append((lab or "").rjust(lw), style="dim")
        line.append("┤" if lab else "│", style="dim")
        line.append_text(row)
        out.append(line)
    return out


def x_axis(width: int, label_w: int, x0: float, x1: float,
           x_fmt: Callable[[float], str], ticks: Sequence[float]) -> tuple[Text, Text]:
    """The x axis line (with ┬ at ``ticks``) and the tick labels under it, for a plot
    area that starts after ``label_w`` + 1 columns.  Ticks are placed in the order
    given; a label that would touch one already placed is left out (its ┬ stays)."""
    area_w = max(2, width - label_w - 1)
    axis = ["─"] * area_w
    labels = [" "] * area_w
    span = x1 - x0
    if span > 0:
        for v in ticks:
            if not x0 - 1e-9 <= v <= x1 + 1e-9:
                continue
            c = int((v - x0) / span * (area_w - 1) + 0.5)
            s = x_fmt(v)
            start = min(max(0, c - len(s) // 2), area_w - len(s))
            axis[c] = "┬"
            if start >= 0 and all(ch == " " for ch in
                                  labels[max(0, start - 1):start + len(s) + 1]):
                labels[start:start + len(s)] = list(s)
    pad = " " * label_w
    return (Text(pad + "└" + "".join(axis), style="dim", no_wrap=True, end=""),
            Text(pad + " " + "".join(labels), style="dim", no_wrap=True, end=""))
