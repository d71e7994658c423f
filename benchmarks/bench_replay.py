"""What replaying a long recording costs in memory: the streaming index vs the whole file.

A synthetic recording of --hours at 1 Hz is written the way the recorder writes it (gzip,
sync-flushed per line), each line a real demo snapshot (``healthy`` scenario, 2 GPUs)
with its time moved.  Then, each in a fresh process (so one does not inherit the other's
heap), the peak RSS and the tracemalloc peak of:

1. ``ReplaySource`` (streaming index): open, seek to 10 %, 90 %, 50 %, the end, rebuild a
   60-tick History window;
2. the whole-file reader it replaced: read the file, decompress it, split its lines
   (``infertop.recording.decode``).

Numbers are printed, never asserted.
    .venv/bin/python benchmarks/bench_replay.py [--hours 3] [--keep FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def write_recording(path: Path, hours: float) -> tuple[int, int]:
    from infertop.probes.sources.demo import DemoSource
    from infertop.recording import encode_header, encode_snapshot, make_header
    src = DemoSource("healthy")
    snaps = [src.next_sync() for _ in range(60)]   # a minute of distinct snapshots
    lines = [encode_snapshot(s) for s in snaps]
    t_re = re.compile(rb'^\{"time":\s*(-?[0-9.eE+-]+)\s*,')
    n = int(hours * 3600)
    z = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    raw = 0
    with open(path, "wb") as f:
        f.write(z.compress(encode_header(make_header(src.describe(), snaps[0], host="bench",
                                                     started=time.time(), interval=1.0))))
        for i in range(n):
            line = t_re.sub(b'{"time":%.3f,' % (1.7e9 + i), lines[i % len(lines)], count=1)
            raw += len(line)
            f.write(z.compress(line) + z.flush(zlib.Z_SYNC_FLUSH))
        f.write(z.flush(zlib.Z_FINISH))
    return n, raw


CHILD = r"""
import json, resource, sys, time, tracemalloc
mode, path = sys.argv[1], sys.argv[2]
tracemalloc.start()
t0 = time.perf_counter()
if mode == "stream":
    from infertop.probes.sources.replay import ReplaySource
    src = ReplaySource(path)
    opened = time.perf_counter() - t0
    t1 = time.perf_counter()
    for f in (0.1, 0.9, 0.5, 1.0):
        src.seek_fraction(f)
    src.snapshots_until(limit=60)
    seek = (time.perf_counter() - t1) / 5
    n = src.length
else:
    from pathlib import Path
    from infertop.recording import decode
    dec = decode(Path(path).read_bytes())
    opened, seek, n = time.perf_counter() - t0, 0.0, len(dec.lines)
cur, peak = tracemalloc.get_traced_memory()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"n": n, "opened_s": opened, "seek_s": seek, "traced_peak": peak,
                  "traced_held": cur, "max_rss": rss}))
"""


def measure(mode: str, path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(path)], capture_output=True,
                         text=True, cwd=ROOT, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=3.0)
    ap.add_argument("--keep", help="write the recording here (default: a temp file)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = Path(args.keep) if args.keep else Path(d) / "long.jsonl.gz"
        t0 = time.perf_counter()
        n, raw = write_recording(path, args.hours)
        print(f"recording: {n} snapshots ({args.hours:g} h at 1 Hz), {raw / 1e6:.0f} MB of "
              f"JSON, {path.stat().st_size / 1e6:.1f} MB gzip (written in "
              f"{time.perf_counter() - t0:.1f} s)")
        for mode, title in (("stream", "streaming index (ReplaySource)"),
                            ("whole", "whole-file reader (recording.decode)")):
            r = measure(mode, path)
            extra = f", seek {r['seek_s'] * 1000:.0f} ms" if mode == "stream" else ""
            print(f"{title:38} open {r['opened_s']:.1f} s{extra}, traced peak "
                  f"{r['traced_peak'] / 1e6:.0f} MB, held {r['traced_held'] / 1e6:.0f} MB, "
                  f"max RSS {r['max_rss'] / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
