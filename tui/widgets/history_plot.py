"""`h` on a zoomed pane: that layer's key readings over the whole History, as line plots.

The sparklines in the panes show the last 16 ticks; History keeps up to 900 points per
series (15 minutes at the default 1 s tick).  This draws all of them, one panel per
reading, one line per GPU or engine, with the y axis in the reading's unit and the x axis
in seconds before the newest tick (live, demo) or time into the recording (replay).

Pure on the data side: ``plot_text`` is a function of History and the size, reads
History only through ``History.find`` and ``Series.window_points`` (its public face), and
does no I/O.  The widget redraws at most once a second of wall time while data arrives
(and at once when the layer or its size changes), so a 0.25 s tick costs no more.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.text import Text
from textual.message import Message
from textual.widgets import Static

from infertop.history import History, Series
from infertop.model import LAYERS, Kind, Layer
from infertop.textclean import clean
from infertop.units import fmt_si, fmt_value, natural_key

from .braille_plot import Trace, nice_step, plot_area, x_axis, y_labels

if TYPE_CHECKING:    # the app imports this widget
    from infertop.pipeline import Frame
    from infertop.source import SnapshotSource

    from ..app import InfertopApp


@dataclass(frozen=True)
class PlotSpec:
    """One panel: a reading key (with fixed labels, e.g. quantile) and its y range."""

    key: str
    title: str
    unit: str
    labels: dict[str, str] = field(default_factory=dict)
    lo: float | None = 0.0          # None: from the data
    hi: float | None = None         # None: from the data (ratios: 1.0, i.e. 100 %)


def _ratio(key: str, title: str, **labels: str) -> PlotSpec:
    return PlotSpec(key, title, "ratio", labels, 0.0, 1.0)


# what each layer's plot shows, most telling first (panels drop from the end when short)
LAYER_PLOTS: dict[Layer, tuple[PlotSpec, ...]] = {
    Layer.HARDWARE: (_ratio("gpu.util_ratio", "GPU util"),
                     _ratio("gpu.sm_active_ratio", "SM active (GPM)")),
    Layer.KERNELS: (_ratio("gpu.sm_active_ratio", "SM active (GPM)"),
                    _ratio("gpu.tensor_active_ratio", "tensor active (GPM)")),
    Layer.MEMORY: (_ratio("kv.usage_ratio", "KV-cache usage"),
                   PlotSpec("gpu.mem_used_bytes", "GPU memory used", "bytes", lo=None)),
    Layer.SCHEDULING: (PlotSpec("server.requests_running", "running requests", "count"),
                       PlotSpec("server.requests_waiting", "waiting requests", "count")),
    Layer.PARALLELISM: (_ratio("gpu.util_ratio", "GPU util per GPU"),
                        _ratio("kv.usage_ratio", "KV-cache usage per engine")),
    Layer.DECODING: (PlotSpec("latency.ttft_seconds", "TTFT p99", "s", {"quantile": "0.99"}),
                     PlotSpec("latency.itl_seconds", "ITL p99", "s", {"quantile": "0.99"}),
                     PlotSpec("throughput.generation_tokens_per_second",
                              "generation tokens/s", "tokens/s")),
}

# Okabe-Ito: told apart with the common colour-vision deficiencies, on dark or light
PALETTE = ("#56B4E9", "#E69F00", "#009E73", "#F0E442", "#CC79A7", "#D55E00", "#0072B2",
           "#999999")
MAX_LINES = len(PALETTE)
MIN_WIDTH = 40       # y labels + a plot worth reading
PANEL_ROWS = 5       # a panel: its title line and at least 4 rows of dots
AXIS_ROWS = 2        # the shared x axis and its labels
X_STEPS = (5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)


@dataclass
class Panel:
    spec: PlotSpec
    series: list[Series]     # the lines drawn (at most MAX_LINES)
    left_out: int            # series of the key not drawn
    points: list[list[tuple[float, float]]]
    names: list[str]


def line_names(series: list[Series]) -> list[str]:
    """'GPU 0', 'e1', ':8001 e0' (the port only when several servers are read): which
    GPU or engine each line is; '' for a lone line.  Label values are outside text."""
    if len(series) == 1:
        return [""]
    many = len({s.label("instance") for s in series}) > 1
    out = []
    for s in series:
        gpu = s.label("gpu")
        if gpu:
            out.append(clean(f"GPU {gpu}"))
            continue
        inst, eng = s.label("instance"), s.label("engine")
        where = f":{inst.rsplit(':', 1)[-1]}" if inst and many else ""
        out.append(clean(" ".join(x for x in (where, f"e{eng}" if eng else "") if x)))
    return out


def panels_for(history: History, layer: Layer) -> list[Panel]:
    """The panels of a layer that have data, each with its series' points (copied)."""
    out = []
    for spec in LAYER_PLOTS.get(layer, ()):
        series = [s for s in history.find(spec.key, **spec.labels) if s.kind is not Kind.HISTOGRAM]
        series.sort(key=lambda s: tuple(natural_key(v) for _, v in s.labels))
        drawn = series[:MAX_LINES]
        # NaN or inf (a probe's odd value) would break the y range: left out, a hole
        points = [[(t, v) for t, v in s.window_points(None) if math.isfinite(v)] for s in drawn]
        if not any(points):
            continue
        out.append(Panel(spec, drawn, len(series) - len(drawn), points, line_names(drawn)))
    return out


