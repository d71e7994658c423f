"""How long ``compare`` and ``report`` take on the two real vLLM recordings in
tests/corpus (90 and 100 ticks): replaying both through the pipeline, the
block bootstrap, and rendering the HTML.  Numbers are printed, never asserted.

    .venv/bin/python benchmarks/bench_compare_report.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from infertop.compare import compare
from infertop.htmlreport import render_html
from infertop.probes.sources.replay import open_replay
from infertop.rules.engine import Diagnoser
from infertop.runsummary import summarize

REC = Path(__file__).resolve().parent.parent / "tests" / "corpus"


def load(name: str, window: float):
    rec = open_replay(REC / name)
    return summarize(rec.iter_snapshots(), Diagnoser(fleet=False), window=window,
                     meta={"file": name})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        b = load("vllm-healthy-steady.jsonl.gz", 10.0)
        a = load("vllm-queue-cap.jsonl.gz", 10.0)
        t1 = time.perf_counter()
        c = compare(b, a)
        t2 = time.perf_counter()
        page = render_html(a, title="vllm-queue-cap", version="bench", comparison=c)
        t3 = time.perf_counter()
        print(f"replay both {t1 - t0:6.2f} s ({b.ticks + a.ticks} ticks, "
              f"{len(a.series)} series)  compare {t2 - t1:5.2f} s ({len(c.moved)} moved)  "
              f"render html {t3 - t2:5.3f} s ({len(page) // 1024} KiB)")


if __name__ == "__main__":
    main()
