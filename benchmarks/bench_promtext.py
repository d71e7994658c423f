"""infertop.promtext.parse vs prometheus_client's text parser on a real vLLM page.

Prints ms per parse (best of 7 rounds) and the speed-up; asserts nothing about time.
prometheus_client keeps no state, so its one number stands for every case below.
Ours, from kindest to harshest:
  warm        - the same page again (an idle server: nothing moved since the last scrape);
  alternating - busy and idle pages in turn: same series, 270 of 435 values differ each time;
  busy drift  - the lines that differ between busy and idle get a never-seen value on every
                scrape, the rest stay (a busy server: counters and histograms move);
  all changed - every sample line has a never-seen value on every scrape (worst steady case);
  new shape   - each scrape adds one never-seen series, so the page is parsed afresh
                (known series and comments still come from their caches);
  cold        - every cache cleared before each parse (first scrape of a server).
Run: .venv/bin/python benchmarks/bench_promtext.py [path.prom]
"""

from __future__ import annotations

import math
import sys
import time
import timeit
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from infertop.promtext import clear_caches, parse

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "tests" / "fixtures" / "metrics" / "vllm-0.32-busy.prom"
OTHER = ROOT / "tests" / "fixtures" / "metrics" / "vllm-0.32-idle.prom"
ROUNDS = 7


def best_ms(fn, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=ROUNDS)) / number * 1e3


def best_ms_over(pages: list[str], per_round: int) -> float:
    """Best round of parsing ``per_round`` pages, each page used once (never cached)."""
    best = math.inf
    for r in range(ROUNDS):
        chunk = pages[r * per_round:(r + 1) * per_round]
        t = time.perf_counter()
        for page in chunk:
            parse(page)
        best = min(best, time.perf_counter() - t)
    return best / per_round * 1e3


def moved(text: str, k: int, only: set[int] | None = None) -> str:
    """The page with a new finite value on its sample lines (all, or those in ``only``)."""
    out = []
    for n, line in enumerate(text.split("\n")):
        if line and line[0] != "#" and (only is None or n in only):
            head, _, value = line.rpartition(" ")
            v = float(value)
            line = f"{head} {v + k + 1 if math.isfinite(v) else v}"
        out.append(line)
    return "\n".join(out)


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    text = path.read_text()
    other = OTHER.read_text() if path == DEFAULT else text
    fams = parse(text)
    nsamples = sum(len(f.samples) for f in fams)
    print(f"{path.name}: {len(text) / 1024:.1f} KB, {text.count(chr(10))} lines, "
          f"{len(fams)} families, {nsamples} samples")

    ref = best_ms(lambda: list(text_string_to_metric_families(text)), 20)

    def cold() -> None:
        clear_caches()
        parse(text)

    texts = [text, other]

    def alternating() -> None:
        for t in texts:
            parse(t)

    per_round = 40
    differ = {n for n, (a, b) in enumerate(zip(text.split("\n"), other.split("\n"))) if a != b}
    drift = [moved(text, k, differ) for k in range(ROUNDS * per_round)]
    churn = [moved(text, k) for k in range(ROUNDS * per_round)]
    shapes = [f'{text}new_series{{id="{k}"}} 1\n' for k in range(ROUNDS * per_round)]

    rows = [("cold", best_ms(cold, 50))]
    parse(text)
    rows.append(("warm", best_ms(lambda: parse(text), 300)))
    rows.append(("alternating", best_ms(alternating, 150) / 2))
    parse(text)
    rows.append((f"busy drift ({len(differ)} new)", best_ms_over(drift, per_round)))
    parse(text)
    rows.append((f"all changed ({nsamples} new)", best_ms_over(churn, per_round)))
    rows.append(("new shape", best_ms_over(shapes, per_round)))

    print(f"{'prometheus_client':32s}: {ref:7.3f} ms/parse")
    for name, ms in rows:
        print(f"{'promtext ' + name:32s}: {ms:7.3f} ms/parse  ({ref / ms:5.1f}x)")


if __name__ == "__main__":
    main()
