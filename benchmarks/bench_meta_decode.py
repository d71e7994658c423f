"""A recording's per-sample meta: the msgspec decoder (infertop/meta.py, issue 36 item 2)
against the hand-written converter table it replaced (tests/helpers/legacy_meta.py, the
baseline kept as it was at commit 7398664).

    .venv/bin/python benchmarks/bench_meta_decode.py [--repeat 5]

Timed, as the median of --repeat runs (seconds of one thread):

* every meta of every snapshot of the nine recordings of tests/corpus (json.loads'd dicts,
  as decode_snapshot hands them over), old vs new;
* one big meta, many times: an 8-GPU NVML meta and a process meta of a 400-process tree;
* a whole snapshot line through ``decode_snapshot`` (JSON, readings, meta), new decoder,
  with the meta's share of it.

Numbers are printed, not asserted.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from infertop.meta import meta_from_dict  # noqa: E402
from infertop.recording import decode_snapshot  # noqa: E402
from tests.helpers.legacy_meta import legacy_meta_from_dict  # noqa: E402


def timed(fn: Callable[[], Any], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def corpus() -> tuple[list[tuple[str, Any]], list[bytes]]:
    metas: list[tuple[str, Any]] = []
    lines: list[bytes] = []
    for path in sorted((ROOT / "tests" / "corpus").glob("*.jsonl.gz")):
        for raw in gzip.decompress(path.read_bytes()).split(b"\n")[1:]:
            if not raw.strip():
                continue
            lines.append(raw)
            for s in json.loads(raw)["samples"].values():
                metas.append((s["source"], s.get("meta")))
    return metas, lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    repeat = ap.parse_args().repeat
    metas, lines = corpus()
    with_meta = sum(1 for _, m in metas if m)

    def decode_all(fn: Callable[[str, Any], Any]) -> Callable[[], None]:
        def go() -> None:
            for source, m in metas:
                fn(source, m)
        return go

    old = timed(decode_all(legacy_meta_from_dict), repeat)
    new = timed(decode_all(meta_from_dict), repeat)
    print(f"corpus meta ({len(metas)} samples, {with_meta} with meta, {len(lines)} lines):")
    print(f"  before (converter table) {old * 1e3:8.2f} ms  {old / len(metas) * 1e6:6.2f} us/meta")
    print(f"  after  (msgspec)         {new * 1e3:8.2f} ms  {new / len(metas) * 1e6:6.2f} us/meta"
          f"   x{old / new:.2f}")

    big = [("nvml", {"gpus": [{"index": i, "name": "NVIDIA H100 80GB HBM3",
                               "uuid": f"GPU-{i:08x}-aaaa-bbbb"} for i in range(8)],
                     "driver": "580.95.05", "gpm": list(range(8)), "xid": list(range(8))}),
           ("process", {"in_container": False, "tree": list(range(1000, 1400)),
                        "server": {"pid": 1000, "kind": "vllm", "name": "vllm",
                                   "reason": "--pid", "port": 8000},
                        "pid_aliases": [[i, i + 5] for i in range(64)]})]
    n = 2000
    old = timed(lambda: [legacy_meta_from_dict(s, m) for _ in range(n) for s, m in big], repeat)
    new = timed(lambda: [meta_from_dict(s, m) for _ in range(n) for s, m in big], repeat)
    print(f"big meta (8-GPU nvml + 400-pid process) x{n}:")
    print(f"  before {old * 1e3:8.2f} ms   after {new * 1e3:8.2f} ms   x{old / new:.2f}")

    whole = timed(lambda: [decode_snapshot(line) for line in lines], repeat)
    print(f"decode_snapshot of every corpus line (new meta): {whole * 1e3:.1f} ms, "
          f"{whole / len(lines) * 1e6:.0f} us/line")


if __name__ == "__main__":
    main()
