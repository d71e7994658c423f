#!/usr/bin/env python3
"""The history plot (`h` on a zoomed pane): time per render of 900 points x 8 series at
150x30 cells, the hand-written braille plot (tui/widgets/braille_plot.py) against the
plotting libraries that could draw it in a Textual app:

* plotext, as textual-plotext's widget draws it (``Plot.build()`` + ``Text.from_ansi``);
* plotille (braille, ANSI colours: ``Figure.show()`` + ``Text.from_ansi``);
* textual-plot (a native Textual widget on textual-hires-canvas, braille mode): its
  ``_render_plot`` plus the canvas strips, mounted in a headless app at 150x30.

    .venv/bin/pip install textual-plotext plotille textual-plot   # the candidates
    python benchmarks/bench_plot.py [--repeat 20]

A library that is not installed is skipped (said so).  Also prints the whole `h` path
(History with 8 GPUs x 900 points -> Text) and the braille plot at 80x24-sized plots.
Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.text import Text  # noqa: E402

W, H, N, S = 150, 30, 900, 8


def data() -> tuple[list[float], list[list[float]]]:
    """8 noisy, phase-shifted utilisation-like series over 900 one-second ticks."""
    xs = [float(i - N + 1) for i in range(N)]
    ys = [[0.5 + 0.35 * math.sin(i / 40 + s) + 0.1 * math.sin(i * 1.7 + s * 3) for i in range(N)]
          for s in range(S)]
    return xs, ys


def timed(fn, repeat: int) -> tuple[float, float]:
    fn()   # warm-up (imports, caches)
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3, min(ts) * 1e3


def bench_braille(xs, ys, repeat):
    from infertop.tui.widgets.braille_plot import Trace, plot_area, x_axis
    from infertop.tui.widgets.history_plot import PALETTE

    def run():
        traces = [Trace(f"GPU {i}", xs, y, PALETTE[i]) for i, y in enumerate(ys)]
        rows = plot_area(traces, W, H - 3, x0=xs[0], x1=xs[-1], y0=0.0, y1=1.0,
                         y_fmt=lambda v: f"{v * 100:.0f} %", gap=3.0)
        rows += x_axis(W, 5, xs[0], xs[-1], lambda v: f"{v:.0f}s",
                       [-k * 60.0 for k in range(16)])
        return rows
    return timed(run, repeat), run


def bench_plotext(xs, ys, repeat):
    from textual_plotext.plot import Plot

    plt = Plot()

    def run():
        plt.clear_data()
        plt.clear_figure()
        for i, y in enumerate(ys):
            plt.plot(xs, y, label=f"GPU {i}", marker="braille")
        plt.plotsize(W, H)
        plt._set_size(W, H)
        plt.ylim(0, 1)
        return Text.from_ansi(plt.build())
    return timed(run, repeat), run


def bench_plotille(xs, ys, repeat):
    import plotille

    def run():
        fig = plotille.Figure()
        fig.width, fig.height = W - 12, H - 4    # plot area; axes and labels around it
        fig.color_mode = "rgb"
        fig.set_x_limits(xs[0], xs[-1])
        fig.set_y_limits(0, 1)
        for i, y in enumerate(ys):
            fig.plot(xs, y, label=f"GPU {i}")
        return Text.from_ansi(fig.show())
    return timed(run, repeat), run


def bench_textual_plot(xs, ys, repeat):
    from textual.app import App
    from textual_hires_canvas import Canvas
    from textual_plot import HiResMode, PlotWidget

    from infertop.tui.widgets.history_plot import PALETTE

    result: dict = {}

    class PlotApp(App):
        def compose(self):
            yield PlotWidget()

    async def go():
        app = PlotApp()
        async with app.run_test(size=(W, H)) as pilot:
            await pilot.pause()
            w = app.query_one(PlotWidget)

            def run():
                w.clear()
                for i, y in enumerate(ys):
                    w.plot(xs, y, line_style=PALETTE[i], hires_mode=HiResMode.BRAILLE,
                           label=f"GPU {i}")
                w._render_plot()
                return [c.render_line(r) for c in w.query(Canvas) for r in range(c.size.height)]
            result["t"] = timed(run, repeat)
    asyncio.run(go())
    return result["t"], None


def bench_history_path(repeat):
    """What `h` costs per redraw: History (8 GPUs x 900 points, two readings) -> Text."""
    from infertop.history import History
    from infertop.model import Layer, Reading, Sample, Snapshot, make_labels
    from infertop.tui.widgets.history_plot import plot_text
    h = History()
    for i in range(N):
        rs = []
        for g in range(S):
            rs.append(Reading("gpu.util_ratio", 0.5 + 0.4 * math.sin(i / 50 + g), "ratio",
                              make_labels(gpu=g)))
            rs.append(Reading("gpu.sm_active_ratio", 0.4 + 0.3 * math.sin(i / 30 + g), "ratio",
                              make_labels(gpu=g)))
        h.add(Snapshot(1000.0 + i, {"nvml": Sample("nvml", 1000.0 + i, tuple(rs))}, i, {}))
    out = {}
    for w, hh in ((W, H), (76, 8)):
        out[(w, hh)] = timed(lambda: plot_text(h, Layer.HARDWARE, w, hh), repeat)  # noqa: B023
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--show", action="store_true", help="print each candidate's plot")
    args = ap.parse_args()
    xs, ys = data()
    print(f"{N} points x {S} series at {W}x{H} cells, median (min) of {args.repeat} renders")
    rows = []
    for name, fn in (("braille (hand-written, rich Text)", bench_braille),
                     ("plotext via textual-plotext", bench_plotext),
                     ("plotille", bench_plotille),
                     ("textual-plot (hires canvas, braille)", bench_textual_plot)):
        try:
            (med, best), run = fn(xs, ys, args.repeat)
        except ImportError as e:
            print(f"  {name:40s} skipped: {e.name or e} not installed")
            continue
        rows.append((name, med))
        print(f"  {name:40s} {med:8.2f} ms  ({best:.2f} ms)")
        if args.show and run is not None:
            out = run()
            Console(width=W + 2, color_system="truecolor").print(
                *(out if isinstance(out, list) else [out]), sep="\n")
    if rows:
        base = rows[0][1]
        for name, med in rows[1:]:
            print(f"  {name}: {med / base:.1f}x the hand-written plot")
    for (w, hh), (med, best) in bench_history_path(args.repeat).items():
        print(f"`h` on hardware, History 8 GPUs x 2 readings x {N} points -> Text at {w}x{hh}: "
              f"{med:.2f} ms ({best:.2f} ms)")


if __name__ == "__main__":
    main()
