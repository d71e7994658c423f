"""4 scheduling: the server's process tree, per-thread CPU, queue, context switches, GIL."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text

from infertop.model import Layer

from .base import LayerPane, PaneContext, grid, group, kv_table


class SchedulingPane(LayerPane):
    pane_layer = Layer.SCHEDULING

    def render_frame(self, ctx: PaneContext) -> RenderableType:
        parts: list = []
        rows = []
        for key, label in (("server.requests_running", "running"),
                           ("server.requests_waiting", "waiting")):
            for r in ctx.readings(key):
                eng = r.label("engine")
                rows.append((label + (f" e{eng}" if eng and _multi(ctx, key) else ""),
                             ctx.value_text(r), ctx.spark(key, 16, 0, **dict(r.labels))))
        for r in ctx.readings("latency.queue_seconds", quantile="0.99"):
            rows.append(("queue p99", ctx.value_text(r), ""))
        host = ctx.one("host.cpu_ratio")
        if host is not None:
            cores = ctx.one("host.cpu_count")
            extra = f" of {cores.value:.0f} cores" if cores and cores.ok else ""
            rows.append(("host CPU", ctx.value_text(host).append(extra), ctx.spark("host.cpu_ratio", 16, 0, 1)))
        if rows:
            parts.append(kv_table(rows))
        procs = ctx.readings("process.info")
        if procs:
            t = grid(["PID", "process", "CPU", "RSS", "thr", "csw/s"], styles=ctx.styles)
            depth = _depths(procs)
            for p in sorted(procs, key=lambda p: (depth.get(p.label("pid"), 0), int(p.label("pid") or 0))):
                pid = p.label("pid")
                name = p.label("name") or "?"
                role = p.label("role")
                indent = "  " * depth.get(pid, 0)
                csw = [r.value for r in ctx.readings("process.ctx_switches_per_second", pid=pid)
                       if r.ok]
                t.add_row(pid, f"{indent}{name}" + (f" ({role})" if role and role not in name.lower() else ""),
                          ctx.value_text(ctx.one("process.cpu_ratio", pid=pid)),
                          ctx.value_text(ctx.one("process.rss_bytes", pid=pid)),
                          ctx.value_text(ctx.one("process.threads", pid=pid)),
                          f"{sum(csw):.0f}" if csw else "–")
            parts.append(t)
            threads = sorted((r for r in ctx.readings("thread.cpu_ratio") if r.ok),
                             key=lambda r: -(r.value or 0))[: 6 if ctx.wide else 3]
            if threads:
                tt = grid(["TID", "thread", "CPU", "of PID"], styles=ctx.styles)
                for r in threads:
                    tt.add_row(r.label("tid"), r.label("name"), ctx.value_text(r), r.label("pid"))
                parts.append(tt)
        else:
            snap = ctx.frame.snapshot
            looked = snap.meta("looked_for")
            why = ctx.source_reason("process")
            parts.append(ctx.note("No server process found" + (f": {why}" if why else "") +
                                  (f"\nlooked for {looked}" if looked else "")))
        gil = ctx.extras.get("pyspy_summary")
        if gil is not None:
            parts.append(gil)
        return group(*parts)


def _multi(ctx: PaneContext, key: str) -> bool:
    return len(ctx.readings(key)) > 1


def _depths(procs) -> dict[str, int]:
    parent = {p.label("pid"): p.label("ppid") for p in procs}
    out = {}
    for pid in parent:
        d, cur, seen = 0, pid, set()
        while parent.get(cur) in parent and cur not in seen:
            seen.add(cur)
            cur = parent[cur]
            d += 1
        out[pid] = d
    return out
