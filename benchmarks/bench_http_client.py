#!/usr/bin/env python3
"""The /metrics scrape's HTTP client: probes/server/http11.py (h11 over asyncio) against
httpx, which it replaced for the scrape (httpx stays for fleet mode and is the tests'
oracle).  Prints numbers; asserts nothing.

- CPU per GET of a real vLLM page (the busy fixture, 50 KB, Content-Length) from a local
  socket, keep-alive, in a tight loop (warm caches) and spaced 0.2 s apart (cold, as a
  1 Hz scrape is: the caches hold other work between scrapes);
- RSS that importing each client adds on top of what infertop's screen imports anyway
  (textual, rich, psutil, asyncio, ssl), each in a fresh interpreter.

    python benchmarks/bench_http_client.py [--spaced 40]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from helpers.raw_http import RawServer, Resp  # noqa: E402

PAGE = (ROOT / "tests" / "fixtures" / "metrics" / "vllm-0.32-busy.prom").read_bytes()


async def h11_get(url: str):
    from infertop.probes.server.http11 import Http11Client
    client = Http11Client(headers={"Accept": "text/plain"})

    async def get() -> bytes:
        async with client.stream(url) as resp:
            return b"".join([p async for p in resp.iter_raw()])
    return get, client.aclose


async def httpx_get(url: str):
    import httpx
    client = httpx.AsyncClient(trust_env=False, verify=False, headers={"Accept": "text/plain"})

    async def get() -> bytes:
        async with client.stream("GET", url) as resp:
            return b"".join([p async for p in resp.aiter_raw()])
    return get, client.aclose


async def per_get(make, url: str, n: int, pause: float) -> list[float]:
    get, close = await make(url)
    try:
        for _ in range(20):
            assert len(await get()) == len(PAGE)
        out = []
        for _ in range(n):
            if pause:
                await asyncio.sleep(pause)
            t = time.thread_time()
            await get()
            out.append(time.thread_time() - t)
        return out
    finally:
        await close()


IMPORT_RSS = """
import psutil, textual.app, rich, asyncio, ssl
a = psutil.Process().memory_info().rss
import {mod}
print((psutil.Process().memory_info().rss - a) / 2**20, flush=True)
"""


def import_rss(mod: str) -> float:
    out = subprocess.run([sys.executable, "-c", IMPORT_RSS.format(mod=mod)],
                         capture_output=True, text=True, check=True)
    return float(out.stdout)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tight", type=int, default=500)
    ap.add_argument("--spaced", type=int, default=40)
    a = ap.parse_args()
    async with RawServer(lambda req: Resp(200, PAGE, {"Content-Type": "text/plain"})) as srv:
        url = srv.metrics_url
        print(f"GET of a {len(PAGE) / 1024:.1f} KB page over one kept-alive local connection, "
              "CPU of this thread per GET (median):")
        for name, make in (("http11 (h11)", h11_get), ("httpx", httpx_get)):
            tight = statistics.median(await per_get(make, url, a.tight, 0.0))
            spaced = statistics.median(await per_get(make, url, a.spaced, 0.2))
            print(f"  {name:<13} tight loop {tight * 1e3:5.2f} ms   spaced 0.2 s {spaced * 1e3:5.2f} ms")
        print(f"  connections accepted: {srv.connections}")
    for mod in ("infertop.probes.server.http11", "httpx"):
        print(f"RSS added by importing {mod}: {import_rss(mod):.2f} MB")


if __name__ == "__main__":
    asyncio.run(main())
