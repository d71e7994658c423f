"""The fleet screen: a node x GPU grid and an engines table, each row with its worst
finding; sort, filter, and Enter drills into one node's six panes.

Rows are built by pure functions from a ``FleetFrame`` (``gpu_rows``, ``engine_rows``), so
what the screen shows is tested without an App; the widgets only lay them out.  The node
screen is the same six panes as a single box, fed with that node's own Frame (its own
History and rules), refreshed on every tick while it is open.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Vertical
from textual.coordinate import Coordinate
from textual.message import Message
from textual.strip import Strip
from textual.widgets import DataTable, Input, Static

from infertop.findings import Finding, Severity
from infertop.fleet import FleetFrame, node_summary
from infertop.meta import FleetOverviewMeta, ServerMeta
from infertop.model import LAYERS, Status
from infertop.pipeline import Frame
from infertop.prom_findings import from_prometheus, is_pending
from infertop.units import HUGE, fmt_value, natural_key

from ..options import CaptureSummaries
from ..panes.context import FrameLookups
from ..panes.widget import LayerPane, ZoomingScreen
from ..widgets.filter_line import FilterLine
from ..widgets.history_plot import HistoryPlot
from ..widgets.keybar import KeyBar
from ..zoom_table import ZOOM_BINDINGS

MAX_GPU_COLUMNS = 8


@dataclass
class Worst:
    severity: Severity | None = None
    code: str = ""
    title: str = ""
    pending: bool = False   # Prometheus holds it within ``for:`` (ranked below firing)
    prometheus: bool = False   # judged by the exported rules in Prometheus

    @classmethod
    def of(cls, findings: list[Finding]) -> Worst:
        if not findings:
            return cls()
        f = max(findings, key=lambda f: (f.severity.rank, not is_pending(f)))
        return cls(f.severity, f.code, f.title, is_pending(f), from_prometheus(f))

    @property
    def rank(self) -> int:
        return self.severity.rank if self.severity else 0


@dataclass
class GpuRow:
    node: str
    worst: Worst
    gpus: list[tuple[str, float | None, float | None]]   # (gpu, util, SM active)
    mem_ratio: float | None
    temp_max: float | None
    power: float | None
    age: float | None
    down: list[str] = field(default_factory=list)        # sources that failed


@dataclass
class EngineRow:
    node: str
    server: str
    model: str
    worst: Worst
    values: dict[str, float | None]
    status: str = "ok"


def values_by_gpu(frame: Frame, key: str) -> dict[str, float]:
    """GPU index -> value of ``key``'s readings that have one (``r.ok``)."""
    return {r.label("gpu"): v for r in frame.by_key(key) if r.ok and (v := r.value) is not None}


def _max(values) -> float | None:
    vals = [v for v in values if v is not None]
    return max(vals) if vals else None


def _ages(frame: FleetFrame) -> dict[str, float]:
    """node -> age of its oldest scraped value, from this tick's answer (a node's own Frame
    is kept while Prometheus has nothing new for it, so its ages would be old)."""
    out: dict[str, float] = {}
    for name, s in frame.raw.samples.items():
        if name.startswith(("prometheus@", "scrape@")):
            node = name.split("@", 1)[1]
            for r in s.readings:
                if r.key == "node.scrape_age_seconds" and r.ok and r.value is not None:
                    out[node] = max(out.get(node, 0.0), r.value)
    return out


def gpu_rows(frame: FleetFrame) -> list[GpuRow]:
    rows = []
    ages = _ages(frame)
    for node, fr in frame.nodes.items():
        util, sm, used, total = (values_by_gpu(fr, key) for key in (
            "gpu.util_ratio", "gpu.sm_active_ratio", "gpu.mem_used_bytes", "gpu.mem_total_bytes"))
        gpus = sorted({r.label("gpu") for r in fr.by_key("gpu.info")} | set(util),
                      key=natural_key)
        power = list(values_by_gpu(fr, "gpu.power_watts").values())
        rows.append(GpuRow(
            node, Worst.of(frame.node_findings(node)),
            [(g, util.get(g), sm.get(g)) for g in gpus],
            _max(used[g] / total[g] for g in used if total.get(g)),
            _max(r.value for r in fr.by_key("gpu.temp_celsius") if r.ok),
            sum(power) if power else None,
            ages.get(node),
            sorted(n for n, s in fr.snapshot.samples.items() if s.status is Status.ERROR)))
    return rows


