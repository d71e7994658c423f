"""1 hardware: NVML per GPU (util, memory, power, clocks, throttle, PCIe) and GPM activity."""

from __future__ import annotations

import re

from rich.console import RenderableType
from rich.style import Style
from rich.text import Text

from infertop.evidence_text import CODE_RE
from infertop.model import Layer
from infertop.units import bar, natural_key

from .cells import Cell, as_cell
from .columns import Columns, grid
from .context import PaneContext, styled_value
from .layout import Expendable, fit
from .widget import LayerPane


def gpu_indices(ctx: PaneContext) -> list[str]:
    """The GPUs of the frame, in index order (once per frame: four panes ask)."""
    got = ctx.extras_cache.get("gpu_indices")
    if got is None:
        frame = ctx.frame   # the frame's per-gpu index (built in the pipeline's thread)
        idx = frame.by_label("gpu.info", "gpu").keys() | \
            frame.by_label("gpu.util_ratio", "gpu").keys()
        got = ctx.extras_cache["gpu_indices"] = sorted((i for i in idx if i), key=natural_key)
    return got


def short_name(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'H100': the model, which is what tells GPUs apart."""
    words = [w for w in name.replace("NVIDIA", "").replace("GeForce", "").split() if w]
    return (words[0] if words else name)[:10]


def no_gpu_note(ctx: PaneContext) -> Text:
    why = ctx.source_reason("nvml") or "no NVIDIA GPU found"
    return ctx.note(f"No GPU readings: {why}")


CORE = (0, 1, 2, 3, 5)     # GPU, util, SM act, mem, temp: what a compact line must keep
BAR_CHARS = frozenset("█░·")   # what units.bar draws


def core_width(t: Columns) -> int:
    """The width of the core columns of the GPU table (as Columns draws them)."""
    rows = [r for r in t.rows if len(r) > max(CORE)]
    return sum(max([len(t.headers[i]) if t.headers else 0] + [r[i].cell_len for r in rows])
               for i in CORE) + t.gap * (len(CORE) - 1)


def codes_beyond_core(t: Columns, width: int) -> bool:
    """A finding's code in a column outside the core (throttle's "HW-003") while the
    whole table does not fit: that column would be kept for its code in place of the
    temperature and cut ("sw_thermal,hw_thermal HW-…"), so the code moves to the label."""
    rows = [r for r in t.rows if len(r) > max(CORE)]
    if not any(c.codes for r in rows for i, c in enumerate(r) if i not in CORE):
        return False
    ncol = max((len(r) for r in rows), default=0)
    full = sum(max([len(t.headers[i]) if t.headers and i < len(t.headers) else 0]
                   + [r[i].cell_len for r in rows if i < len(r)]) for i in range(ncol))
    return full + t.gap * (ncol - 1) > width


def fit_compact(t: Columns, width: int, rank) -> None:
    """One line per GPU, values with their units whole: when the core columns do not
    fit side by side (a flagged GPU's codes, "91 % HW-001 45 % HW-001", made its row ~14
    columns wider and memory and temperature went), labels shrink first: the codes move
    into the GPU's label in place of the model's name ("3 HW-001") and "SM act" becomes
    "SM"; then the util bars go (they only draw the number beside them)."""
    if core_width(t) <= width and not codes_beyond_core(t, width):
        return
    for n, row in enumerate(t.rows):
        if len(row) > max(CORE) and t.codes[n]:
            label = codes_to_label([c.to_text() for c in row], row[0].plain.split(" ", 1)[0],
                                   rank)
            t.rows[n] = row = [as_cell(c) for c in label]
            t.codes[n] = tuple(CODE_RE.findall(row[0].plain))
            t.cut_min = max(t.cut_min, row[0].cell_len)    # a code is never cut
    if t.headers:
        t.headers = [*t.headers[:2], "SM", *t.headers[3:]]
    if core_width(t) <= width:
        return
    for row in t.rows:
        if len(row) > max(CORE) and row[1].plain[:1] in BAR_CHARS:
            row[1] = as_cell(row[1].to_text()[row[1].plain.index(" ") + 1:])


def codes_to_label(row: list[Text], gpu: str, rank) -> list[Text]:
    """80x24: a flagged GPU's finding code moves from its values ("90 % HW-001") to its
    label, in place of the model's name ("3 HW-001"): with a code after each flagged
    value the row was ~14 columns wider than a plain one, and whole columns of values
    (memory, temperature) went to make room.  The values keep their severity's colour;
    the model's name is a label, it gives way first.  One code (the worst; the first the
    row shows of equals): the pane's title lists them all."""
    codes: dict[str, str | Style] = {}     # code -> its style, in the order the row shows them
    cells = [row[0]]
    for cell in row[1:]:
        plain = cell.plain
        while (m := _TRAILING_CODE.search(plain)) is not None:
            codes.setdefault(m.group(1), style_at_end(cell))
            cell = cell[:m.start()]
            plain = cell.plain
        cells.append(cell)
    if not codes:
        return row
    code = max(codes, key=rank)      # max keeps the first of equals
    style = codes[code]
    label = Text(f"{gpu} ")
    label.append(code, style=style)
    return [label, *cells[1:]]


_TRAILING_CODE = re.compile(r" (" + CODE_RE.pattern + r")$")


def style_at_end(cell: Text) -> str | Style:
    """The style of ``cell``'s last character (the last span over it, else the cell's)."""
    end = len(cell.plain) - 1
    for span in reversed(cell.spans):
        if span.start <= end < span.end:
            return span.style
    return cell.style


