"""5 parallelism: balance across GPUs and engines, interconnect traffic and topology."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text

from infertop.model import Layer

from .base import LayerPane, PaneContext, grid, group, kv_table
from .hardware import gpu_indices


def spread(values: list[float]) -> float | None:
    return (max(values) - min(values)) if len(values) > 1 else None


class ParallelismPane(LayerPane):
    pane_layer = Layer.PARALLELISM

    def render_frame(self, ctx: PaneContext) -> RenderableType:
        parts: list = []
        gpus = gpu_indices(ctx)
        if gpus:
            t = grid(["GPU", "util", "SM act", "mem", "PCIe tx", "NVLink tx", "holder"],
                     styles=ctx.styles)
            holders: dict[str, list[str]] = {}
            held, _ = ctx.gpu_holders()
            for r in ctx.readings("process.gpu_mem_bytes"):
                if r.label("pid"):
                    holders.setdefault(r.label("gpu"), []).append(
                        held.get(r.label("pid"), r.label("pid")))
            for g in gpus:
                t.add_row(g, ctx.value_text(ctx.one("gpu.util_ratio", gpu=g)),
                          ctx.value_text(ctx.one("gpu.sm_active_ratio", gpu=g)),
                          ctx.value_text(ctx.one("gpu.mem_used_bytes", gpu=g)),
                          ctx.value_text(ctx.one("gpu.pcie_tx_bytes_per_second", gpu=g)),
                          ctx.value_text(ctx.one("gpu.nvlink_tx_bytes_per_second", gpu=g)),
                          ",".join(holders.get(g, []))[:18] or "–")
            parts.append(t)
            rows = []
            for key, label in (("gpu.sm_active_ratio", "SM act spread"),
                               ("gpu.util_ratio", "util spread")):
                vals = [r.value for r in ctx.readings(key) if r.ok]
                s = spread(vals)
                if s is not None:
                    rows.append((label, Text(f"{s * 100:.0f} pts"), ""))
            links = {r.text for r in ctx.readings("gpu.topology") if r.text}
            if links:
                rows.append(("GPU links", Text(", ".join(sorted(links))), ""))
            if rows:
                parts.append(kv_table(rows, narrow=ctx.width < 70))
        else:
            parts.append(ctx.note("Single host view: no GPUs visible for balance."))
        engines = sorted({(r.label("instance"), r.label("engine"))
                          for r in ctx.readings("server.requests_running")})
        if engines:
            t = grid(["engine", "run", "wait", "KV", "gen tok/s"], styles=ctx.styles)
            many = len({i for i, _ in engines}) > 1
            for inst, eng in engines:
                lab = {"instance": inst, "engine": eng} if eng else {"instance": inst}
                where = inst if many else ":" + inst.rsplit(":", 1)[-1]
                name = f"{where} e{eng}" if eng else where
                t.add_row(name[-22:], ctx.value_text(ctx.one("server.requests_running", **lab)),
                          ctx.value_text(ctx.one("server.requests_waiting", **lab)),
                          ctx.value_text(ctx.one("kv.usage_ratio", **lab)),
                          ctx.value_text(ctx.one("throughput.generation_tokens_per_second", **lab)))
            parts.append(t)
        return group(*parts)
