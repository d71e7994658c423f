"""Typed decoding (msgspec, issue 36 item 2) against the hand-written decoding it replaced.

    .venv/bin/python benchmarks/bench_typed_decode.py [--repeat 5]

Three boundaries, each timed as the median of --repeat runs (seconds of one thread):

* KV-event batches: the real vLLM 0.32 stream (tests/fixtures/kvevents, 190 batches) and
  one big synthetic batch (600 BlockStored events x 160 hashes, 32 token ids per block);
  before: ``msgpack.unpackb`` and the isinstance walk of infertop/kvevents.py as of commit
  5f0ec1d (copied below; skipped when msgpack is not installed);
* a Prometheus vector answer of 20,000 series: before ``json.loads`` and the per-item
  checks of probes/prometheus/client.py (5f0ec1d); after the typed envelope, vector and
  series;
* a recording header: before the format/schema checks only, after the typed Header too.

Numbers are printed, not asserted.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402

from infertop.kvevents import decode_batch  # noqa: E402
from infertop.probes.prometheus.client import (  # noqa: E402
    _ENVELOPE,
    _VECTOR,
    _series,
    checked_labels,
)
from infertop.recording import check_header  # noqa: E402


def timed(fn: Callable[[], Any], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


# ---- before: the KV-event decoding of 5f0ec1d (msgpack + isinstance walk), abridged ----------
_STORED = ("block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium",
           "lora_name")


def _fields_before(obj, names, tagged):
    if isinstance(obj, dict):
        return (obj.get("type", "") if tagged else ""), obj
    items = list(obj)
    tag = ""
    if tagged:
        tag, items = items[0], items[1:]
    return tag, dict(zip(names, items))


def decode_before(payload: bytes):
    import msgpack
    obj = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    _, f = _fields_before(obj, ("ts", "events", "data_parallel_rank"), False)
    if not isinstance(f.get("ts"), (int, float)) or not math.isfinite(f["ts"]):
        raise ValueError("ts")
    out = []
    for raw in f["events"]:
        tag, g = _fields_before(raw, (), True)
        if tag not in ("BlockStored", "BlockRemoved"):
            continue
        _, g = _fields_before(raw, _STORED if tag == "BlockStored" else ("block_hashes",
                                                                          "medium"), True)
        hashes = g.get("block_hashes")
        kept = tuple(h if isinstance(h, (int, bytes, str)) else tuple(h)
                     for h in hashes[:100_000])
        out.append((tag, kept, g.get("medium") or "GPU", len(hashes)))
    return out


# ---- before: the vector decoding of 5f0ec1d ----------------------------------------------------
def vector_before(body: bytes):
    doc = json.loads(body)
    data = doc.get("data")
    out = []
    for item in data["result"]:
        try:
            value = float(item["value"][1])
            labels = checked_labels(item["metric"], False)
        except (KeyError, IndexError, TypeError, ValueError, OverflowError):
            continue
        if labels is not None:
            out.append((labels, value))
    return out


def vector_after(body: bytes):
    doc = _ENVELOPE.decode(body)
    out = []
    for item in _series(_VECTOR.decode(doc.data).result):
        try:
            value = float(item.value[1])
        except (ValueError, OverflowError):
            continue
        labels = checked_labels(item.metric, False)
        if labels is not None:
            out.append((labels, value))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    try:
        import msgpack  # noqa: F401
        have_msgpack = True
    except ImportError:
        have_msgpack = False

    fixture = ROOT / "tests" / "fixtures" / "kvevents" / "vllm-0.32-shared-prefix-16.jsonl.gz"
    with gzip.open(fixture, "rt") as fh:
        stream = [base64.b64decode(json.loads(line)["payload"]) for line in fh]
    big = msgspec.msgpack.encode([1.0, [
        {"type": "BlockStored", "block_hashes": list(range(i * 160, (i + 1) * 160)),
         "parent_block_hash": None, "token_ids": list(range(160 * 32)), "block_size": 32,
         "lora_id": None, "medium": "GPU", "lora_name": None} for i in range(600)], 0])
    series = [{"metric": {"__name__": "vllm:num_requests_running", "instance": f"10.0.{i // 250}"
                          f".{i % 250}:8000", "job": "server", "model_name": "meta-llama/"
                          "Llama-3.1-8B-Instruct", "engine": "0", "node": f"n{i}"},
               "value": [1767225600.0, str(i % 17)]} for i in range(20_000)]
    body = json.dumps({"status": "success", "data": {"resultType": "vector",
                                                     "result": series}}).encode()
    header = {"format": "infertop-recording", "schema": 1, "infertop": "0.1.0", "host": "h",
              "started": 1767225600.0, "source": {"source": "live", "capabilities": {}},
              "gpus": [{"index": i, "name": "H100"} for i in range(8)],
              "server": {"kind": "vllm", "model": "m", "url": "u", "source": "s"},
              "interval": 1.0, "part": 0}

    rows = []
    r = a.repeat
    after = timed(lambda: [decode_batch(p) for p in stream], r)
    before = timed(lambda: [decode_before(p) for p in stream], r) if have_msgpack else None
    rows.append((f"KV stream, {len(stream)} real batches", before, after))
    after = timed(lambda: decode_batch(big), r)
    before = timed(lambda: decode_before(big), r) if have_msgpack else None
    rows.append((f"KV batch of {len(big) / 1e6:.1f} MB (600 events)", before, after))
    rows.append((f"vector answer, 20k series ({len(body) / 1e6:.1f} MB)",
                 timed(lambda: vector_before(body), r), timed(lambda: vector_after(body), r)))
    n = 10_000

    def headers_before():
        for _ in range(n):
            if header.get("format") != "infertop-recording" or \
                    not isinstance(header.get("schema"), int):
                raise ValueError

    rows.append((f"recording header x {n}", timed(headers_before, r),
                 timed(lambda: [check_header(header, "x") for _ in range(n)], r)))
    print(f"{'boundary':46} {'before':>10} {'msgspec':>10} {'ratio':>7}")
    for name, b, aft in rows:
        bs = f"{b * 1e3:8.2f}ms" if b is not None else "   (n/a)  "
        ratio = f"{b / aft:6.2f}x" if b else ""
        print(f"{name:46} {bs:>10} {aft * 1e3:8.2f}ms {ratio:>7}")


if __name__ == "__main__":
    main()
