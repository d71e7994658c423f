"""The demo server: real HTTP, scraped by the real ServerMetricsProbe, equal to the demo
source at the same scenario time; goes down and comes back; stops on Ctrl-C."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from helpers.snapkit import meta_of, must
from infertop.cli.demo_server import DemoServer, DemoServerError
from infertop.meta import ServerMeta
from infertop.probes.server.metrics import ServerMetricsProbe
from infertop.probes.sources.demo import DemoSource

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_800_000_000.0


def _key(r):
    return (r.key, r.labels, r.value, r.status, r.text, r.buckets, r.hist_sum)


@pytest.mark.parametrize("dialect", ["vllm", "sglang", "llamacpp", "tgi"])
async def test_scrape_equals_the_demo_source_at_the_same_time(dialect):
    server = DemoServer("mem-kv-pressure", port=0, dialect=dialect, autoplay=False,
                        start_time=T0, seed=5)
    await server.start()
    try:
        probe = ServerMetricsProbe(server.url)
        assert (await probe.open()).available
        source = DemoSource("mem-kv-pressure", dialect=dialect, start_time=T0, seed=5,
                            instance=probe.instance)
        for tick in range(1, 41):
            if tick > 1:
                await server.tick()
            expect = must(source.next_sync()).samples[source.server_source]
            if tick in (1, 25, 40):
                got = await probe.collect()
                assert len(got.readings) > 10
                assert sorted(map(_key, got.readings)) == sorted(map(_key, expect.readings))
                assert meta_of(got, ServerMeta).dialect == meta_of(expect, ServerMeta).dialect \
                    == dialect
        await probe.close()
    finally:
        await server.stop()


async def test_health_models_and_unknown_paths():
    server = DemoServer("healthy", port=0, autoplay=False)
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url) as c:
            assert (await c.get("/health")).status_code == 200
            models = (await c.get("/v1/models")).json()
            assert models["data"][0]["id"] == "meta-llama/Llama-3.1-8B-Instruct"
            assert (await c.get("/nope")).status_code == 404
            assert (await c.post("/metrics")).status_code == 405
            r = await c.get("/metrics")
            assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
            assert "vllm:num_requests_running" in r.text
    finally:
        await server.stop()
    assert server.host == "127.0.0.1"  # loopback unless told otherwise


async def test_concurrent_scrapes():
    server = DemoServer("healthy", port=0, autoplay=False)
    await server.start()
    try:
        for _ in range(5):
            await server.tick()
        async with httpx.AsyncClient(base_url=server.url) as c:
            got = await asyncio.gather(*(c.get("/metrics") for _ in range(24)))
        assert {r.status_code for r in got} == {200}
        assert len({r.content for r in got}) == 1 and server.scrapes == 24
    finally:
        await server.stop()


async def test_downtime_refuses_connections_then_the_server_comes_back():
    server = DemoServer("dec-error-restart", port=0, autoplay=False, start_time=T0)
    await server.start()
    probe = ServerMetricsProbe(server.url)
    await probe.open()
    try:
        before = None
        while server.source.phase.name != "down":
            await server.tick()
            if server.source.phase.name == "errors":
                before = (await probe.collect()).readings
        with pytest.raises(Exception, match="connection refused"):
            await probe.collect()
        while server.source.phase.name == "down":
            await server.tick()
        after = (await probe.collect()).readings

        def gen(rs):
            return sum(r.value for r in rs if r.key == "server.generation_tokens_total")
        assert 0 < gen(after) < gen(before)  # a new process: counters from zero
    finally:
        await probe.close()
        await server.stop()


async def test_port_in_use_is_one_clear_line():
    first = DemoServer("healthy", port=0, autoplay=False)
    await first.start()
    try:
        second = DemoServer("healthy", port=first.port, autoplay=False)
        with pytest.raises(DemoServerError, match=f"cannot listen on 127.0.0.1:{first.port}"):
            await second.start()
    finally:
        await first.stop()


async def test_autoplay_advances_with_wall_time():
    server = DemoServer("healthy", port=0, speed=100.0)
    await server.start()
    try:
        start = must(server.frame).tick
        for _ in range(5):
            await asyncio.wait_for(server.next_tick(), timeout=10)
        async with httpx.AsyncClient(base_url=server.url) as c:
            assert (await c.get("/metrics")).status_code == 200
        assert must(server.frame).tick >= start + 5
    finally:
        await server.stop()


def test_serve_stops_cleanly_on_ctrl_c():
    code = textwrap.dedent("""
        import sys
        from infertop.cli.demo_server import serve
        sys.exit(serve("healthy", port=0, dialect="sglang"))
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    assert proc.stderr is not None   # piped above
    try:
        line = proc.stderr.readline()
        assert "sglang dialect" in line and "http://127.0.0.1:" in line
        url = line.split("http://", 1)[1].split()[0]
        r = httpx.get("http://" + url, timeout=10)
        assert r.status_code == 200 and "sglang:num_running_reqs" in r.text
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
        assert "stopped" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()


async def test_scrapes_reuse_one_connection_and_a_server_going_down_drops_it():
    """HTTP/1.1 keep-alive as uvicorn serves vLLM (a scraper pays no connect per scrape);
    HTTP/1.0 and `Connection: close` are answered and closed; a server that goes down
    drops its kept-alive connections (the scraper must see it down, not an old socket)."""
    server = DemoServer("dec-error-restart", port=0, autoplay=False, start_time=T0)
    await server.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        for _ in range(2):   # two requests, one connection
            writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            assert b"200 OK" in head and b"Connection: keep-alive" in head
            n = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            assert (await asyncio.wait_for(reader.readexactly(n), 10)).startswith(b"#")
        for request in (b"GET /metrics HTTP/1.0\r\n\r\n",
                        b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n"):
            r2, w2 = await asyncio.open_connection("127.0.0.1", server.port)
            w2.write(request)
            await w2.drain()
            data = await asyncio.wait_for(r2.read(), 10)   # read() ends: the server closed
            assert b"200 OK" in data and b"Connection: close" in data
            w2.close()
        while not server.down:                       # the scenario's restart: port closes
            await server.tick()
        assert await asyncio.wait_for(reader.read(), 10) == b""   # the kept one is dropped
        writer.close()
    finally:
        await asyncio.wait_for(server.stop(), 10)


async def test_stop_ends_idle_kept_alive_connections():
    server = DemoServer("healthy", port=0, autoplay=False)
    await server.start()
    async with httpx.AsyncClient() as client:   # keeps its connection open in its pool
        r = await client.get(f"http://127.0.0.1:{server.port}/metrics")
        assert r.status_code == 200 and r.headers["connection"] == "keep-alive"
        await asyncio.wait_for(server.stop(), 10)   # does not wait for the idle client
