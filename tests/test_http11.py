"""probes/server/http11.py: the /metrics scrape's keep-alive HTTP/1.1 client.

httpx (a dependency for fleet mode and the profiler trigger) is the oracle: on the same
raw answers from a real socket, both must read the same status, headers and body bytes,
and both must refuse the same broken answers."""

from __future__ import annotations

import asyncio
import gzip

import httpx
import pytest

from helpers.faulty_server import closed_port
from helpers.raw_http import RawServer, Resp
from infertop.probes.server.http11 import (
    CLOSED_EARLY,
    ConnectFailed,
    Http11Client,
    HttpError,
)

HEAD_OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"

# raw answers both clients must read alike: (name, bytes)
GOOD = [
    ("content-length", HEAD_OK + b"Content-Length: 5\r\n\r\nhello"),
    ("chunked", HEAD_OK + b"Transfer-Encoding: chunked\r\n\r\n"
     b"3\r\nfoo\r\n4;ext=1\r\nbarz\r\n0\r\nX-Trailer: t\r\n\r\n"),
    ("close-delimited (HTTP/1.0)", b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n"
     b"no length, ends at close"),
    ("repeated headers", HEAD_OK + b"Set-Cookie: a=1\r\nX-A: 1\r\nX-A: 2\r\n"
     b"Content-Length: 2\r\n\r\nok"),
    ("gzip (left compressed)", HEAD_OK + b"Content-Encoding: gzip\r\nContent-Length: "
     + str(len(gzip.compress(b"x" * 1000))).encode() + b"\r\n\r\n" + gzip.compress(b"x" * 1000)),
    ("100 continue first", b"HTTP/1.1 100 Continue\r\n\r\n" + HEAD_OK
     + b"Content-Length: 2\r\n\r\nok"),
    ("empty 204", b"HTTP/1.1 204 No Content\r\n\r\n"),
    ("error status", b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy"),
    ("bare LF line ends", b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok"),
]

# answers both must refuse
BAD = [
    ("not HTTP", b"SSH-2.0-OpenSSH_9.6\r\n"),
    ("truncated body", HEAD_OK + b"Content-Length: 100\r\n\r\nshort"),
    ("bad chunk size", HEAD_OK + b"Transfer-Encoding: chunked\r\n\r\nzz\r\nfoo\r\n0\r\n\r\n"),
    ("nothing at all", b""),
    ("header block of 1 MB", b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 1_000_000 + b"\r\n\r\n"),
    ("two lengths", HEAD_OK + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\nok!"),
]


async def ours(url: str) -> tuple[int, dict[str, str], bytes]:
    client = Http11Client(connect_timeout=2)
    try:
        async with client.stream(url) as resp:
            body = b"".join([p async for p in resp.iter_raw()])
            return resp.status, resp.headers, body
    finally:
        await client.aclose()


async def theirs(url: str) -> tuple[int, dict[str, str], bytes]:
    async with httpx.AsyncClient(trust_env=False, timeout=5) as client, \
            client.stream("GET", url) as resp:
        body = b"".join([p async for p in resp.aiter_raw()])
        headers: dict[str, str] = {}
        for k, v in resp.headers.multi_items():
            headers[k] = f"{headers[k]}, {v}" if k in headers else v
        return resp.status_code, headers, body


@pytest.mark.parametrize("name, raw", GOOD, ids=[n for n, _ in GOOD])
async def test_reads_what_httpx_reads(name: str, raw: bytes):
    async with RawServer(lambda req: Resp(raw=raw, close=True)) as srv:
        got = await ours(srv.metrics_url)
        want = await theirs(srv.metrics_url)
    assert got == want
    assert got[0] in (200, 204, 503)


@pytest.mark.parametrize("name, raw", BAD, ids=[n for n, _ in BAD])
async def test_refuses_what_httpx_refuses(name: str, raw: bytes):
    async with RawServer(lambda req: Resp(raw=raw, close=True)) as srv:
        with pytest.raises(httpx.HTTPError):
            await theirs(srv.metrics_url)
        with pytest.raises(HttpError) as e:
            await ours(srv.metrics_url)
    msg = str(e.value)
    assert msg and len(msg) < 300 and "\n" not in msg
    if name == "nothing at all":
        assert msg == CLOSED_EARLY
    if name == "truncated body":
        assert "mid-answer" in msg
    if name == "header block of 1 MB":
        assert msg == "not a valid HTTP answer: its headers run past 64 KB"


async def test_one_connection_for_many_requests():
    async with RawServer(lambda req: Resp(200, b"ok")) as srv:
        client = Http11Client()
        for _ in range(5):
            async with client.stream(srv.metrics_url) as resp:
                assert [p async for p in resp.iter_raw()] == [b"ok"]
        await client.aclose()
    assert srv.connections == 1 and len(srv.requests) == 5


async def test_chunked_answers_keep_the_connection_too():
    async with RawServer(lambda req: Resp(200, [b"a", b"bc", b"def"])) as srv:
        client = Http11Client()
        for _ in range(3):
            async with client.stream(srv.metrics_url) as resp:
                assert b"".join([p async for p in resp.iter_raw()]) == b"abcdef"
        await client.aclose()
    assert srv.connections == 1


async def test_an_idle_connection_the_server_closed_is_replaced():
    """uvicorn closes a keep-alive connection after 5 s idle: a scrape every 10 s always
    finds its connection closed, and must not fail for it."""
    async with RawServer(lambda req: Resp(200, b"ok", close=True)) as srv:
        client = Http11Client()
        for _ in range(3):
            async with client.stream(srv.metrics_url) as resp:
                assert [p async for p in resp.iter_raw()] == [b"ok"]
            await asyncio.sleep(0.05)   # the close reaches us
        await client.aclose()
    assert srv.connections == 3


async def test_a_close_racing_the_request_is_retried_once():
    """The server hangs up just as the next request goes out (its close had not arrived):
    nothing of an answer was read, so the request goes again on a new connection."""
    async with RawServer(lambda req: Resp(200, b"ok")) as srv:
        client = Http11Client()
        async with client.stream(srv.metrics_url) as resp:
            assert [p async for p in resp.iter_raw()] == [b"ok"]
        kept = client._conn
        assert kept is not None and kept.reusable
        real_read = kept.reader.read

        # the server's FIN arrives after our send: one read of the stream, swapped in place
        async def dropped(n: int = -1) -> bytes:
            kept.reader.read = real_read  # type: ignore[method-assign]
            return b""

        kept.reader.read = dropped  # type: ignore[method-assign]
        async with client.stream(srv.metrics_url) as resp:
            assert (resp.status, [p async for p in resp.iter_raw()]) == (200, [b"ok"])
        await client.aclose()
    assert srv.connections == 2


async def test_connection_close_header_is_honoured():
    async with RawServer(lambda req: Resp(200, b"ok", {"Connection": "close"})) as srv:
        client = Http11Client()
        for _ in range(2):
            async with client.stream(srv.metrics_url) as resp:
                assert [p async for p in resp.iter_raw()] == [b"ok"]
        await client.aclose()
    assert srv.connections == 2


async def test_an_unread_body_is_not_reused():
    """A redirect's body is not read: that connection cannot carry the next request."""
    async with RawServer(lambda req: Resp(200, b"x" * 10)) as srv:
        client = Http11Client()
        async with client.stream(srv.metrics_url) as resp:
            assert resp.status == 200
        async with client.stream(srv.metrics_url) as resp:
            assert b"".join([p async for p in resp.iter_raw()]) == b"x" * 10
        await client.aclose()
    assert srv.connections == 2


async def test_request_shape():
    async with RawServer(lambda req: Resp(200, b"ok")) as srv:
        client = Http11Client(headers={"Accept": "text/plain"})
        async with client.stream(f"{srv.url}/a/b?x=1&y=%20") as resp:
            [p async for p in resp.iter_raw()]
        await client.aclose()
    [req] = srv.requests
    assert (req.method, req.path) == ("GET", "/a/b?x=1&y=%20")
    assert req.headers["host"] == f"127.0.0.1:{srv.port}"
    assert req.headers["accept"] == "text/plain"


async def test_refused_is_connect_failed_with_the_os_error():
    with pytest.raises(ConnectFailed) as e:
        await ours(f"http://127.0.0.1:{closed_port()}/metrics")
    assert isinstance(e.value.__cause__, ConnectionRefusedError)


async def test_cancel_mid_body_closes_the_connection():
    """The probe's deadline cancels a slow answer: the half-read connection is dropped."""
    async with RawServer(lambda req: Resp(raw=HEAD_OK + b"Content-Length: 100\r\n\r\nfirst")) as srv:
        client = Http11Client()

        async def read_all():
            async with client.stream(srv.metrics_url) as resp:
                return [p async for p in resp.iter_raw()]

        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(read_all(), 0.3)
        assert client._conn is None
        await client.aclose()


async def test_an_ipv6_literal_url():
    srv = RawServer(lambda req: Resp(200, b"ok"), host="::1")
    try:
        await srv.__aenter__()
    except OSError as e:
        pytest.skip(f"no IPv6 loopback here: {e}")
    try:
        assert srv.metrics_url == f"http://[::1]:{srv.port}/metrics"
        assert await ours(srv.metrics_url) == (200, {"content-length": "2"}, b"ok")
    finally:
        await srv.__aexit__(None, None, None)
    assert srv.requests[0].headers["host"] == f"[::1]:{srv.port}"


def test_a_scrape_loads_no_httpx():
    """The point of this client: a live session's scrape never imports httpx, httpcore or
    anyio (3.3 MB of RSS; the 60 MB steady-state budget of issue 11 counts on it)."""
    import subprocess
    import sys
    code = """
import asyncio, sys
sys.path.insert(0, "tests")
from helpers.raw_http import RawServer, Resp
from infertop.probes.server.metrics import ServerMetricsProbe
async def main():
    async with RawServer(lambda req: Resp(200, b"up 1\\n")) as srv:
        probe = ServerMetricsProbe(srv.url)
        await probe.open()
        s = await probe.collect()
        await probe.close()
    print(s.status.name, sorted(m for m in ("httpx", "httpcore", "anyio") if m in sys.modules))
asyncio.run(main())
"""
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                       timeout=60)
    assert r.stdout.split() == ["OK", "[]"], r.stdout + r.stderr
