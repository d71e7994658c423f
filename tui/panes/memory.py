"""3 memory: GPU memory per GPU and per process, KV-cache usage, preemptions, prefix hits."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text

from infertop.model import Layer
from infertop.units import bar, fmt_value

from .cells import Cell, append_cells
from .columns import grid, kv_table
from .context import PaneContext
from .gpu_procs import gpu_process_table, not_the_server
from .hardware import gpu_indices
from .layout import fit
from .widget import LayerPane


class MemoryPane(LayerPane):
    pane_layer = Layer.MEMORY

    def render_frame(self, ctx: PaneContext) -> RenderableType:
        parts: list = []
        rows: list[tuple[str, Cell | Text, Cell | str]] = []
        more = 0
        kvs, left = ctx.top(ctx.readings("kv.usage_ratio"), ctx.row_cap)
        more += left
        for kv in kvs:
            cell = Cell.make(bar(kv.value if kv.ok else None, 8) + " ").plus(ctx.value_text(kv))
            rows.append(("KV cache" + ctx.engine_tag(kv), cell,
                         ctx.spark("kv.usage_ratio", 16, 0, 1, **dict(kv.labels))))
        for key, label in (("server.preemptions_per_second", "preempt/s"),
                           ("kv.prefix_cache_hit_ratio", "prefix hits")):
            rs, left = ctx.top(ctx.readings(key), ctx.row_cap)
            more += left
            for r in rs:   # one row per engine, labelled with it when there are several
                rows.append((label + ctx.engine_tag(r), ctx.value_text(r),
                             ctx.spark(key, 16, **dict(r.labels))))
        rows += prompt_kv_rows(ctx)
        rows += kv_event_rows(ctx)
        cfg = {r.label("name"): r.text for r in ctx.readings("kv.config")}
        if cfg.get("num_gpu_blocks"):
            rows.append(("KV blocks", Text(f"{cfg['num_gpu_blocks']} × {cfg.get('block_size', '?')}"
                                           " tokens"), ""))
        if rows:
            table = kv_table(rows, narrow=ctx.width < 70)
            table.more = more
            if kvs:    # the memory layer's reading: kept like a flagged row in a short pane
                table.pinned.add(0)   # (80x24 with 8 GPUs and a demo's banner: 2 lines)
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
                free: Cell | str = "–"
                head: Cell | str = "–"
                if used and total and used.ok and total.ok and total.value and \
                        used.value is not None:
                    free = Cell.make(fmt_value(total.value - used.value, "bytes"))
                    ratio = 1 - used.value / total.value
                    head = Cell.make(f"{ratio * 100:.0f} %")
                    flag = ctx.flag("gpu.mem_used_bytes", used.labels)
                    if flag:
                        head = Cell.make(f"{ratio * 100:.0f} % {flag[1]}", ctx.styles[flag[0]])
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
            owners = {r.label("pid"): r for r in ctx.readings("process.gpu_owner")}
            for r in top[: 8 if ctx.wide else 4]:
                t.add_row(r.label("pid"), held.get(r.label("pid")) or
                          not_the_server(owners.get(r.label("pid"))),
                          r.label("gpu"), ctx.value_text(r, key="process.gpu_mem_bytes"))
            parts.append(t)
        pm = ctx.frame.snapshot.process_meta()
        if not procs and gpus and pm is not None and pm.in_container:
            # NVML lists host PIDs: in a container's own PID namespace they name nothing
            # here (or the driver lists none), so "no processes" would be a false reading
            if ctx.view is None and ctx.height < 20:
                # a short pane keeps its KV and GPU rows (80x24, 160x48): the reason in one
                # line, the whole of it in a tall or zoomed pane
                parts.append(ctx.note("GPU processes not shown: in a container (zoom: 3)"))
            else:
                parts.append(ctx.note(
                    "GPU processes not shown: infertop runs in a container "
                    f"({pm.in_container_why or 'detected'}) and NVML's PIDs are the host's; "
                    "run it on the node (or with --pid=host / hostPID: true) to see them"))
        if procs:
            if outside:
                where = " (in a container, host PIDs may be invisible)" \
                    if (pm := ctx.frame.snapshot.process_meta()) and pm.in_container else ""
                parts.append(ctx.note(f"{len(outside)} GPU process(es) outside the server's "
                                      f"tree{where}"))
        host_used, host_total = ctx.one("host.mem_used_bytes"), ctx.one("host.mem_total_bytes")
        if host_used and host_total and host_used.ok and host_total.ok:
            parts.append(Text(f"host RAM {fmt_value(host_used.value, 'bytes')} / "
                              f"{fmt_value(host_total.value, 'bytes')}", style=ctx.styles["muted"]))
        return fit(ctx, *parts) if parts else ctx.note("no memory readings yet")


# where a prompt's KV came from (vLLM prompt_tokens_by_source), in this order
SOURCES = (("local_compute", "computed"), ("local_cache_hit", "cached"),
           ("external_kv_transfer", "transferred"))


def prompt_kv_rows(ctx: PaneContext) -> list[tuple]:
    """'prompt KV' (the window's prompt tokens computed / cached / transferred; only when
    some KV arrives by transfer: disaggregated serving or a KV connector), SGLang's KV
    token pool, the external KV cache's hit rate and the mean tokens a prefill computed:
    rows only for what the server reports."""
    rows: list[tuple] = []
    shares = [r for r in ctx.readings("kv.prompt_source_ratio") if r.ok]
    engines = sorted({(r.label("instance"), r.label("engine")) for r in shares})
    for inst, eng in engines[: max(1, ctx.row_cap)]:
        mine = {r.label("source"): r for r in shares
                if r.label("instance") == inst and r.label("engine") == eng}
        moved = mine.get("external_kv_transfer")
        if moved is None or not (moved.value or ctx.flag(moved.key, moved.labels)):
            continue   # computed vs cached alone is the 'prefix hits' row already
        cell = Text()
        for src, name in SOURCES:
            r = mine.get(src)
            if r is not None:
                if cell:
                    cell.append(" · ")
                append_cells(cell, f"{name} ", ctx.value_text(r))
        tag = ctx.engine_tag(next(iter(mine.values())))
        rows.append(("prompt KV" + tag, cell, ""))
    rows += cache_tier_rows(ctx)
    for r in ctx.readings("kv.used_tokens")[: max(1, ctx.row_cap)]:
        lab = {k: v for k, v in r.labels if k in ("instance", "engine", "model")}
        cell = append_cells(Text("used "), ctx.value_text(r))
        for key, name in (("kv.evictable_tokens", "cached"), ("kv.available_tokens", "free")):
            other = ctx.one(key, **lab)
            if other is not None and other.ok:
                append_cells(cell, f" · {name} ", ctx.value_text(other))
        rows.append(("KV tokens" + ctx.engine_tag(r), cell, ""))
    for key, label in (("kv.external_prefix_cache_hit_ratio", "ext. cache hits"),
                       ("request.prefill_computed_tokens_mean", "prefill computed")):
        for r in ctx.readings(key)[: max(1, ctx.row_cap)]:
            if r.ok:
                rows.append((label + ctx.engine_tag(r), ctx.value_text(r), ""))
    return rows


def cache_tier_rows(ctx: PaneContext) -> list[tuple]:
    """'hit tiers': which cache tier supplied the window's prefix hits (device HBM, host
    DRAM, disk, a peer), only when a tier beyond the device's own served some: all from
    HBM is the 'prefix hits' row already."""
    rows: list[tuple] = []
    shares = [r for r in ctx.readings("kv.cached_source_ratio") if r.ok]
    engines = sorted({(r.label("instance"), r.label("engine")) for r in shares})
    for inst, eng in engines[: max(1, ctx.row_cap)]:
        mine = sorted((r for r in shares if r.label("instance") == inst
                       and r.label("engine") == eng), key=lambda r: -(r.value or 0.0))
        if not any(r.label("source") != "device" and (r.value or 0.0) > 0 for r in mine):
            continue
        cell = Text()
        for r in mine:
            if (r.value or 0.0) > 0:
                if cell:
                    cell.append(" · ")
                append_cells(cell, f"{r.label('source')} ", ctx.value_text(r))
        rows.append(("hit tiers" + ctx.engine_tag(mine[0]), cell, ""))
    return rows


def kv_event_rows(ctx: PaneContext) -> list[tuple]:
    """The KV-cache event stream's summary per engine (only when infertop subscribes), in
    two rows that fit the value column: blocks stored / evicted per second, then the share
    of evictions stored again soon after (thrash) and the blocks resident since it
    subscribed; a third row when batches were lost (sequence gaps)."""
    rows: list[tuple] = []
    stored = ctx.readings("kv.blocks_stored_per_second")
    for r in stored[: max(1, ctx.row_cap)]:
        lab = {k: v for k, v in r.labels if k in ("instance", "engine", "medium")}
        medium = "" if lab.get("medium", "GPU") == "GPU" else f" {lab['medium']}"
        tag = medium + ctx.engine_tag(r)
        evicted = ctx.one("kv.blocks_evicted_per_second", **lab)
        rates = [x.value if x is not None and x.ok else None for x in (r, evicted)]
        cell = Text(" / ".join("–" if v is None else f"{v:.1f}" for v in rates) + " blocks/s")
        rows.append(("KV stored/evicted" + tag, cell,
                     ctx.spark("kv.blocks_evicted_per_second", 16, 0, **lab)))
        thrash = ctx.one("kv.prefix_thrash_ratio", **lab)
        resident = ctx.one("kv.event_resident_blocks", **lab)
        cell = Text()
        if thrash is not None and (thrash.ok or ctx.flag(thrash.key, thrash.labels)):
            append_cells(cell, ctx.value_text(thrash))
        if resident is not None and resident.ok:
            cell.append((" · " if cell else "") + f"{resident.value:.0f} resident")
        if cell:
            rows.append(("KV re-stored" + tag, cell,
                         ctx.spark("kv.prefix_thrash_ratio", 16, 0, 1, **lab)))
    lost = sum(r.value or 0 for r in ctx.readings("kv.event_batches_dropped_total") if r.ok)
    if stored and lost:
        rows.append(("KV events lost", Text(f"{lost:.0f} batches (sequence gaps)",
                                            style=ctx.styles["warn"]), ""))
    return rows