class HardwarePane(LayerPane):
    pane_layer = Layer.HARDWARE

    def render_frame(self, ctx: PaneContext) -> RenderableType:
        gpus = gpu_indices(ctx)
        if not gpus:
            return no_gpu_note(ctx)
        cols = ["GPU", "util", "SM act", "mem", "power", "temp", "SM clk", "throttle"]
        if ctx.wide:
            cols += ["tensor", "DRAM bw", "PCIe tx/rx", "NVLink tx/rx", "util (60 s)"]
        t = grid(cols, styles=ctx.styles)
        # narrow (80x24): one compact line per GPU, as nvitop's compact mode; the columns
        # that do not fit go whole, least telling first (never a value cut in two)
        compact = not ctx.wide
        if compact:     # the model name may shrink to "2 …": the index says which GPU
            t.gap, t.drop, t.cut_min = 1, (7, 6, 4, 5, 2), 3
        shown, t.more = ctx.pick(gpus, "gpu")
        for g in shown:
            info = ctx.one("gpu.info", gpu=g)
            lost = ctx.one("gpu.lost", gpu=g)
            name = (info.text or "") if info else ""
            label = f"{g} {short_name(name)}"
            if lost is not None and lost.value:
                t.add_row(label, Text("GPU LOST (fell off the bus)", style=ctx.styles["crit"]))
                continue
            util = ctx.one("gpu.util_ratio", gpu=g)
            used, total = ctx.one("gpu.mem_used_bytes", gpu=g), ctx.one("gpu.mem_total_bytes", gpu=g)
            mem = ctx.value_text(used)
            if used is not None and used.ok and used.value is not None and \
                    total is not None and total.ok and total.value is not None:
                mem = styled_value(f"{used.value / 2**30:.0f}/{total.value / 2**30:.0f} GiB",
                                   mem.style, ctx.flag("gpu.mem_used_bytes", used.labels),
                                   ctx.styles)
            pw, lim = ctx.one("gpu.power_watts", gpu=g), ctx.one("gpu.power_limit_watts", gpu=g)
            power = ctx.value_text(pw)
            if pw is not None and pw.ok and lim is not None and lim.ok:
                power = Cell.make(f"{pw.value:.0f}/{lim.value:.0f} W", power.style)
            clk = ctx.value_text(ctx.one("gpu.sm_clock_hz", gpu=g))
            mx = ctx.one("gpu.sm_clock_max_hz", gpu=g)
            cur = ctx.one("gpu.sm_clock_hz", gpu=g)
            if mx is not None and mx.ok and mx.value and cur is not None and cur.ok and \
                    cur.value is not None:
                pct = cur.value / mx.value
                clk = clk.plus((f" {pct * 100:.0f}%", ctx.styles["warn"] if pct < 0.85 else ""))
            thr = ctx.one("gpu.throttle_reasons", gpu=g)
            thr_text: Cell | str = "–"
            if thr is not None and thr.ok:
                txt = thr.text or ("none" if not thr.value else f"0x{int(thr.value):x}")
                active = txt not in ("", "none", "idle")
                thr_text = Cell.of_text(txt, ctx.styles["warn"] if active else "")
                flag = ctx.flag("gpu.throttle_reasons", thr.labels)
                if flag:
                    thr_text = Cell.of_text(f"{txt} {flag[1]}", ctx.styles[flag[0]])
            util_cell = Cell.make(bar(util.value if util and util.ok else None,
                                      3 if compact else 5) + " ").plus(ctx.value_text(util))
            row: list[Cell | str] = [label, util_cell, ctx.value_text(ctx.one("gpu.sm_active_ratio", gpu=g)), mem,
                   power, ctx.value_text(ctx.one("gpu.temp_celsius", gpu=g)), clk, thr_text]
            if ctx.wide:
                pcie = ctx.value_text(ctx.one("gpu.pcie_tx_bytes_per_second", gpu=g)).plus(
                    " / ", ctx.value_text(ctx.one("gpu.pcie_rx_bytes_per_second", gpu=g)))
                nvl_tx = ctx.one("gpu.nvlink_tx_bytes_per_second", gpu=g)
                nvl = ctx.value_text(nvl_tx)
                if nvl_tx is not None:
                    nvl = nvl.plus(" / ", ctx.value_text(
                        ctx.one("gpu.nvlink_rx_bytes_per_second", gpu=g)))
                row += [ctx.value_text(ctx.one("gpu.tensor_active_ratio", gpu=g)),
                        ctx.value_text(ctx.one("gpu.dram_bw_util_ratio", gpu=g)), pcie, nvl,
                        ctx.spark("gpu.util_ratio", 16, 0, 1, gpu=g)]
            t.add_row(*row)
        if compact:
            fit_compact(t, ctx.width, ctx.severity_of)
        sm = t.headers[2] if t.headers else "SM act"     # "SM" where fit_compact shrank it
        legend = ctx.note(f"util = a kernel was running; {sm} = SMs actually busy (GPM)")
        trends = None
        if ctx.height >= 2 * len(shown) + 4:   # room to spare: the last minute per GPU
            trends = Columns(["trend", "util", "SM act", "power", "SM clk"],
                             header_style=ctx.styles["header"])
            for g in shown:
                trends.add_row(f"GPU {g}", ctx.spark("gpu.util_ratio", 14, 0, 1, gpu=g),
                               ctx.spark("gpu.sm_active_ratio", 14, 0, 1, gpu=g),
                               ctx.spark("gpu.power_watts", 14, 0, None, gpu=g),
                               ctx.spark("gpu.sm_clock_hz", 14, 0, None, gpu=g))
        return fit(ctx, t, Expendable(legend), Expendable(trends))
