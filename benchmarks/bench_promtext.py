"""infertop.promtext.parse vs prometheus_client's text parser on a real vLLM page.

Prints ms per parse and the ratio; asserts nothing about time.  Three numbers for ours:
  cold  - caches cleared before every parse (first scrape of a server);
  warm  - the same page again (steady state: series keys and HELP/TYPE lines are cached);
  mixed - busy and idle pages alternately: same series, many changed values.
Run: .venv/bin/python benchmarks/bench_promtext.py [path.prom]
"""

from __future__ import annotations

import sys
import timeit
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from infertop.promtext import clear_caches, parse

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "tests" / "fixtures" / "metrics" / "vllm-0.32-busy.prom"
OTHER = ROOT / "tests" / "fixtures" / "metrics" / "vllm-0.32-idle.prom"


def best_ms(fn, number: int, repeat: int = 7) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e3


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

    def mixed() -> None:
        for t in texts:
            parse(t)

    c = best_ms(cold, 50)
    parse(text)
    w = best_ms(lambda: parse(text), 300)
    m = best_ms(mixed, 150) / 2
    print(f"prometheus_client : {ref:8.3f} ms/parse")
    print(f"promtext cold     : {c:8.3f} ms/parse  ({ref / c:5.1f}x)")
    print(f"promtext warm     : {w:8.3f} ms/parse  ({ref / w:5.1f}x)")
    print(f"promtext mixed    : {m:8.3f} ms/parse  ({ref / m:5.1f}x)")


if __name__ == "__main__":
    main()
