"""4 scheduling: the server's process tree, per-thread CPU, queue, context switches, GIL."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text

from infertop.model import Layer
from infertop.servers import registry
from infertop.textclean import clean
from infertop.units import fmt_value

from .cells import Cell, append_cells
from .columns import grid
from .context import PaneContext
from .layout import Expendable, fit
from .widget import LayerPane


class SchedulingPane(LayerPane):
    pane_layer = Layer.SCHEDULING

    def render_frame(self, ctx: PaneContext) -> RenderableType:
        parts: list = []
        queue = queue_line(ctx)
        if queue:
            parts.append(queue)
        host = ctx.one("host.cpu_ratio")
        if host is not None:
            cores = ctx.one("host.cpu_count")
            line = append_cells(Text("host CPU "), ctx.value_text(host))
            if cores and cores.ok:
                line.append(f" of {cores.value:.0f} cores ")
            parts.append(Expendable(append_cells(line, ctx.spark("host.cpu_ratio", 12, 0, 1))))
        procs = ctx.readings("process.info")
        pm = ctx.frame.snapshot.process_meta()
        server = pm.server if pm else None
        if procs and server is not None and server.found_by:
            # --url's port owner could not be read: this tree is a guess, and says so
            parts.append(ctx.note(f"found by name, not by port: {server.reason}"))
        if procs and server is not None and server.container:
            # which container or pod the process tree below runs in (one server of several)
            parts.append(ctx.note(f"pid {server.pid} {clean(server.kind)} in "
                                  f"{clean(server.container)}"))
        if procs:
            parts.append(process_table(ctx, procs))
            threads = sorted((r for r in ctx.readings("thread.cpu_ratio") if r.ok),
                             key=lambda r: -(r.value or 0))[: max(3, ctx.height - len(procs) - 6)]
            if threads:
                tt = grid(["TID", "thread", "CPU", "of PID"], styles=ctx.styles)
                for r in threads:
                    tt.add_row(r.label("tid"), r.label("name"), ctx.value_text(r), r.label("pid"))
                parts.append(Expendable(tt))
        else:
            snap = ctx.frame.snapshot
            looked = pm.looked_for if (pm := snap.process_meta()) else None
            why = ctx.source_reason("process")
            parts.append(ctx.note("No server process found" + (f": {why}" if why else "") +
                                  (f"\nLooked for {looked}." if looked else "")))
        gil = gil_lines(ctx)
        if gil is not None and (ctx.readings("python.gil_held_ratio") or ctx.summaries.gil):
            parts.insert(1 if queue else 0, gil)   # asked for with G: not the first to go
        elif gil is not None:
            parts.append(Expendable(gil))            # the "off (press G)" hint gives way first
        if ctx.summaries.pyspy is not None:
            parts.append(ctx.summaries.pyspy)
        return fit(ctx, *parts)


def queue_line(ctx: PaneContext) -> Text:
    """running / waiting / queue p99: one engine as is; several as totals, the worst queue
    named by its engine and any engine a finding is about, so the line stays one line
    however many engines there are (20,000 series: linear, bounded)."""
    out = Text(no_wrap=True)
    running = ctx.readings("server.requests_running")
    waiting = ctx.readings("server.requests_waiting")
    qp99 = ctx.readings("latency.queue_seconds", quantile="0.99")
    engines = max(ctx.distinct("server.requests_running"), ctx.distinct("server.requests_waiting"))
    if engines <= 1:
        names = ("run", "wait", "queue p99") if ctx.width and ctx.width < 50 else \
            ("running", "waiting", "queue p99")    # 80x24: labels shrink, values stay whole
        for label, rs in zip(names, (running, waiting, qp99)):
            for r in rs:
                append_cells(out, f"{label} ", ctx.value_text(r), "  ")
    else:
        for label, rs in (("running", running), ("waiting", waiting)):
            vals = [r.value for r in rs if r.ok and r.value is not None]
            if vals:
                out.append(f"{label} {fmt_value(sum(vals), 'count')}  ")   # 1e308: no 309 digits
        # distinct() stops at 2 (one or several); the count is of the readings summed
        n = len({(r.label("instance"), r.label("engine")) for r in (running or waiting)})
        out.append(f"({n} engines)  ")
        worst = max((r for r in qp99 if r.ok and r.value is not None),
                    key=lambda r: r.value or 0.0, default=None)   # None is left out above
        if worst is not None:
            append_cells(out, "queue p99 ", ctx.value_text(worst))
            out.append(ctx.engine_tag(worst) + "  ")
        for rs in (running, waiting):
            for r in rs:     # only the engines a finding is about: few
                if ctx.flag(r.key, r.labels):
                    append_cells(out, r.key.rsplit(".", 1)[-1].replace("requests_", "") +
                                 ctx.engine_tag(r) + " ", ctx.value_text(r))
                    out.append("  ")
    extra = deferral_and_sleep(ctx)
    if extra:
        out.append_text(extra)
    if out:
        append_cells(out, ctx.spark("server.requests_waiting", 12, 0))
    return out


def deferral_and_sleep(ctx: PaneContext) -> Text:
    """'deferred N' (of the waiting, the ones held for a KV transfer or a LoRA slot, not
    for room) and 'asleep' per engine: shown only when they are not zero, or a finding
    points at them, so the usual line stays as it was."""
    out = Text(no_wrap=True)
    deferred = [r for r in ctx.readings("server.requests_deferred") if r.ok and r.value]
    if deferred:
        append_cells(out, "deferred ",
                     ctx.value_text(deferred[0]) if len(deferred) == 1
                     else Cell.make(f"{sum(r.value or 0.0 for r in deferred):.0f}"))  # all non-zero
        out.append("  ")
    for r in ctx.readings("server.sleep_level"):
        if r.ok and r.value:
            out.append(f"asleep{ctx.engine_tag(r)} (level {r.value:.0f})  ",
                       style=ctx.styles["warn"])
    # paused / retracted requests and the disaggregation queues (SGLang, TensorRT-LLM)
    for key, name in (("server.requests_waiting_capacity", "for capacity"),
                      ("server.requests_paused", "paused"),
                      ("server.requests_retracted", "retracted")):
        n = sum(r.value for r in ctx.readings(key) if r.ok and r.value)
        if n:
            out.append(f"{name} {n:.0f}  ")
    for r in ctx.readings("disagg.queue_requests"):
        if r.ok and r.value:
            out.append(f"{r.label('queue').replace('_', ' ')} {r.value:.0f}  ")
    # SGLang: waiting on a grammar compile, and requests the HTTP front end holds
    for key, name in (("server.requests_grammar_queued", "grammar queue"),
                      ("server.http_requests_active", "http in flight")):
        n = sum(r.value for r in ctx.readings(key) if r.ok and r.value)
        if n:
            out.append(f"{name} {n:.0f}  ")
    idle = ctx.one("server.scheduler_idle_ratio")
    cpu = ctx.one("server.scheduler_cpu_cores")
    if idle is not None and idle.ok:
        append_cells(out, "scheduler idle ", ctx.value_text(idle))
        if cpu is not None and cpu.ok:
            append_cells(out, " cpu ", ctx.value_text(cpu))
        out.append("  ")
    # the scheduler loop's busiest stages over the window (SGLang), idle left out
    stages = sorted((r for r in ctx.readings("server.scheduler_stage_ratio")
                     if r.ok and r.value and r.label("stage") != "idle"),
                    key=lambda r: -(r.value or 0.0))[:2]
    for r in stages:
        append_cells(out, f"{r.label('stage').replace('_', ' ')} ", ctx.value_text(r))
        out.append("  ")
    return out


def process_table(ctx: PaneContext, procs):
    narrow = ctx.width < 70   # 80x24: names give way to the numbers
    t = grid(["PID", "process", "S", "CPU", "RSS", "thr", "csw/s"], styles=ctx.styles,
             max_width=16 if narrow else 30)
    # the command gives way (never a PID or a reading), but keeps "VLLM::EngineC": the
    # switch counts, threads and RSS go first
    t.cut, t.cut_min, t.drop = (1,), 15, (6, 5, 4, 2)
    depth = _depths(procs)
    by_pid = {p.label("pid"): p for p in procs}
    ordered = sorted(by_pid, key=lambda pid: (depth.get(pid, 0), int(pid) if pid.isdigit() else 0))
    # rows only for what can be shown: flagged pids, then the workers, then by CPU
    cpu = {r.label("pid"): (r.value or 0.0) for r in ctx.readings("process.cpu_ratio") if r.ok}

    # which processes keep their row when the pane is short: the ones doing the work
    # first (each server kind ranks its roles: infertop/servers)
    priority = registry.role_priority()

    def relevance(pid: str) -> tuple:
        return (priority.get(by_pid[pid].label("role"), registry.UNKNOWN_ROLE_PRIORITY),
                -cpu.get(pid, 0.0))

    cap = ctx.row_cap
    if len(ordered) > cap:
        flagged = ctx.flagged_values("pid")
        keep = {p for p in ordered if p in flagged}
        keep |= set(sorted((p for p in ordered if p not in keep), key=relevance)
                    [: max(0, cap - len(keep))])
        t.more = len(ordered) - len(keep)
        ordered = [p for p in ordered if p in keep]
    for pid in ordered:
        p = by_pid[pid]
        name = p.label("name") or "?"
        role = p.label("role")
        indent = "  " * depth.get(pid, 0)
        csw = [v for r in ctx.readings("process.ctx_switches_per_second", pid=pid)
               if r.ok and (v := r.value) is not None]
        state = ctx.one("process.state", pid=pid)
        code = STATE_CODES.get(state.text, "?") if state is not None and state.text else "–"
        t.add_row(pid, f"{indent}{name}" + (f" ({role})" if role and role not in name.lower() else ""),
                  Text(code, style=ctx.styles["warn"] if code == "D" else ""),
                  ctx.value_text(ctx.one("process.cpu_ratio", pid=pid)),
                  ctx.value_text(ctx.one("process.rss_bytes", pid=pid)),
                  ctx.value_text(ctx.one("process.threads", pid=pid)),
                  f"{sum(csw):.0f}" if csw else "–", prio=relevance(pid)[0])
    return t


def gil_lines(ctx: PaneContext) -> Text | None:
    """The GIL sampler's results (G): share of dumps with the GIL held, by whom, and what
    the sampler itself costs (py-spy's CPU per wall second, and the wall time of a dump).
    Off: one line saying how to turn it on, where a key does (the live screen)."""
    held = ctx.readings("python.gil_held_ratio")
    if not held and ctx.summaries.gil is not None:
        return ctx.summaries.gil      # the demo's G: a bundled line, labelled as such
    if not held:
        hint = ctx.summaries.gil_hint
        return Text(f"GIL sampler off (press {hint})", style=ctx.styles["muted"]) \
            if hint and ctx.readings("process.info") else None
    out = Text(no_wrap=True)
    for n, r in enumerate(held[:4]):
        pid = r.label("pid")
        if n:
            out.append("\n")
        append_cells(out, "GIL held ", ctx.value_text(r))
        holder = ctx.one("python.gil_holder", pid=pid)
        if holder is not None and holder.text:
            out.append(f" by {clean(holder.text)}")
        out.append(f" (pid {pid}{' ' + r.label('role') if r.label('role') else ''})")
        cpu = ctx.one("python.gil_sampler_cpu_ratio", pid=pid)
        cost = ctx.one("python.gil_sampler_cost_seconds", pid=pid)
        spent = []
        if cpu is not None and cpu.ok and cpu.value is not None:
            spent.append(f"{cpu.value * 100:.1f} % of a core")
        if cost is not None and cost.ok and cost.value is not None:
            spent.append(f"{cost.value * 1000:.0f} ms/dump")
        if spent:
            cost_text = "sampler cost " + ", ".join(spent)
            line = out.plain.rsplit("\n", 1)[-1]
            # a narrow pane: the cost on a line of its own (never cut off at the edge)
            sep = "\n  " if ctx.width and len(line) + 2 + len(cost_text) > ctx.width else "  "
            out.append(sep + cost_text, style=ctx.styles["muted"])
        elif not r.ok:
            out.append(f"  {r.reason}", style=ctx.styles["muted"])
    return out


# top's one-letter process states
STATE_CODES = {"running": "R", "sleeping": "S", "disk-sleep": "D", "stopped": "T",
               "tracing-stop": "t", "zombie": "Z", "dead": "X", "idle": "I", "waking": "W",
               "parked": "P"}


def _depths(procs) -> dict[str, int]:
    parent = {p.label("pid"): p.label("ppid") for p in procs}
    out: dict[str, int] = {}
    for pid in parent:     # walk up until a known depth: linear in the tree
        chain, cur = [], pid
        while cur in parent and cur not in out and cur not in chain:
            chain.append(cur)
            cur = parent[cur]
        base = out.get(cur, -1) if cur in parent else -1
        for i, c in enumerate(reversed(chain)):
            out[c] = base + 1 + i
    return out
