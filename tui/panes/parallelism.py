"""5 parallelism: balance across GPUs and engines, interconnect traffic and topology."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text

from infertop.model import Layer, Reading

from .cells import Cell, append_cells
from .columns import grid, kv_table
from .context import PaneContext
from .hardware import gpu_indices
from .layout import Expendable, fit
from .widget import LayerPane


def natural(s: str) -> tuple:
    return (0, int(s)) if s.isdigit() else (1, s)


def spread(values: list[float]) -> float | None:
    return (max(values) - min(values)) if len(values) > 1 else None


class ParallelismPane(LayerPane):
    pane_layer = Layer.PARALLELISM

    def render_frame(self, ctx: PaneContext) -> RenderableType:
        parts: list = []
        gpus = gpu_indices(ctx)
        if gpus:
            t = grid(["GPU", "util", "SM act", "mem", "PCIe", "NVLink tx", "holder"],
                     styles=ctx.styles)
            gpus, t.more = ctx.pick(gpus, "gpu")
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
                          pcie_cell(ctx, g),
                          ctx.value_text(ctx.one("gpu.nvlink_tx_bytes_per_second", gpu=g)),
                          ",".join(holders.get(g, []))[:18] or "–")
            parts.append(t)
            rows = []
            for key, label in (("gpu.sm_active_ratio", "SM act spread"),
                               ("gpu.util_ratio", "util spread")):
                vals = [v for r in ctx.readings(key) if r.ok and (v := r.value) is not None]
                s = spread(vals)
                if s is not None:
                    rows.append((label, Text(f"{s * 100:.0f} pts"), ""))
            links = {r.text for r in ctx.readings("gpu.topology") if r.text}
            if links:
                rows.append(("GPU links", Text(", ".join(sorted(links))), ""))
            if rows:
                parts.append(Expendable(kv_table(rows, narrow=ctx.width < 70)))
        else:
            parts.append(ctx.note("Single host view: no GPUs visible for balance."))
        running = ctx.readings("server.requests_running")
        if running:
            t = grid(["engine", "run", "wait", "KV", "gen tok/s"], styles=ctx.styles)
            # the busiest engines and any a finding is about; rows only for those
            shown, t.more = ctx.top(running, ctx.row_cap)
            many = ctx.distinct_instances("server.requests_running") > 1
            labels = []
            for r in sorted(shown, key=lambda r: (r.label("instance"), natural(r.label("engine")))):
                inst, eng = r.label("instance"), r.label("engine")
                where = (ctx.container_of(inst) or inst) if many else ":" + inst.rsplit(":", 1)[-1]
                name = f"{where} e{eng}" if eng else where
                labels.append(name[-22:])

                def same(key: str):   # the same engine's reading (called in this iteration)
                    got = ctx.exact(key, r.labels)  # noqa: B023
                    if got is None:
                        lab = {"instance": inst, "engine": eng} if eng else {"instance": inst}  # noqa: B023
                        got = ctx.one(key, **lab)
                    return got
                t.add_row(name[-22:], ctx.value_text(r),
                          ctx.value_text(same("server.requests_waiting")),
                          ctx.value_text(same("kv.usage_ratio")),
                          ctx.value_text(same("throughput.generation_tokens_per_second")))
            # the label (at most 22 columns, its end kept: the port) stays whole and a
            # column goes instead: ":8000 e0" cut to six was ":8000…", and a cut never ends
            # inside a number, so ":…" (nothing useful)
            t.cut_min = max(t.cut_min, max(map(len, labels), default=0))
            parts.append(t)
        pd = disagg_lines(ctx)
        if pd is not None:
            parts.append(pd)
        return fit(ctx, *parts)


def disagg_lines(ctx: PaneContext) -> Text | None:
    """Disaggregated prefill/decode: each instance's role (SGLang's engine_type, vLLM's
    --kv-transfer-config kv_role), prefill instances before decode ones so a pair reads
    left to right, with the KV transfer's p99 time, rate and failures where the server
    reports them.  None for unified engines without transfers (the usual case)."""
    roles: dict[str, str] = {}
    for r in ctx.readings("server.disagg_role"):
        if r.text and r.text != "unified":
            roles[r.label("instance")] = r.text
    setting = next((r.text for r in ctx.readings("server.setting")
                    if r.label("name") == "disagg_role" and r.text), None)
    p99s = [r for r in ctx.readings("latency.kv_transfer_seconds", quantile="0.99")]
    if setting and not roles:
        inst = next((r.label("instance") for r in ctx.readings("server.requests_running")), "")
        roles[inst] = setting
    if not roles and not p99s:
        return None
    order = {"prefill": 0, "both": 1, "decode": 2}
    out = Text(no_wrap=True)
    out.append("P/D ")
    for n, inst in enumerate(sorted(roles, key=lambda i: (order.get(roles[i], 3), i))):
        out.append(("  →  " if n else "") + f"{roles[inst]} :{inst.rsplit(':', 1)[-1]}")
    # the sender of a pair (vLLM's prefill instance) registers the NIXL families but
    # observes no transfer: its empty histogram is no line of its own
    p99s = [r for r in p99s if r.ok or roles.get(r.label("instance")) != "prefill"]
    for r in p99s[: max(1, ctx.row_cap)]:
        who = r.label("instance").rsplit(":", 1)[-1]
        out.append(f"\nKV transfer :{who} p99 " if len(roles) > 1 else "\nKV transfer p99 ")
        append_cells(out, ctx.value_text(r))
        rate = ctx.one("kv.transfer_bytes_per_second", instance=r.label("instance"))
        if rate is not None and rate.ok:
            append_cells(out, "  ", ctx.value_text(rate))
        fails = ctx.one("kv.transfer_failures_total", instance=r.label("instance"))
        if fails is not None and fails.ok and fails.value:
            out.append(f"  {fails.value:.0f} failed", style=ctx.styles["warn"])
    ttft_split(ctx, out)
    return out


SPLIT_PARTS = ("prefill", "transfer", "decode")


def ttft_split(ctx: PaneContext, out: Text) -> None:
    """Where a pair's first token waits, per decode instance (pd.ttft_split_seconds,
    infertop/pdsplit.py): window means of the prefill instance's TTFT, the transfer and
    the decode side, which add up (percentiles of differently bucketed histograms do
    not).  A part not measured says so ("not measured" and the first reason), never 0;
    below it the p99s that exist, a bucket bound shown as one ("<300 ms")."""
    pairs: dict[tuple, dict[str, Reading]] = {}
    for r in ctx.readings("pd.ttft_split_seconds"):
        key = tuple((k, v) for k, v in r.labels if k != "part")
        pairs.setdefault(key, {})[r.label("part")] = r
    for key, parts in list(pairs.items())[: max(1, ctx.row_cap)]:
        lab = dict(key)
        where = lab.get("instance", "").rsplit(":", 1)[-1]
        out.append(f"\nTTFT split :{where}" + (f" e{lab['engine']}" if lab.get("engine")
                                                else "") + " (mean) ")
        why = ""
        total = parts.get("total")
        for n, name in enumerate(SPLIT_PARTS):
            got = parts.get(name)
            out.append(" · " if n else "")
            out.append(f"{name} ")
            if got is None or not got.ok:
                out.append("not measured", style=ctx.styles["muted"])
                why = why or (got.reason if got is not None else "")
                continue
            append_cells(out, ctx.value_text(got))
            if total is not None and total.ok and total.value and name == "transfer":
                out.append(f" ({(got.value or 0.0) / total.value:.0%})")
        if total is not None and total.ok:
            append_cells(out, " = ", ctx.value_text(total))
        if why:
            out.append("\n  " + why, style=ctx.styles["muted"])
        p99 = []
        inst = lab.get("instance", "")
        for name, key_, who in (("prefill", "latency.ttft_seconds", lab.get("prefill", "")),
                                ("transfer", "latency.kv_transfer_seconds", inst)):
            for i in [w for w in who.split(",") if w][:2]:
                q = ctx.one(key_, instance=i, quantile="0.99")
                if q is not None and q.ok:
                    p99.append((name, q))
        if p99:
            out.append("\n  p99 ")
            for n, (name, q) in enumerate(p99):
                append_cells(out, (" · " if n else "") + f"{name} ", ctx.value_text(q))
            out.append(" · decode: a difference of means, no p99", style=ctx.styles["muted"])


def pcie_cell(ctx: PaneContext, g: str) -> Cell:
    """The PCIe direction that matters: the one a finding is about, else the busier one,
    with its direction named (HW-004 is often rx: host-to-device copies)."""
    tx = ctx.one("gpu.pcie_tx_bytes_per_second", gpu=g)
    rx = ctx.one("gpu.pcie_rx_bytes_per_second", gpu=g)
    pick, name = tx, "tx"
    if rx is not None:
        if ctx.flag(rx.key, rx.labels) and not (tx is not None and ctx.flag(tx.key, tx.labels)) or tx is None or (rx.ok and tx.ok and (rx.value or 0) > (tx.value or 0)
                            and not ctx.flag(tx.key, tx.labels)):
            pick, name = rx, "rx"
    if pick is None:
        return ctx.value_text(None)
    return Cell.make(f"{name} ").plus(ctx.value_text(pick))
