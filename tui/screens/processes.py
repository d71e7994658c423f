"""`o`: every process that matters in one table, as nvitop's process list: each GPU process
(NVML, whoever owns it) and every process of the server's tree, one row per PID: PID, user,
role, GPUs, GPU memory, SM %, CPU, RSS, command.  Sorted, filtered and scrolled with the
zoomed-pane keys (s S / ↑↓ PgUp PgDn Home End ← →), refreshed every tick.

Rows come from readings the probes already produce (a pane never does I/O): the process
probe's ``process.*`` for the server's tree, NVML's ``process.gpu_mem_bytes`` /
``process.gpu_sm_ratio`` and ``process.gpu_owner`` for the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Static

from infertop.model import Layer
from infertop.textclean import clean
from infertop.units import fmt_value, natural_key

from ..app_of import infertop_app
from ..panes.columns import Columns
from ..panes.context import FrameLookups, PaneContext
from ..panes.layout import fit
from ..panes.widget import LayerPane
from ..widgets.filter_line import FilterLine
from ..widgets.keybar import KeyBar

if TYPE_CHECKING:    # the app imports this screen
    from ..app import InfertopApp

HEADERS = ["PID", "user", "role", "GPU", "GPU mem", "SM", "CPU", "RSS", "command"]


def tree_order(pids: list[str], parent: dict[str, str]) -> list[tuple[str, int]]:
    """(pid, depth) depth-first, each process under its parent (children in PID order),
    as htop's tree: a process whose parent is not listed is a root."""
    listed = set(pids)
    children: dict[str, list[str]] = {}
    roots = []
    for pid in pids:              # pids come sorted: children keep that order
        ppid = parent.get(pid, "")
        if ppid in listed and ppid != pid:
            children.setdefault(ppid, []).append(pid)
        else:
            roots.append(pid)
    out: list[tuple[str, int]] = []
    seen: set[str] = set()
    stack = [(r, 0) for r in reversed(roots)]
    while stack:
        pid, depth = stack.pop()
        if pid in seen:           # a cycle in hostile or racing ppids: once each
            continue
        seen.add(pid)
        out.append((pid, depth))
        stack.extend((c, depth + 1) for c in reversed(children.get(pid, [])))
    out += [(p, 0) for p in pids if p not in seen]   # members of a parent cycle
    return out


