"""2 kernels: tensor vs SM activity, launch-bound signs, execution settings, last capture."""

from __future__ import annotations

from rich.console import RenderableType

from infertop.model import Layer, Status
from infertop.settings_shown import cuda_graphs_text
from infertop.units import bar

from .cells import Cell
from .columns import Columns, grid, kv_table
from .context import PaneContext
from .hardware import gpu_indices
from .layout import Expendable, fit
from .widget import LayerPane

SETTINGS_SHOWN = ("cuda_graphs", "compilation", "max_num_seqs", "max_num_batched_tokens",
                  "tensor_parallel_size", "speculative_config", "kv_cache_dtype", "dtype",
                  "parallel", "threads", "ctx_size")


class KernelsPane(LayerPane):
    pane_layer = Layer.KERNELS

    def render_frame(self, ctx: PaneContext) -> RenderableType:
        parts: list = []
        gpus = gpu_indices(ctx)
        if gpus:
            t = grid(["GPU", "SM active", "tensor", "occupancy", "DRAM bw"], styles=ctx.styles)
            gpus, t.more = ctx.pick(gpus, "gpu")
            for g in gpus:
                sm = ctx.one("gpu.sm_active_ratio", gpu=g)
                cell = Cell.make(bar(sm.value if sm and sm.ok else None, 6) + " ").plus(
                    ctx.value_text(sm))
                t.add_row(g, cell, ctx.value_text(ctx.one("gpu.tensor_active_ratio", gpu=g)),
                          ctx.value_text(ctx.one("gpu.sm_occupancy_ratio", gpu=g)),
                          ctx.value_text(ctx.one("gpu.dram_bw_util_ratio", gpu=g)))
            parts.append(t)
        else:
            parts.append(ctx.note("No GPU activity counters (no NVML/GPM here)."))
        rows: list[tuple[str, Cell, Cell | str]] = []
        it = ctx.one("server.iteration_tokens_mean")
        if it is not None:
            rows.append(("tokens/step", ctx.value_text(it), ctx.spark("server.iteration_tokens_mean")))
        steps = ctx.one("server.engine_steps_per_second")
        if steps is not None:
            rows.append(("steps/s", ctx.value_text(steps), ""))
        engine = _engine_process(ctx)
        if engine is not None:
            cpu = ctx.one("process.cpu_ratio", pid=engine.label("pid"))
            rows.append(("engine CPU", ctx.value_text(cpu),
                         ctx.spark("process.cpu_ratio", 12, 0, 1, pid=engine.label("pid"))))
        rows += speed_of_light_rows(ctx)
        settings = {r.label("name"): r for r in ctx.readings("server.setting")}
        for name in SETTINGS_SHOWN:
            if name in settings:
                value = ctx.value_text(settings[name], key="server.setting")
                if name == "cuda_graphs":
                    value = _cuda_graphs(ctx, value, bool(gpus))
                rows.append((name.replace("_", " "), value, ""))
        if rows:
            parts.append(kv_table(rows, narrow=ctx.width < 70))
        trends = None
        if gpus and ctx.height >= len(parts) + 12 + 2 * len(gpus):  # room: the last minute
            trends = Columns(["trend", "SM active", "tensor", "DRAM bw"],
                             header_style=ctx.styles["header"])
            for g in gpus:
                trends.add_row(f"GPU {g}", ctx.spark("gpu.sm_active_ratio", 16, 0, 1, gpu=g),
                               ctx.spark("gpu.tensor_active_ratio", 16, 0, 1, gpu=g),
                               ctx.spark("gpu.dram_bw_util_ratio", 16, 0, 1, gpu=g))
        nsys = ctx.summaries.nsys
        if nsys:
            parts.append(nsys)
        else:
            parts.append(Expendable(ctx.note("top kernels: press n for an Nsight Systems capture")))
        return fit(ctx, *parts, Expendable(trends))


def _cuda_graphs(ctx: PaneContext, value: Cell, gpus: bool) -> Cell:
    """A default read off the command line is a guess: no GPU seen means there are no CUDA
    graphs to speak of, and a server that does not answer may not run with that line."""
    text = value.plain
    device = ctx.one("server.setting", name="device")
    down = any(name.startswith("server") and s.status is not Status.OK
               for name, s in ctx.frame.snapshot.samples.items())
    shown = cuda_graphs_text(text, gpus_seen=gpus, server_down=down,
                             device=device.text if device is not None else None)
    return value if shown == text else Cell.of_text(shown, ctx.styles["muted"])


def speed_of_light_rows(ctx: PaneContext) -> list[tuple]:
    """MFU/MBU and decode tokens/s against the bandwidth roofline (infertop.sol_derive);
    a missing value shows "–" here and its reason in snapshot/doctor."""
    rows: list[tuple] = []
    mfu, mbu = ctx.one("sol.mfu_ratio"), ctx.one("sol.mbu_ratio")
    if mfu is not None or mbu is not None:
        cell = ctx.value_text(mfu).plus(" / ", ctx.value_text(mbu))
        rows.append(("MFU / MBU", cell, ""))
    roof = ctx.one("sol.decode_roofline_ratio")
    if roof is not None:
        cell = ctx.value_text(roof).plus(
            " of ", ctx.value_text(ctx.one("sol.decode_roofline_tokens_per_second")))
        rows.append(("roofline", cell, ctx.spark("sol.decode_roofline_ratio", 12, 0, 1)))
    return rows


def _engine_process(ctx: PaneContext):
    """The process that launches kernels' work: EngineCore/scheduler, else the server root."""
    procs = ctx.readings("process.info")
    for role in ("engine_core", "scheduler", "worker", "server", "api_server"):
        for p in procs:
            if p.label("role") == role:
                return p
    return procs[0] if procs else None
