"""4 scheduling: the server's process tree, per-thread CPU, queue, context switches, GIL."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text

from infertop.model import Layer

from .base import LayerPane, PaneContext, grid, group


class SchedulingPane(LayerPane):
    pane_layer = Layer.SCHEDULING

    def render_frame(self, ctx: PaneContext) -> RenderableType:
        parts: list = []
        queue = Text()
        for key, label in (("server.requests_running", "running"),
                           ("server.requests_waiting", "waiting"),
                           ("latency.queue_seconds", "queue p99")):
            rs = ctx.readings(key, quantile="0.99") if key.startswith("latency") else \
                ctx.readings(key)
            for r in rs:
                eng = r.label("engine")
                queue.append(f"{label}{' e' + eng if eng and _multi(ctx, key) else ''} ")
                queue.append_text(ctx.value_text(r))
                queue.append("  ")
        if queue:
            queue.append_text(ctx.spark("server.requests_waiting", 12, 0))
            parts.append(queue)
        host = ctx.one("host.cpu_ratio")
        if host is not None:
            cores = ctx.one("host.cpu_count")
            line = Text("host CPU ").append_text(ctx.value_text(host))
            if cores and cores.ok:
                line.append(f" of {cores.value:.0f} cores ")
            parts.append(line.append_text(ctx.spark("host.cpu_ratio", 12, 0, 1)))
        procs = ctx.readings("process.info")
        server = ctx.frame.snapshot.meta("server")
        if procs and isinstance(server, dict) and server.get("found_by"):
            # --url's port owner could not be read: this tree is a guess, and says so
            parts.append(ctx.note(f"found by name, not by port: {server.get('reason', '')}"))
        if procs:
            narrow = ctx.width < 70   # 80x24: names give way to the numbers
            t = grid(["PID", "process", "S", "CPU", "RSS", "thr", "csw/s"], styles=ctx.styles,
                     max_width=16 if narrow else 30)
            depth = _depths(procs)
            for p in sorted(procs, key=lambda p: (depth.get(p.label("pid"), 0), int(p.label("pid") or 0))):
                pid = p.label("pid")
                name = p.label("name") or "?"
                role = p.label("role")
                indent = "  " * depth.get(pid, 0)
                csw = [r.value for r in ctx.readings("process.ctx_switches_per_second", pid=pid)
                       if r.ok]
                state = ctx.one("process.state", pid=pid)
                code = STATE_CODES.get(state.text, "?") if state is not None and state.text else "–"
                t.add_row(pid, f"{indent}{name}" + (f" ({role})" if role and role not in name.lower() else ""),
                          Text(code, style=ctx.styles["warn"] if code == "D" else ""),
                          ctx.value_text(ctx.one("process.cpu_ratio", pid=pid)),
                          ctx.value_text(ctx.one("process.rss_bytes", pid=pid)),
                          ctx.value_text(ctx.one("process.threads", pid=pid)),
                          f"{sum(csw):.0f}" if csw else "–")
            parts.append(t)
            threads = sorted((r for r in ctx.readings("thread.cpu_ratio") if r.ok),
                             key=lambda r: -(r.value or 0))[: max(3, ctx.height - len(procs) - 6)]
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
                                  (f"\nLooked for {looked}." if looked else "")))
        gil = ctx.summaries.pyspy
        if gil is not None:
            parts.append(gil)
        return group(*parts)


# top's one-letter process states
STATE_CODES = {"running": "R", "sleeping": "S", "disk-sleep": "D", "stopped": "T",
               "tracing-stop": "t", "zombie": "Z", "dead": "X", "idle": "I", "waking": "W",
               "parked": "P"}


def _multi(ctx: PaneContext, key: str) -> bool:
    """More than one engine reports this key (then rows say which engine)."""
    return len({(r.label("instance"), r.label("engine")) for r in ctx.readings(key)}) > 1


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