def fmt_ago(x: float) -> str:
    """x seconds relative to the newest tick (x <= 0): 'now', '-45s', '-5m', '-2h'."""
    s = round(-x)
    if s == 0:
        return "now"
    if s < 120:
        return f"-{s}s"
    if s < 7200:
        return f"-{s / 60:g}m" if s % 60 == 0 else f"-{s / 60:.1f}m"
    return f"-{s / 3600:g}h" if s % 3600 == 0 else f"-{s / 3600:.1f}h"


def fmt_clock(x: float) -> str:
    """x seconds into a recording: '0:05:30'."""
    s = max(0, int(round(x)))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def x_step(span: float, area_w: int, label_w: int) -> float:
    """The smallest tick step from X_STEPS whose labels do not crowd the axis."""
    fit = max(1, area_w // (label_w + 3))
    for step in X_STEPS:
        if span / step <= fit:
            return float(step)
    return float(X_STEPS[-1])


def _span_text(seconds: float) -> str:
    s = int(round(seconds))
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min {s % 60:02d} s" if s % 60 else f"{s // 60} min"
    return f"{s / 3600:.1f} h"


def tick_base(unit: str, top: float) -> float:
    """Bytes tick at whole KiB/MiB/GiB/TiB (fmt_value prints binary units)."""
    if unit != "bytes":
        return 1.0
    return next((b for b in (2.0 ** 40, 2.0 ** 30, 2.0 ** 20, 2.0 ** 10) if abs(top) >= b), 1.0)


def y_range(spec: PlotSpec, values: Sequence[float]) -> tuple[float, float]:
    """The y axis: the spec's fixed ends, else the data's rounded out to whole ticks."""
    top = max(values, default=0.0)
    bottom = min(values, default=0.0)
    base = tick_base(spec.unit, top)
    span = max(top - (spec.lo if spec.lo is not None else bottom), abs(top) * 0.02) or base
    step = nice_step(span / base, 4) * base
    lo = spec.lo if spec.lo is not None else math.floor(bottom / step) * step
    if spec.hi is not None:
        return lo, spec.hi
    return lo, lo + step * max(1, math.ceil((top - lo) / step - 1e-9))


def y_label(value: float, unit: str) -> str:
    """A y tick: the value in its unit; zero as a bare 0 (not '0 µs' or '0 B')."""
    if value == 0 and unit not in ("ratio", "cores"):
        return "0"
    if unit in ("tokens/s", "1/s"):   # '1.5 k/s': the title says what is counted
        return fmt_si(value, "/s")
    return fmt_value(value, unit)


def plot_text(history: History, layer: Layer, width: int, height: int, *,
              origin: float | None = None, muted: str = "dim") -> Text:
    """The plot of ``layer`` in ``width`` x ``height`` cells.

    ``origin``: the time of a recording's first tick (replay): the x axis then reads
    time into the recording (0:05:30) instead of seconds before the newest tick."""
    panels = panels_for(history, layer)
    if not panels:
        names = ", ".join(s.title for s in LAYER_PLOTS.get(layer, ()))
        return Text(f"no history yet for {names or layer.value}", style=muted)
    if width < MIN_WIDTH or height < PANEL_ROWS + AXIS_ROWS:
        return Text(f"the history plot needs at least {MIN_WIDTH}x{PANEL_ROWS + AXIS_ROWS} "
                    f"cells (has {width}x{height}): enlarge the terminal", style=muted)
    panels = panels[: (height - AXIS_ROWS) // PANEL_ROWS]
    # one time axis for all panels: from the oldest point drawn to the newest tick
    now = max([history.now] + [p[-1][0] for pan in panels for p in pan.points if p])
    start = min(p[0][0] for pan in panels for p in pan.points if p)
    if now - start < 1e-9:
        start = now - 1.0
    x0, x1 = (start - now, 0.0) if origin is None else (start - origin, now - origin)
    shift = now if origin is None else origin
    # each panel's rows, y range and labels first: all y axes line up at the widest label
    rows_left = height - AXIS_ROWS
    layout = []
    for n, pan in enumerate(panels):
        rows = rows_left // (len(panels) - n)
        rows_left -= rows
        values = [v for pts in pan.points for _, v in pts]
        y0, y1 = y_range(pan.spec, values)
        fmt = (lambda v, u=pan.spec.unit: y_label(v, u))
        layout.append((pan, rows - 1, values, y0, y1, fmt, tick_base(pan.spec.unit, y1)))
    label_w = max(len(s) for _, rows, _, y0, y1, fmt, base in layout
                  for s in y_labels(y0, y1, rows, fmt, base))
    lines: list[Text] = []
    for pan, plot_rows, values, y0, y1, fmt, base in layout:
        traces = [Trace(name, [t - shift for t, _ in pts], [v for _, v in pts], PALETTE[i])
                  for i, (name, pts) in enumerate(zip(pan.names, pan.points))]
        lines.append(_title(pan, traces, values, muted))
        lines += plot_area(traces, width, plot_rows, x0=x0, x1=x1, y0=y0, y1=y1, y_fmt=fmt,
                           gap=_gap(pan.points), label_w=label_w, base=base)
    x_fmt = fmt_ago if origin is None else fmt_clock
    area_w = max(2, width - label_w - 1)
    step = x_step(x1 - x0, area_w, max(len(x_fmt(x0)), len(x_fmt(x1))))
    # live: ticks counted back from now; replay: at whole steps of the recording's clock
    first = x1 if origin is None else math.floor(x1 / step) * step
    ticks = [first - k * step for k in range(int((first - x0) // step) + 1)]
    axis, labels = x_axis(width, label_w, x0, x1, x_fmt, ticks)
    lines += [axis, labels]
    return Text("\n", no_wrap=True, overflow="crop", end="").join(lines)


def _title(pan: Panel, traces: list[Trace], values: list[float], muted: str) -> Text:
    """'KV-cache usage  ━ e0 85 %  ━ e1 40 %   min 10 % · max 85 % · 15 min': the reading,
    each line's newest value in its colour, and the panel's extremes over the span."""
    unit = pan.spec.unit
    t = Text(pan.spec.title, style="bold", no_wrap=True, end="")
    for tr, pts in zip(traces, pan.points):
        if not pts:
            continue
        t.append("  ━ ", style=tr.style)
        if tr.name:
            t.append(tr.name + " ", style=tr.style)
        t.append(("now " if not tr.name else "") + fmt_value(pts[-1][1], unit))
    if pan.left_out:
        t.append(f"  +{pan.left_out} not drawn", style=muted)
    if values:
        span = max(p[-1][0] for p in pan.points if p) - min(p[0][0] for p in pan.points if p)
        t.append(f"   min {fmt_value(min(values), unit)} · max {fmt_value(max(values), unit)}"
                 f" · {_span_text(span)}", style=muted)
    return t


def _gap(points: list[list[tuple[float, float]]]) -> float | None:
    """Points farther apart than 3x the usual tick are not joined (a hole in the data)."""
    dts = [b[0] - a[0] for pts in points for a, b in zip(pts, pts[1:])]
    return 3 * statistics.median(dts) if dts else None


class HistoryPlot(Static):
    """The plot under a zoomed pane.  ``show`` is called with every Frame the panes get;
    it redraws when the layer or its size changed, or when data changed and a second
    has passed since it last drew (``min_interval``, wall time: ``clock``)."""

    DEFAULT_CSS = """
    HistoryPlot {
        display: none;
        height: 1fr;
        border: round $secondary;
        border-title-color: $foreground;
        border-title-style: bold;
        padding: 0 1;
        overflow: hidden hidden;
    }
    HistoryPlot.-visible {
        display: block;
    }
    Screen.-too-small HistoryPlot {
        display: none;
    }
    """

    # a little under 1 s: ticks at 1 s arrive with jitter, and a tick 0.98 s after the last
    # draw must not be skipped (it may be the last before a pause)
    min_interval = 0.9

    def __init__(self, **kwargs) -> None:
        super().__init__("", **kwargs)
        self.wanted = False                 # `h` turned it on (shown while a pane is zoomed)
        self.clock: Callable[[], float] = time.monotonic
        self._shape: tuple | None = None    # (layer, size, origin) last drawn
        self._data: object = None           # (History, its newest time) last drawn
        self._drawn_at = float("-inf")
        self.draws = 0                      # how many times it drew (tests, benchmarks)
        self.last_text: Text | None = None  # what it drew last

    def set_visible(self, visible: bool) -> None:
        self.set_class(visible, "-visible")
        if not visible:
            self._shape = None   # drawn afresh when it comes back

    # not `visible`: that is Textual's read-write Widget.visible (visibility, read by its
    # compositor and layout), which this must not shadow
    @property
    def shown(self) -> bool:
        """Displayed under the zoomed pane (``set_visible``; the class -visible)."""
        return self.has_class("-visible")

    def show(self, history: History, layer: Layer, *, origin: float | None = None,
             muted: str = "dim") -> bool:
        """Draw if due; True when it drew."""
        if not self.shown:
            return False
        w, h = self.size.width, self.size.height
        if w <= 0 or h <= 0:
            return False      # not laid out yet: on_resize brings it back
        shape = (layer, w, h, origin)
        data = (id(history), history.now)
        now = self.clock()
        if shape == self._shape and (data == self._data or
                                     now - self._drawn_at < self.min_interval):
            return False
        self._shape, self._data, self._drawn_at = shape, data, now
        self.border_title = f"history: {layer.value}"
        self.border_subtitle = "h hides"
        self.last_text = plot_text(history, layer, w, h, origin=origin, muted=muted)
        self.update(self.last_text, layout=False)
        self.draws += 1
        return True

    class Shown(Message):
        """The plot was shown or resized: the app draws it from its current Frame (not
        while a poll writes History: redraw() waits for that poll, which draws when done)."""

    def on_resize(self, _event) -> None:
        if self.shown:
            self.post_message(self.Shown())


def timeline_origin(source: SnapshotSource) -> float | None:
    """The recorded time of a replay's first tick (None for live and demo sources)."""
    # only a replay has a position on a recorded timeline
    cur, el = source.current_time, source.elapsed
    if cur is not None and el is not None:
        return cur - el
    return None


# -- the app's side: kept here so tui/app.py only calls these two ---------------------------
def _plot_of(app: InfertopApp) -> HistoryPlot | None:
    """The main screen's plot (screens without one, such as the fleet's, have none).  The
    one found is kept with its screen: a DOM query every tick was ~2 % of the main
    thread's samples at 1 Hz (issue 23); it is looked up again only when the main screen
    is another one or the plot left the DOM."""
    if not app.screen_stack:
        return None
    screen = app.screen_stack[0]
    kept = app.history_plot_of
    if kept is not None and kept[0] is screen and kept[1].is_attached:
        return kept[1]
    found = screen.query(HistoryPlot)
    plot = found.first() if found else None
    app.history_plot_of = (screen, plot) if plot is not None else None
    return plot


def sync_history_plot(app: InfertopApp, frame: Frame | None = None) -> None:
    """Show the plot while `h` wants it and a pane is zoomed; draw ``frame``'s History
    for the zoomed pane's layer (None: only show or hide)."""
    plot = _plot_of(app)
    if plot is None:
        return
    zoomed = app.zoomed
    plot.set_visible(plot.wanted and zoomed is not None)
    if frame is not None and zoomed is not None:
        plot.show(frame.history, LAYERS[zoomed], origin=timeline_origin(app.source),
                  muted=app.role_styles.get("muted", "dim"))


def toggle_history_plot(app: InfertopApp) -> None:
    """`h`: on a zoomed pane, show its history plot, or hide it again."""
    plot = _plot_of(app)
    if plot is None:
        app.notify("no history plot on this screen", timeout=3)
        return
    if app.zoomed is None:
        app.notify("zoom a pane first (1-6), then h plots its history", timeout=3)
        return
    plot.wanted = not plot.wanted
    sync_history_plot(app)
    if app.frame is not None:
        app.redraw()