def engine_rows(frame: FleetFrame) -> list[EngineRow]:
    rows = []
    for node, fr in frame.nodes.items():
        servers = [(n, s) for n, s in fr.snapshot.samples.items() if n.startswith("server:")]
        insts = {name.split(":", 1)[1] for name, _ in servers}
        for name, s in servers:
            inst = name.split(":", 1)[1]
            sub = _only_instance(fr, inst)
            # a finding about another server of the node is that server's; one about no
            # server (a GPU's: Prometheus names the dcgm-exporter's instance) is every one's
            findings = [f for f in frame.node_findings(node)
                        if dict(f.subject).get("instance") in (None, inst)
                        or dict(f.subject).get("instance") not in insts]
            status = s.status.value if s.status is not Status.OK else "ok"
            rows.append(EngineRow(node, inst, _model_of(s),
                                  Worst.of(findings), node_summary(sub), status))
    return rows


class _InstanceView:
    """A Frame seen through one server instance (``node_summary`` asks ``by_key``)."""

    def __init__(self, frame, instance: str) -> None:
        self._frame, self._inst = frame, instance

    def by_key(self, key: str):
        return [r for r in self._frame.by_key(key)
                if r.label("instance") in ("", self._inst)]


def _only_instance(frame, instance: str):
    return _InstanceView(frame, instance)


# ---- formatting -------------------------------------------------------------------------------
def _absurd(v: float) -> str | None:
    """NaN, inf or past 1e15 (a node sending 1.7e308): units.fmt_value's short spelling,
    never the 309 digits a fixed-point format prints."""
    return fmt_value(v, "") if not math.isfinite(v) or abs(v) >= HUGE else None


def _pct(v: float | None) -> str:
    if v is None:
        return "–"
    return _absurd(v * 100 if abs(v) < HUGE else v) or f"{v * 100:.0f}%"


def _secs(v: float | None) -> str:
    if v is None:
        return "–"
    return _absurd(v) or (f"{v * 1000:.0f}ms" if v < 1 else f"{v:.2f}s")


def _num(v: float | None, fmt: str = "{:.0f}") -> str:
    return "–" if v is None else _absurd(v) or fmt.format(v)


def _worst_cell(w: Worst, styles: dict[str, str]) -> Text:
    if w.severity is None:
        return Text("ok", style=styles.get("ok", ""))
    from ..app import fit_words
    title = fit_words(w.title, WORST_WIDTH - len(w.code) - 1)
    style = styles.get("muted", "dim") if w.pending else styles.get(w.severity.value, "")
    return Text(f"{w.code} {title}".rstrip(), style=style)


def judging_line(frame: FleetFrame) -> str:
    """Who judges the nodes, and in aggregate mode what the rows are (the fleet body says
    it: at 80 columns the header has no room)."""
    from infertop.fleet import ALERTS_SAMPLE
    from infertop.meta import AlertsMeta
    from infertop.textclean import clean
    alerts = frame.raw.samples.get(ALERTS_SAMPLE)
    # what the rules check said (a recording rule missing for the window in force: its
    # column is computed from the raw series), never a blank column without a word
    said = clean(alerts.meta.why)[:200] if alerts is not None and \
        isinstance(alerts.meta, AlertsMeta) else ""
    if frame.prometheus_findings is not None:
        fs = [f for got in frame.prometheus_findings.values() for f in got]
        pending = sum(1 for f in fs if is_pending(f))
        out = (f"findings from Prometheus (infertop's exported rules): {len(fs) - pending} "
               f"firing, {pending} pending on {len(frame.prometheus_findings)} nodes")
        if said:
            out += f"\n{said}"
    else:
        why = f" ({said or 'exported rules not loaded in Prometheus'})" \
            if alerts is not None else ""
        out = f"findings judged by infertop on each node{why}"
    ov = frame.overview
    if ov is not None:
        count = frame.overview_counts
        q = {(r.key, r.label("quantile")): r.value for r in ov.readings if r.labels}
        nodes = count.get("fleet.nodes")
        om = ov.meta if isinstance(ov.meta, FleetOverviewMeta) else FleetOverviewMeta()
        out += (f"\nrows: the {om.rows_per_column or '?'} worst nodes by each "
                f"column, computed by Prometheus ({om.shown} of "
                f"{_num(nodes)} nodes, {_num(count.get('fleet.targets_down'))} targets down)"
                f"; fleet p50/p99: KV {_pct(q.get(('fleet.kv', '0.5')))}/"
                f"{_pct(q.get(('fleet.kv', '0.99')))}, TTFT p99 "
                f"{_secs(q.get(('fleet.ttft_p99', '0.5')))}/"
                f"{_secs(q.get(('fleet.ttft_p99', '0.99')))}")
    return out