def process_rows(ctx: PaneContext, tree: bool = False) -> Columns:
    """One row per PID of the server's tree and of every GPU process; ``tree``: each
    under its parent, the command indented (`t` in `o`)."""
    info = {r.label("pid"): r for r in ctx.readings("process.info") if r.label("pid")}
    owners = {r.label("pid"): r for r in ctx.readings("process.gpu_owner") if r.label("pid")}
    pm = ctx.frame.snapshot.process_meta()
    aliases = {str(a): str(p) for a, p in (pm.pid_aliases if pm else ())}
    held, _outside = ctx.gpu_holders()
    gpu_mem: dict[str, list] = {}
    for r in ctx.readings("process.gpu_mem_bytes"):
        pid = r.label("pid")
        if pid:
            gpu_mem.setdefault(aliases.get(pid, pid), []).append(r)
    pids = sorted(set(info) | set(gpu_mem), key=natural_key)
    depth: dict[str, int] = {}
    if tree:
        order = tree_order(pids, {p: r.label("ppid") for p, r in info.items()})
        pids, depth = [p for p, _ in order], dict(order)
    t = Columns(HEADERS, header_style=ctx.styles["header"], max_width=60)
    t.main = True
    t.cut = (2, 8)            # role and command give way, never a PID or a reading
    t.drop = (7, 5, 1, 3)     # narrow: RSS, SM, user, GPU go before memory and CPU
    rank = {pid: i for i, pid in enumerate(pids)}
    for pid in pids[: ctx.row_cap]:
        p = info.get(pid) or owners.get(pid)
        mems = gpu_mem.get(pid, [])
        gpus = sorted({r.label("gpu") for r in mems}, key=natural_key)
        total = sum((r.value or 0.0) for r in mems if r.ok)
        sm = [ctx.one("process.gpu_sm_ratio", gpu=r.label("gpu"), pid=r.label("pid"))
              for r in mems]
        sm_vals = [s.value for s in sm if s is not None and s.ok and s.value is not None]
        cpu = ctx.one("process.cpu_ratio", pid=pid)
        rss = ctx.one("process.rss_bytes", pid=pid)
        role = (info[pid].label("role") if pid in info else "") or held.get(pid) or ""
        mem_cell = ctx.value_text(mems[0], key="process.gpu_mem_bytes") if len(mems) == 1 \
            else Text(fmt_value(total, "bytes") if mems else "–")
        t.add_row(pid,
                  clean(p.label("user")) if p is not None and p.label("user") else "–",
                  Text(role) if role else Text("(not the server)", style=ctx.styles["muted"]),
                  ",".join(gpus) or "–",
                  mem_cell,
                  Text(f"{max(sm_vals) * 100:.0f} %") if sm_vals else Text("–"),
                  Text(f"{cpu.value * 100:.0f} %") if cpu is not None and cpu.ok
                  and cpu.value is not None else Text("–"),
                  ctx.value_text(rss) if rss is not None else Text("–"),
                  ("  " * (depth[pid] - 1) + "└─ " if depth.get(pid) else "")
                  + (clean(p.text or p.label("name")) if p is not None else "–"),
                  prio=rank[pid])
    t.more = max(0, len(pids) - ctx.row_cap)
    return t


class ProcessesPane(LayerPane):
    """The process table, always in its zoomed form (sort, filter, scroll)."""

    pane_layer = Layer.SCHEDULING
    # `t` (one table here: no next table to go to) and F5 toggle the tree, as in htop
    BINDINGS = [Binding("t,f5", "toggle_tree", "tree", key_display="t")]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.border_title = "processes: the server's tree and every GPU process"
        self.tree_view = False

    def action_toggle_tree(self) -> None:
        self.tree_view = not self.tree_view
        v = self.table_view
        v.sort, v.reverse, v.offset = None, False, 0     # the tree is the order
        self.redraw_table()
        self.app.notify("tree: each process under its parent" if self.tree_view
                        else "list: PID order", timeout=2)

    def is_zoomed(self) -> bool:
        return True

    def show(self, lookups: FrameLookups) -> None:
        super().show(lookups)
        self.border_title = "processes: the server's tree and every GPU process"
        self.border_subtitle = "o / Esc: back"

    def render_frame(self, ctx: PaneContext) -> RenderableType:
        rows = process_rows(ctx, self.tree_view)
        if not rows:
            return ctx.note("No process readings yet: the process probe finds the server's "
                            "tree (give --url or --pid); NVML lists the GPU processes")
        return fit(ctx, rows)


class ProcessScreen(Screen):
    BINDINGS = [Binding("escape,o", "back", "back")]
    is_process_screen = True     # the app draws it on every tick while it is on top

    def compose(self) -> ComposeResult:
        yield Static("", id="header")
        yield ProcessesPane(id="pane-processes")
        yield FilterLine(id="table-filter")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one(ProcessesPane).focus()
        app = infertop_app(self)
        self.query_one("#header", Static).update(app._header_text(app.frame))
        self.show(app)

    def show(self, app: InfertopApp) -> None:
        """Draw the app's newest frame (the app calls this every tick while on top)."""
        if app.frame is None:
            return
        lookups = FrameLookups(app.frame, app.role_styles, summaries=app.summaries,
                               trends=app._trends)
        self.query_one("#header", Static).update(app._header_text(app.frame))
        self.query_one(ProcessesPane).show(lookups)

    def action_back(self) -> None:
        self.app.pop_screen()
