"""Run one reader on hostile inputs under a memory limit (tests/test_props_resources.py).

    python resource_child.py READER SEED LIMIT_MB

Sets RLIMIT_AS to LIMIT_MB first: a reader that tries to hold what it should stream gets
MemoryError, which fails the run.  Builds each input here (nothing big crosses the pipe),
sizes drawn from SEED; runs the reader's public entry point; prints one JSON line: each
input's outcome (its refusal's first words) and the peak RSS of the process."""

from __future__ import annotations

import asyncio
import json
import os
import random
import resource
import sys
import tempfile
import zlib

MB = 1024 * 1024


def metrics(rnd: random.Random):
    from infertop.probes.server.metrics import ServerMetricsProbe
    from infertop.promtext import ParseError
    probe = ServerMetricsProbe("http://127.0.0.1:8000")
    n = rnd.randint(40_000, 60_000)
    pages = {
        "many series": "# TYPE vllm:num_requests_running gauge\n" + "".join(
            f'vllm:num_requests_running{{engine="{i}",model_name="m"}} {i}\n' for i in range(n)),
        "one 8 MB label": 'vllm:num_requests_running{model_name="' + "x" * (8 * MB) + '"} 1\n',
        "deep braces": "m" + "{" * rnd.randint(500_000, 2_000_000) + "\n",
        "comment lines": "# HELP x y\n" * rnd.randint(300_000, 600_000),
    }
    for name, page in pages.items():
        try:
            probe._map(page, {})
            yield name, "read"
        except ParseError as e:
            yield name, str(e)[:60]


def recording(rnd: random.Random):
    from infertop.cli.main import main
    from infertop.probes.sources.replay import ReplaySource
    from infertop.recording import RecordingError
    tmp = tempfile.mkdtemp()
    header = {"format": "infertop-recording", "schema": 1, "host": "h", "source": {},
              "interval": 1.0}
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [z.compress(json.dumps(header).encode() + b"\n")]
    parts += [z.compress(b"x" * MB) for _ in range(rnd.randint(150, 300))]
    parts.append(z.flush())
    files = {"gzip bomb": b"".join(parts)}
    lines = [json.dumps(header).encode()] + [
        json.dumps({"time": i * 1.0e9, "tick": i, "samples": {}, "capabilities": {}}).encode()
        for i in range(31)]
    files["1970 to 2950"] = b"\n".join(lines) + b"\n"
    files["a 40 MB line"] = json.dumps(header).encode() + b"\n" + b'{"time": 1, "x": "' + \
        b"y" * (40 * MB) + b'"}\n'
    for name, data in files.items():
        path = os.path.join(tmp, "r.jsonl" + (".gz" if data[:2] == b"\x1f\x8b" else ""))
        with open(path, "wb") as fh:
            fh.write(data)
        try:
            src = ReplaySource(path)
            got = f"replay {src.length} lines"
        except RecordingError as e:
            got = str(e)[:60]
        import contextlib
        import io
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            rc = main(["rules", "promtool-input", path])
        yield name, f"{got}; promtool-input exit {rc}"
        del data


def config(rnd: random.Random):
    from infertop.config import ConfigError, config_from_bytes
    depth = rnd.randint(30_000, 100_000)
    inputs = {"deep array": b"x = " + b"[" * depth + b"]" * depth,
              "10 MB value": b'[thresholds]\nkv_pressure_ratio = "' + b"x" * (10 * MB) + b'"\n',
              "1 MB of keys": b"[thresholds]\n" + b"".join(b"k%d = 1\n" % i
                                                           for i in range(100_000))}
    for name, data in inputs.items():
        try:
            config_from_bytes(data)
            yield name, "accepted"
        except ConfigError as e:
            yield name, str(e)[:60]


def kv(rnd: random.Random):
    # msgspec's encoder (a dependency; msgpack is not installed by `make test`)
    from msgspec.msgpack import encode

    from infertop.kvevents import KvEventsError, decode_batch
    hashes = list(range(rnd.randint(500_000, 1_000_000)))
    inputs = {
        "a million hashes": encode([1.0, [["BlockStored", hashes, None, [], 16, None,
                                                  "GPU"]], 0]),
        "nested hash": encode([1.0, [["BlockStored", [[[1]]], None, [], 16, None,
                                             "GPU"]], 0]),
        "deep lists": b"\x91" * 200_000 + b"\xc0",
    }
    for name, data in inputs.items():
        try:
            decode_batch(data)
            yield name, "decoded"
        except KvEventsError as e:
            yield name, str(e)[:60]


def prometheus(rnd: random.Random):
    import httpx

    from infertop.probes.prometheus.client import PrometheusClient, PrometheusError
    n = rnd.randint(60_000, 120_000)
    item = '{"metric":{"__name__":"up","instance":"h%d:1"},"value":[1,"1"]}'
    inputs = {
        "too many series": ('{"status":"success","data":{"resultType":"vector","result":['
                            + ",".join(item % i for i in range(n)) + "]}}").encode(),
        "deep nesting": b"[" * 1_000_000,
        "60 MB string": b'{"status":"success","data":"' + b"x" * (60 * MB) + b'"}',
    }
    for name, data in inputs.items():
        async def go(body=data):
            client = PrometheusClient("127.0.0.1:9", transport=httpx.MockTransport(
                lambda req: httpx.Response(200, content=body)))
            try:
                await client.query("up")
                return "read"
            except PrometheusError as e:
                return str(e)[:60]
            finally:
                await client.close()
        yield name, asyncio.run(go())


READERS = {"metrics": metrics, "recording": recording, "config": config, "kv": kv,
           "prometheus": prometheus}


def vm_hwm_mb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024   # no /proc


def main() -> int:
    reader, seed, limit_mb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    resource.setrlimit(resource.RLIMIT_AS, (limit_mb * MB, limit_mb * MB))
    out = {}
    for name, got in READERS[reader](random.Random(seed)):
        out[name] = got
    # VmHWM: this process's own peak.  ru_maxrss is not: Linux carries the parent's peak
    # across fork and exec, so a child of a 550 MB pytest reported 550 MB whatever it read
    peak = vm_hwm_mb()
    print(json.dumps({"outcomes": out, "peak_rss_mb": peak}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