# 80 columns show the node, its worst finding and its key latency; the rest by scrolling
ENGINE_COLUMNS = (("node", "node"), ("worst finding", "worst"), ("TTFT p99", "ttft_p99"),
                  ("ITL p50", "itl_p50"), ("KV", "kv"), ("run", "running"),
                  ("wait", "waiting"), ("tok/s", "tok_s"), ("err", "errors"),
                  ("server", "server"), ("model", "model"))
WORST_WIDTH = 30     # a finding's title gives way (whole words) for the readings after it


def engine_sort_key(column: str):
    def key(row: EngineRow):
        if column == "node":
            return natural_key(row.node)
        if column == "server":
            return row.server
        if column == "model":
            return row.model
        if column == "worst":
            return (row.worst.rank, not row.worst.pending)
        v = row.values.get(column)
        return float("-inf") if v is None else v
    return key


def matches(text: str, *fields: str) -> bool:
    q = text.strip().lower()
    return not q or any(q in f.lower() for f in fields)


# ---- widgets ----------------------------------------------------------------------------------
class FleetTable(DataTable):
    """A fleet table as htop's lists: Home/End move the cursor to the first/last row
    (DataTable's own scroll to the first/last column), ←/→ scroll the columns past the
    node, which stays (``fixed_columns``)."""

    BINDINGS = [
        Binding("home", "scroll_top", "top", show=False),
        Binding("end", "scroll_bottom", "bottom", show=False),
        Binding("left", "scroll_columns(-1)", "scroll left", show=False),
        Binding("right", "scroll_columns(1)", "scroll right", show=False),
    ]

    user_moved = False    # until a key or a click moves it, the cursor stays on the worst row

    def on_key(self, event) -> None:
        if event.key in ("up", "down", "home", "end", "pageup", "pagedown"):
            self.user_moved = True

    def on_click(self, _event) -> None:
        self.user_moved = True

    def _column_starts(self) -> tuple[list[int], int, int]:
        """Each column's x in the whole table, its total width, the fixed columns' width."""
        starts, x = [], 0
        for col in self.ordered_columns:
            starts.append(x)
            x += col.get_render_width(self)
        return starts, x, sum(starts[self.fixed_columns:self.fixed_columns + 1]) or 0

    def action_scroll_columns(self, direction: int) -> None:
        """Scroll about a third of the width, to a column's start: the first column past
        the node is shown whole (at the end of the table it may not be: ``mark_cuts``)."""
        step = max(8, (self.size.width or 80) // 3)
        starts, _total, fixed = self._column_starts()
        now = round(self.scroll_x)
        stops = sorted({0, *(s - fixed for s in starts[self.fixed_columns:])})
        want = now + direction * step
        if direction > 0:
            ahead = [b for b in stops if b > now]
            to = max([b for b in ahead if b <= want] or ahead[:1] or [now])
        else:
            back = [b for b in stops if b < now]
            to = min([b for b in back if b >= want] or back[-1:] or [0])
        self.scroll_to(x=max(0, min(to, self.max_scroll_x)), animate=False)

    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        starts, total, fixed = self._column_starts()
        return mark_cuts(strip, starts, total, fixed, round(self.scroll_x), self.size.width)


def mark_cuts(strip: Strip, starts: list[int], total: int, fixed: int, scroll_x: int,
              width: int) -> Strip:
    """A table line scrolled by ``scroll_x`` with its cut edges marked: the column cut at
    the left (behind the fixed node column) shows "…" instead of its tail (the "s" of
    "18ms" read as a value), and a line that goes on past the right edge ends in "…"."""
    if width <= fixed + 1 or strip.cell_length < width or not strip.text.strip():
        return strip   # too narrow to mark, or a blank line below the last row
    left = fixed + scroll_x
    if scroll_x > 0 and left not in starts:
        end = min([s for s in starts if s > left] or [total])
        a, b = fixed, min(width, fixed + end - left)
        if b > a:
            strip = _overwrite(strip, a, "…" + " " * (b - a - 1))
    if total > scroll_x + width:
        # the column the edge cuts is blanked from its start: "403…" read as a value
        # (tok/s 4031); only the first column after the node is cut as it is, when wider
        # than the whole view
        right = scroll_x + width - fixed
        start = max([s for s in starts if s <= right + fixed - 1] or [0]) - scroll_x
        a = start if fixed < start < width else width - 1
        strip = _overwrite(strip, a, " " * (width - 1 - a) + "…")
    return strip


def _overwrite(strip: Strip, at: int, text: str) -> Strip:
    """``strip`` with ``text`` written over its cells from ``at``, in the style found there."""
    from rich.segment import Segment
    style = next((seg.style for seg in strip.crop(at, at + 1)), None)
    return Strip.join([strip.crop(0, at), Strip([Segment(text, style)]),
                       strip.crop(at + len(text), strip.cell_length)])


class FilterBox(Input):
    """The fleet's filter line: focused by `/` (or a click), never by Tab, which moves
    between the two tables (landing in the box, the next key typed went into the filter)."""

    armed = False

    def allow_focus(self) -> bool:
        return self.armed

    def open(self) -> None:
        self.armed = True
        self.focus()

    def on_blur(self) -> None:
        self.armed = False

    def on_click(self) -> None:
        self.open()


class FleetView(Vertical):
    """The two tables and the filter line of the fleet's main screen; a source's error is
    said here, in the body (in the header alone it was cut off at 80 columns)."""

    def compose(self) -> ComposeResult:
        yield Static("", id="fleet-error")
        yield Static("", id="fleet-judging", classes="fleet-title")
        yield Static("GPUs by node", classes="fleet-title")
        yield FleetTable(id="fleet-gpus", cursor_type="row", zebra_stripes=True,
                         fixed_columns=1)
        yield Static("engines  (←/→ scroll the columns, Enter opens the node)",
                     classes="fleet-title")
        yield FleetTable(id="fleet-engines", cursor_type="row", zebra_stripes=True,
                         fixed_columns=1)
        yield FilterBox(placeholder="filter: node, server, model or finding code (Esc clears)",
                        id="fleet-filter")


def fill_tables(view: FleetView, frame: FleetFrame, styles: dict[str, str], *,
                sort: str = "worst", reverse: bool = True, query: str = "") -> None:
    view.query_one("#fleet-judging", Static).update(Text(judging_line(frame)))
    gpus = view.query_one("#fleet-gpus", DataTable)
    engines = view.query_one("#fleet-engines", DataTable)
    g_rows = [r for r in gpu_rows(frame)
              if matches(query, r.node, r.worst.code, r.worst.title)]
    e_rows = [r for r in engine_rows(frame)
              if matches(query, r.node, r.server, r.model, r.worst.code, r.worst.title)]
    e_rows.sort(key=engine_sort_key(sort), reverse=reverse)
    order = {r.node: i for i, r in enumerate(e_rows)}
    g_rows.sort(key=lambda r: (order.get(r.node, len(order)), natural_key(r.node)))
    ncols = min(MAX_GPU_COLUMNS, max((len(r.gpus) for r in g_rows), default=0))
    worst_head = "worst (Prometheus)" if frame.prometheus_findings is not None \
        else "worst finding"
    _refill(gpus, ["node", worst_head, "mem", "temp", "power", "age"] +
            [f"GPU{i}" for i in range(ncols)],
            [(r.node, [Text(r.node, style="bold"), _down_or_worst(r, styles),
                       _pct(r.mem_ratio), _num(r.temp_max, "{:.0f}C"),
                       _num(r.power, "{:.0f}W"), _num(r.age, "{:.1f}s")]
              + _gpu_cells(r, ncols)) for r in g_rows])
    _refill(engines, [f"{worst_head if col == 'worst' else label}{_arrow(col, sort, reverse)}"
                      for label, col in ENGINE_COLUMNS],
            [(f"{r.node}|{r.server}",
              [Text(r.node, style="bold"),
               _worst_cell(r.worst, styles) if r.status == "ok"
               else Text(f"server {r.status}", style=styles.get("crit", "")),
               _secs(r.values["ttft_p99"]), _secs(r.values["itl_p50"]), _pct(r.values["kv"]),
               _num(r.values["running"]), _num(r.values["waiting"]), _num(r.values["tok_s"]),
               _pct(r.values["errors"]), r.server, r.model.rsplit("/", 1)[-1][:32]])
             for r in e_rows])


def _arrow(col: str, sort: str, reverse: bool) -> str:
    return (" ▼" if reverse else " ▲") if col == sort else ""


def _gpu_cells(r: GpuRow, ncols: int) -> list[Text]:
    cells = []
    for i in range(ncols):
        if i >= len(r.gpus):
            cells.append(Text(""))
            continue
        _, util, sm = r.gpus[i]
        cells.append(Text(f"{_pct(util)}/{_pct(sm)}" if sm is not None else _pct(util)))
    return cells


def _down_or_worst(r: GpuRow, styles: dict[str, str]) -> Text:
    if r.down and r.worst.rank < Severity.CRIT.rank:
        return Text("down: " + ", ".join(r.down), style=styles.get("crit", ""))
    return _worst_cell(r.worst, styles)


def _refill(table: DataTable, columns: list[str], rows: list[tuple[str, list]]) -> None:
    """Replace a table's rows, keeping the cursor on the same row key."""
    keep = None
    if table.row_count and table.cursor_row is not None:
        try:
            keep = table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key.value
        except Exception:
            keep = None
    if [str(c.label) for c in table.columns.values()] != columns:
        table.clear(columns=True)
        table.add_columns(*columns)
    else:
        table.clear()
    for key, cells in rows:
        table.add_row(*cells, key=key)
    if isinstance(table, FleetTable) and not table.user_moved:
        keep = None
        if table.row_count:
            table.move_cursor(row=0, animate=False)   # the worst row (sorted worst first)
    if keep is not None:
        try:
            table.move_cursor(row=table.get_row_index(keep), animate=False)
        except Exception:
            pass


class NodeScreen(ZoomingScreen):
    """One node's six panes, fed from the fleet's per-node Frame on every tick."""

    class ShowAgain(Message):
        """Draw the node's current Frame again (a pane zoomed, its plot toggled): the
        app that holds the fleet's Frame does (FleetApp.refresh_node_screen)."""

    BINDINGS = [Binding("escape,backspace", "back", "fleet"), *ZOOM_BINDINGS]

    def __init__(self, node: str, pane_classes) -> None:
        super().__init__()
        self.node = node
        self.pane_classes = pane_classes
        self.zoomed: int | None = None
        self._trends: dict = {}   # this node's sparklines of the trend slot (FrameLookups)

    def compose(self) -> ComposeResult:
        yield Static(Text(f"node {self.node}  (Esc: back to the fleet)", style="bold"),
                     id="node-header")
        with Container(id="panes"):
            for cls in self.pane_classes:
                yield cls(id=f"pane-{cls.pane_layer.value}")
        yield HistoryPlot(id="history-plot")     # `h` on a zoomed pane: this node's History
        yield FilterLine(id="table-filter")
        yield KeyBar()

    @property
    def panes(self) -> list[LayerPane]:
        return list(self.query(LayerPane))

    def show(self, frame: Frame | None, styles: dict[str, str],
             summaries: CaptureSummaries) -> None:
        if frame is None:
            self.query_one("#node-header", Static).update(
                Text(f"node {self.node}: no longer in the fleet's answer", style="bold"))
            return
        lookups = FrameLookups(frame, styles, summaries=summaries, trends=self._trends)
        for pane in self.panes:
            if pane.display:
                pane.show(lookups)
        self._sync_plot(frame, styles)

    def _sync_plot(self, frame: Frame | None = None,
                   styles: dict[str, str] | None = None) -> None:
        """Show the plot while `h` wants it and a pane is zoomed; draw this node's History
        for the zoomed pane's layer (no frame: only show or hide)."""
        plot = self.query_one(HistoryPlot)
        plot.set_visible(plot.wanted and self.zoomed is not None)
        if frame is not None and self.zoomed is not None:
            plot.show(frame.history, LAYERS[self.zoomed],
                      muted=(styles or {}).get("muted", "dim"))

    def action_history_plot(self) -> None:
        """`h`: on a zoomed pane, plot this node's readings of it over its History."""
        if self.zoomed is None:
            self.app.notify("zoom a pane first (1-6), then h plots its history", timeout=3)
            return
        plot = self.query_one(HistoryPlot)
        plot.wanted = not plot.wanted
        self._sync_plot()
        self.post_message(self.ShowAgain())

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_zoom(self, index: int) -> None:
        self.zoomed = None if self.zoomed == index else index
        for i, pane in enumerate(self.panes):
            pane.display = self.zoomed is None or i == self.zoomed
        self.query_one("#panes").set_class(self.zoomed is not None, "-zoomed")
        self.refresh_bindings()     # the key line: the zoomed table's keys, or not
        self._sync_plot()
        if self.zoomed is not None:     # its table keys (s, /, arrows) go to the pane
            self.panes[index].focus()
        self.post_message(self.ShowAgain())


def _model_of(s) -> str:
    return (s.meta.model or "") if isinstance(s.meta, ServerMeta) else ""
