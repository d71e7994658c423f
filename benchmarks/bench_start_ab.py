"""Two (or more) trees' start, interleaved (issue 35 item 2): on a shared box the load moves
from minute to minute, so a before/after is only fair run by run.

    python benchmarks/bench_start_ab.py [--runs N] [--sizes 80x24,160x48] TREE [TREE...]

Each TREE is a checkout whose package layout scripts/typecheck.py has built
(TREE/build/typecheck, put first on PYTHONPATH; the same interpreter for all).  For each
size, runs alternate between the trees (A, B, A, B, ...), each `infertop --or-demo` in a
pty (bench_start.first_frame: first byte, six titles, full frame = the first snapshot
drawn); printed as min / median per tree, with the load average before and after.
Numbers, not assertions: benchmarks/start-issue35.md holds the measured ones.
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_start import first_frame  # noqa: E402  (the benchmarks folder is no package)


def min_median(values: list[float]) -> str:
    good = [v for v in values if v == v]
    return f"{min(good):.3f} / {statistics.median(good):.3f}" if good else "n/a"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    args = sys.argv[1:]
    runs, sizes = 10, "80x24,160x48"
    if "--runs" in args:
        i = args.index("--runs")
        runs = int(args[i + 1])
        del args[i:i + 2]
    if "--sizes" in args:
        i = args.index("--sizes")
        sizes = args[i + 1]
        del args[i:i + 2]
    trees = [str(Path(t).resolve()) for t in args]
    if not trees:
        sys.exit(__doc__)
    cmd = [sys.executable, "-m", "infertop", "--or-demo"]
    for size in sizes.split(","):
        cols, rows = (int(n) for n in size.split("x"))
        got: dict[str, list[tuple[float, float, float]]] = {t: [] for t in trees}
        before = load()
        for _ in range(runs):
            for tree in trees:
                os.environ["PYTHONPATH"] = str(Path(tree) / "build" / "typecheck")
                got[tree].append(first_frame(cmd, cols, rows))
        print(f"{size}, {runs} runs each, interleaved; load average {before} -> {load()}")
        print("  (min / median s)        first byte       six titles       full frame")
        for tree in trees:
            r = got[tree]
            print(f"  {tree[-24:]:24s} {min_median([x[0] for x in r]):16s} "
                  f"{min_median([x[1] for x in r]):16s} {min_median([x[2] for x in r])}")


if __name__ == "__main__":
    main()
