"""6 decoding: TTFT, ITL, E2E and queue percentiles over the window, tokens/s, spec, errors."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text

from infertop.model import Layer, Reading, Status

from .columns import grid, kv_table
from .context import PaneContext
from .layout import Expendable, fit
from .widget import LayerPane

LATENCIES = (("latency.ttft_seconds", "TTFT"), ("latency.itl_seconds", "ITL"),
             ("latency.e2e_seconds", "E2E"), ("latency.queue_seconds", "queue"))


class DecodingPane(LayerPane):
    pane_layer = Layer.DECODING

    def render_frame(self, ctx: PaneContext) -> RenderableType:
        if not ctx.readings("server.info"):
            why = ctx.source_reason("server") or "no server metrics (give --url, or start one)"
            return ctx.note(f"No decoding readings: {why}")
        window = int(ctx.frame.window)
        t = grid(["latency", "p50", "p90", "p99", "p99 (trend)"], styles=ctx.styles)
        t.drop = (4, 2, 1)     # narrow: the trend goes first, p99 (the tail) last
        # the label column keeps its header whole: at 80x24 a p99 with its finding's code
        # shrank it to six columns ("laten…", and "TTFT e0" to "TTFT …"); a column goes first
        t.cut_min = len("latency")
        for key, label in LATENCIES:
            # one row per engine (the worst p99s when there are more than fit)
            found, left = ctx.top(ctx.readings(key, quantile="0.99"), ctx.row_cap)
            t.more += left
            p99s: list[Reading | None] = list(found) or [None]   # None: the p50/p90 alone
            for p99 in p99s:
                lab = {k: v for k, v in p99.labels if k != "quantile"} if p99 else {}
                qs = {q: ctx.one(key, quantile=q, **lab) for q in ("0.5", "0.9")}
                if p99 is None and not any(qs.values()):
                    continue
                t.add_row(label + (ctx.engine_tag(p99) if p99 else ""),
                          ctx.value_text(qs["0.5"]), ctx.value_text(qs["0.9"]),
                          ctx.value_text(p99),
                          ctx.spark(key, 14, **dict(p99.labels)) if p99 is not None else "",
                          pinned=key == "latency.ttft_seconds" and not t.pinned)
        rows = []
        more = 0
        for key, label in (("throughput.generation_tokens_per_second", "gen tok/s"),
                           ("throughput.prompt_tokens_per_second", "prompt tok/s"),
                           ("server.requests_per_second", "req/s"),
                           ("server.error_ratio", "errors"),
                           ("server.rejection_ratio", "refused"),
                           ("spec.acceptance_ratio", "spec accept"),
                           ("server.uptime_seconds", "uptime")):
            rs, left = ctx.top(ctx.readings(key), ctx.row_cap)
            more += left
            if key == "server.rejection_ratio":   # a row only once requests are refused
                rs = [r for r in rs if r.value or ctx.flag(r.key, r.labels)]
            for r in rs:   # repeated per engine: each row says which
                trend = "" if key == "server.uptime_seconds" else \
                    ctx.spark(key, 16, 0, **dict(r.labels))
                rows.append((label + ctx.engine_tag(r), ctx.value_text(r), trend))
        head = Text(f"percentiles over the last {window} s", style=ctx.styles["muted"])
        down = [f"{name.split(':', 1)[1]}: {s.reason}"
                for name, s in ctx.frame.snapshot.samples.items()
                if name.startswith("server:") and s.status is not Status.OK]
        trouble = ctx.note("\n".join(down), "warn") if down else None  # one server of several
        kv = kv_table(rows, narrow=ctx.width < 70)
        kv.more = more
        return fit(ctx, trouble, t, kv, Expendable(head))
