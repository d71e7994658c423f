"""3 memory: GPU memory per GPU and per process, KV-cache usage, preemptions, prefix hits."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text

from infertop.model import Layer
from infertop.units import bar, fmt_value

from .base import LayerPane, PaneContext, fit, grid, kv_table
from .gpu_procs import gpu_process_table
from .hardware import gpu_indices


class MemoryPane(LayerPane):
    pane_layer = Layer.MEMORY

    def render_frame(self, ctx: PaneContext) -> RenderableType:
        parts: list = []
        rows: list[tuple[str, Text, Text | str]] = []
        more = 0
        kvs, left = ctx.top(ctx.readings("kv.usage_ratio"), ctx.row_cap)
        more += left
        for kv in kvs:
            cell = Text(bar(kv.value if kv.ok else None, 8) + " ")
            cell.append_text(ctx.value_text(kv))
            rows.append(("KV cache" + ctx.engine_tag(kv), cell,
                         ctx.spark("kv.usage_ratio", 16, 0, 1, **dict(kv.labels))))
        for key, label in (("server.preemptions_per_second", "preempt/s"),
                           ("kv.prefix_cache_hit_ratio", "prefix hits")):
            rs, left = ctx.top(ctx.readings(key), ctx.row_cap)
            more += left
            for r in rs:   # one row per engine, labelled with it when there are several
                rows.append((label + ctx.engine_tag(r), ctx.value_text(r),
                             ctx.spark(key, 16, **dict(r.labels))))
        cfg = {r.label("name"): r.text for r in ctx.readings("kv.config")}
        if cfg.get("num_gpu_blocks"):
            rows.append(("KV blocks", Text(f"{cfg['num_gpu_blocks']} × {cfg.get('block_size', '?')}"
                                           " tokens"), ""))
        if rows:
            table = kv_table(rows, narrow=ctx.width < 70)
            table.more = more
            parts.append(table)
        elif not ctx.readings("server.info"):
            parts.append(ctx.note("No server metrics: KV cache unknown "
                                  f"({ctx.source_reason('server') or 'no --url / server found'})"))
        gpus = gpu_indices(ctx)
        if gpus:
            t = grid(["GPU", "used", "free", "headroom", "trend (60 s)"], styles=ctx.styles)
            gpus, t.more = ctx.pick(gpus, "gpu")
            for g in gpus:
                used = ctx.one("gpu.mem_used_bytes", gpu=g)
                total = ctx.one("gpu.mem_total_bytes", gpu=g)
                free = head = Text("–")
                if used and total and used.ok and total.ok and total.value:
                    free = Text(fmt_value(total.value - used.value, "bytes"))
                    ratio = 1 - used.value / total.value
                    head = Text(f"{ratio * 100:.0f} %")
                    flag = ctx.flag("gpu.mem_used_bytes", used.labels)
                    if flag:
                        head = Text(f"{ratio * 100:.0f} % {flag[1]}", style=ctx.styles[flag[0]])
                t.add_row(g, ctx.value_text(used), free, head,
                          ctx.spark("gpu.mem_used_bytes", 16, 0,
                                    total.value if total and total.ok else None, gpu=g))
            parts.append(t)
        procs = [r for r in ctx.readings("process.gpu_mem_bytes") if r.label("pid")]
        if procs and ctx.view is not None:   # zoomed: every GPU process, nvitop's columns
            held, outside = ctx.gpu_holders()
            parts.append(gpu_process_table(ctx))
        elif procs:
            held, outside = ctx.gpu_holders()
            t = grid(["PID", "process", "GPU", "GPU mem"], styles=ctx.styles)
            top = sorted(procs, key=lambda r: -(r.value or 0))
            t.more = max(0, len(top) - (8 if ctx.wide else 4))
            for r in top[: 8 if ctx.wide else 4]:
                t.add_row(r.label("pid"), held.get(r.label("pid"), "(not the server)"),
                          r.label("gpu"), ctx.value_text(r, key="process.gpu_mem_bytes"))
            parts.append(t)
        if procs:
            if outside:
                where = " (in a container, host PIDs may be invisible)" \
                    if ctx.frame.snapshot.meta("in_container") else ""
                parts.append(ctx.note(f"{len(outside)} GPU process(es) outside the server's "
                                      f"tree{where}"))
        host_used, host_total = ctx.one("host.mem_used_bytes"), ctx.one("host.mem_total_bytes")
        if host_used and host_total and host_used.ok and host_total.ok:
            parts.append(Text(f"host RAM {fmt_value(host_used.value, 'bytes')} / "
                              f"{fmt_value(host_total.value, 'bytes')}", style=ctx.styles["muted"]))
        return fit(ctx, *parts) if parts else ctx.note("no memory readings yet")
