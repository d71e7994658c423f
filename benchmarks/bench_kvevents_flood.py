"""A hostile KV-event publisher against the subscriber (issue 36 case 5): big batches as fast
as loopback takes them, and a new medium in every batch, for --seconds.

    .venv/bin/python benchmarks/bench_kvevents_flood.py [--seconds 20] [--hashes 1500000]

Prints the subscriber's RSS (start, peak), the longest collect() (what a tick waits on
the event loop), batches decoded, lost (sequence gaps), refused, and the engines kept.
Before issue 36 (5f0ec1d): a 60 MB batch every 5 s reached 2.65 GB and key-to-frame 11.5 s;
a new medium per batch 3.7 GB in 150 s.  Printed, not asserted.

Budget before decode (issue 36, 2026-12-03, --hashes 3000000, 20 s, 2 shared cores): the
hash lists are counted from their msgpack headers and only 100k a batch decoded: RSS peak
350 -> 177 MB, longest collect 0.18 -> 0.27 ms (both well under a tick; it reads a
published view).  One 13.5 MB batch of 1.5M 64-bit hashes through decode_batch alone:
150 ms, 67 MB traced -> 36 ms, 4.6 MB (400k 32-byte digests: 52 ms, 30 MB -> 27 ms, 7 MB).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec  # noqa: E402
import psutil  # noqa: E402
import zmq  # noqa: E402

from infertop.probes.server.kvevents import KvEventsProbe  # noqa: E402


def publish(hashes: int) -> None:
    """The hostile publisher (its own process: its memory is not the subscriber's)."""
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.setsockopt(zmq.LINGER, 0)
    print(pub.bind_to_random_port("tcp://127.0.0.1"), flush=True)
    per = max(1, hashes // 100)
    seq = 0
    while True:
        events = [{"type": "BlockStored", "block_hashes": list(range(seq * hashes + i * per,
                                                                     seq * hashes + (i + 1) * per)),
                   "parent_block_hash": None, "token_ids": [], "block_size": 16,
                   "lora_id": None, "medium": f"m{seq}"} for i in range(100)]
        body = msgspec.msgpack.encode([float(seq), events, 0])
        pub.send_multipart([b"", seq.to_bytes(8, "big"), body])
        seq += 1


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--hashes", type=int, default=1_500_000, help="hashes per batch")
    ap.add_argument("--publish", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.publish:
        publish(a.hashes)
        return
    proc = psutil.Process()
    rss0 = proc.memory_info().rss
    child = subprocess.Popen([sys.executable, __file__, "--publish", "--hashes",
                              str(a.hashes)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    port = int(child.stdout.readline())
    probe = KvEventsProbe([f"tcp://127.0.0.1:{port}"], "flood")
    await probe.open()
    peak, worst = rss0, 0.0
    end = time.monotonic() + a.seconds
    s = None
    while time.monotonic() < end:
        t0 = time.perf_counter()
        s = await probe.collect()
        worst = max(worst, time.perf_counter() - t0)
        peak = max(peak, proc.memory_info().rss)
        await asyncio.sleep(0.25)
    child.terminate()
    child.wait()
    await probe.close()
    tot = probe.tracker.totals()
    print(f"batches of {a.hashes:,} hashes for {a.seconds:g} s, a new medium in each")
    print(f"RSS {rss0 / 1e6:.0f} MB -> peak {peak / 1e6:.0f} MB; longest collect "
          f"{worst * 1e3:.2f} ms; status {s.status.value if s else '?'}")
    print(f"decoded {tot['batches']:.0f}, lost {tot['dropped']:.0f}, refused "
          f"{tot['undecodable']:.0f}; engines kept {len(probe.tracker.engines)}; "
          f"queue drops {sum(x.queue_drops for x in probe._subs)}")


if __name__ == "__main__":
    asyncio.run(main())
