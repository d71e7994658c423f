"""No input eats the machine: gzip bombs on /metrics, pages with very many series.
Memory is measured with tracemalloc (Python allocations, which is where a body lives),
bounded loosely; nothing here depends on how fast the machine is."""

from __future__ import annotations

import asyncio
import functools
import gc
import tracemalloc

import pytest

from helpers.hostile_server import Route, gzip_bomb, hostile_server
from infertop.probes.server.metrics import ServerMetricsError, ServerMetricsProbe

MB = 1_000_000


@functools.cache
def bomb(size: int) -> bytes:
    return gzip_bomb(size)


def gz_route(body: bytes) -> Route:
    return Route(body, headers={"Content-Type": "text/plain", "Content-Encoding": "gzip"})


@pytest.mark.slow
def test_gzip_bomb_memory_stays_flat_over_100_scrapes():
    """64 MB of zeros in 64 KB of gzip: each scrape stops at the 8 MB cap, and no refused
    body outlives its scrape (gc off: nothing may wait for a cycle collection)."""
    payload = bomb(64 * MB)
    assert len(payload) < 200_000

    async def run(url: str) -> list[str]:
        probe = ServerMetricsProbe(url, timeout=10.0)
        await probe.open()
        errors = []
        try:
            for i in range(100):
                try:
                    await probe.collect()
                except ServerMetricsError as e:
                    errors.append(str(e))
                if i == 9:
                    after_10.append(tracemalloc.get_traced_memory()[0])
        finally:
            await probe.close()
        return errors

    after_10: list[int] = []
    with hostile_server({"/metrics": gz_route(payload)}) as url:
        gc.disable()
        tracemalloc.start()
        try:
            errors = asyncio.run(run(url))
            current, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            gc.enable()
    assert len(errors) == 100 and all("larger than 8 MB" in e for e in errors), errors[:1]
    print(f"\n100 bombed scrapes: traced peak {peak / MB:.1f} MB, after 10 scrapes "
          f"{after_10[0] / MB:.1f} MB, after 100 {current / MB:.1f} MB")
    assert peak < 24 * MB        # one capped body (8 MB, twice while it grows); was 64 MB+
    # flat: no refused body (8 MB each) kept alive; what grows with gc off is the small
    # cycles of each refused exchange's exception (0.7 MB over 90 scrapes; with httpx it
    # was 0.1-3 MB, depending on what ran before)
    assert current - after_10[0] < 4 * MB


def test_small_gzip_page_still_scrapes():
    import gzip

    from helpers.hostile_server import FIXTURES
    page = (FIXTURES / "vllm-0.32-busy.prom").read_bytes()

    async def run(url: str):
        probe = ServerMetricsProbe(url)
        await probe.open()
        try:
            return await probe.collect()
        finally:
            await probe.close()

    with hostile_server({"/metrics": gz_route(gzip.compress(page))}) as url:
        s = asyncio.run(run(url))
    assert s.meta.dialect == "vllm" and s.meta.scrape_bytes == len(page)


def test_unknown_content_encoding_is_one_clear_error():
    async def run(url: str):
        probe = ServerMetricsProbe(url)
        await probe.open()
        try:
            await probe.collect()
        finally:
            await probe.close()

    route = Route(b"x", headers={"Content-Type": "text/plain", "Content-Encoding": "br\x1b[2J"})
    with hostile_server({"/metrics": route}) as url, \
            pytest.raises(ServerMetricsError, match="Content-Encoding") as e:
        asyncio.run(run(url))
    assert "\x1b" not in str(e.value)


def engine_page(n: int) -> bytes:
    """``n`` series of one mapped gauge, each with its own engine label (5.7 MB at 150k)."""
    head = b"# HELP vllm:num_requests_waiting w\n# TYPE vllm:num_requests_waiting gauge\n"
    return head + b"".join(b'vllm:num_requests_waiting{engine="%d"} 1\n' % i for i in range(n))


@pytest.mark.slow
def test_150k_series_page_is_capped_with_a_reason():
    from infertop.dialects import MAX_SERIES_PER_FAMILY
    page = engine_page(150_000)
    assert len(page) < 8 * MB

    async def run(url: str):
        probe = ServerMetricsProbe(url, timeout=30.0)
        await probe.open()
        try:
            return await probe.collect()
        finally:
            await probe.close()

    with hostile_server({"/metrics": Route(page)}) as url:
        tracemalloc.start()
        try:
            s = asyncio.run(run(url))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    print(f"\n150k-series scrape: {len(s.readings)} readings, traced peak {peak / MB:.0f} MB")
    assert s.status.value == "ok"
    waiting = s.find("server.requests_waiting")
    assert len(waiting) == MAX_SERIES_PER_FAMILY
    assert "only the first 100000" in s.reason and "dropped above the cardinality cap" in s.reason
    assert s.meta.series_dropped == 100_000 - 2 - MAX_SERIES_PER_FAMILY  # 2 comment lines
    assert len(s.meta.engines) == MAX_SERIES_PER_FAMILY
    assert peak < 200 * MB       # the whole pipeline held 275 MB for this page before


@pytest.mark.slow
def test_snapshot_and_record_of_a_150k_series_page_stay_bounded(tmp_path, capsys):
    import gzip
    import json

    from infertop.cli.main import main
    with hostile_server({"/metrics": Route(engine_page(150_000))}) as url:
        common = ["--url", url, "--no-gpu", "--pid", str(__import__("os").getpid())]
        assert main(["snapshot", "--json", "--window", "0.5", "--interval", "0.5", *common]) == 0
        doc = json.loads(capsys.readouterr().out)
        rec = tmp_path / "r.jsonl.gz"
        assert main(["record", "-o", str(rec), "--duration", "0.5", "--interval", "0.5",
                     *common]) == 0
    src = next(v for k, v in doc["sources"].items() if k.startswith("server:"))
    assert "dropped above the cardinality cap" in src["reason"]
    lines = gzip.decompress(rec.read_bytes()).split(b"\n")
    assert max(len(x) for x in lines) < 4 * MB     # one tick's line, capped series
    assert b"dropped above the cardinality cap" in lines[1]
