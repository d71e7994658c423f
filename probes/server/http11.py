"""The /metrics scrape's HTTP: one keep-alive HTTP/1.1 connection, h11 over asyncio streams.

Why not httpx (which fleet mode and the profiler trigger still use): the scrape runs every
tick on the event loop, and in a live session httpx + httpcore + anyio took ~6 ms of the
main thread a scrape (in place, at 1 Hz: cold caches) and 3.3 MB of RSS to import
(benchmarks/bench_http_client.py prints both).  h11 (python-hyper, the HTTP/1.1 parser
httpcore itself uses) does the protocol: status line, headers, chunked and
Content-Length bodies, keep-alive state, a bound on the header block.  What is left here
is the socket: connect, send, read, reuse, and close on anything unexpected.  Tests check
it against httpx on the same raw answers (tests/test_http11.py).

Bounds: the header block (h11's ``max_incomplete_event_size``), the body is the caller's
to cap (it reads chunk by chunk), time is bounded by ``connect_timeout`` here and by the
caller's deadline around the whole request.  No proxies (a local monitor must not send
127.0.0.1 scrapes to an HTTP_PROXY from the environment), no cookies, no auth.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlsplit

import h11

__all__ = ["Http11Client", "HttpError", "ConnectFailed", "Response"]

READ_SIZE = 64 * 1024
CLOSED_EARLY = "the server closed the connection without an answer"
MAX_HEADER_BYTES = 64 * 1024


class HttpError(Exception):
    """The exchange broke (the server's answer was not HTTP, or the connection dropped)."""


class ConnectFailed(HttpError):
    """No connection: ``__cause__`` is the OSError (refused, unreachable, DNS...)."""


class Response:
    """Status and headers of one answer; the body is read with ``iter_raw``.

    ``headers`` maps lower-case names to values (latin-1 text; repeated names joined
    with ", " as RFC 9110 allows)."""

    __slots__ = ("status", "headers", "_conn")

    def __init__(self, status: int, headers: dict[str, str], conn: _Connection) -> None:
        self.status, self.headers, self._conn = status, headers, conn

    @property
    def is_redirect(self) -> bool:
        return self.status in (301, 302, 303, 307, 308) and "location" in self.headers

    async def iter_raw(self) -> AsyncIterator[bytes]:
        """The body as sent (still compressed if it was), piece by piece."""
        conn = self._conn
        while True:
            event = await conn.next_event()
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return
            else:   # pragma: no cover - h11 sends only Data then EndOfMessage here
                raise HttpError(f"unexpected {type(event).__name__} in a body")


class _Connection:
    __slots__ = ("reader", "writer", "h11", "received", "first", "head_done")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEADER_BYTES)
        self.received = 0      # bytes read since the request was sent
        self.first = b""       # the first of them, to say what a non-HTTP answer was
        self.head_done = False  # the answer's status line and headers were read

    @property
    def reusable(self) -> bool:
        """Idle, and the server has not closed its end while we waited (a keep-alive
        timeout: uvicorn closes an idle connection after 5 s)."""
        return (self.h11.our_state is h11.IDLE and self.h11.their_state is h11.IDLE
                and not self.reader.at_eof() and not self.writer.is_closing())

    async def next_event(self) -> Any:
        conn = self.h11
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as e:
                if self.reader.at_eof() and self.received == 0:   # h11 words a close so
                    raise HttpError(CLOSED_EARLY) from None
                start = self.first.lstrip()[:5]
                if not self.head_done and start != b"HTTP/"[:len(start)]:
                    began = self.first[:60].decode("latin-1")
                    raise HttpError(f"not an HTTP answer (it began {began!r})") from None
                if self.reader.at_eof():
                    raise HttpError("the server closed the connection mid-answer") from None
                if not self.head_done and len(conn.trailing_data[0]) > MAX_HEADER_BYTES:
                    raise HttpError(f"not a valid HTTP answer: its headers run past "
                                    f"{MAX_HEADER_BYTES // 1024} KB") from None
                raise HttpError(f"not a valid HTTP answer ({e})") from None
            if event is not h11.NEED_DATA:
                if event is h11.PAUSED:   # pragma: no cover - only after a protocol switch
                    raise HttpError("the server switched protocols")
                return event
            data = await self.reader.read(READ_SIZE)
            if len(self.first) < 60:
                self.first += data[:60]
            self.received += len(data)
            conn.receive_data(data)     # b"": the peer closed (h11 decides if that is fine)

    def close(self) -> None:
        if not self.writer.is_closing():
            self.writer.close()


class Http11Client:
    """GET over one kept-alive connection to one origin (scheme, host, port).

    ``async with client.stream(url) as resp:`` then ``resp.status``, ``resp.headers``
    and ``async for piece in resp.iter_raw()``.  The connection is kept for the next
    request only when this answer was read to its end and both sides agree to keep it;
    otherwise it is closed.  A request on a kept connection that the server had closed
    meanwhile is sent again once on a new one (nothing of an answer was read)."""

    def __init__(self, *, headers: dict[str, str] | None = None,
                 connect_timeout: float = 2.0,
                 connector: Callable[[str, int, float], socket.socket] | None = None) -> None:
        self._headers = [(k.encode("ascii"), v.encode("latin-1"))
                         for k, v in (headers or {}).items()]
        self.connect_timeout = connect_timeout
        # blocking (host, port, timeout) -> connected socket, run in a worker thread: a
        # server in another network namespace is dialled from inside it (netns.connect_in)
        self._connector = connector
        self._tls_context: ssl.SSLContext | None = None   # made on the first https connect
        self._conn: _Connection | None = None
        self._origin: tuple[str, str, int] | None = None
        self._requests: dict[str, tuple[tuple[str, str, int], h11.Request]] = {}

    def stream(self, url: str) -> _Exchange:
        return _Exchange(self, url)

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    # -- internals ------------------------------------------------------------------------
    async def _connect(self, scheme: str, host: str, port: int) -> _Connection:
        context = None
        if scheme == "https":
            if self._tls_context is None:   # loaded once, and only for https (RSS)
                self._tls_context = ssl.create_default_context()
            context = self._tls_context
        try:
            if self._connector is not None:
                sock = await asyncio.wait_for(asyncio.to_thread(
                    self._connector, host, port, self.connect_timeout),
                    self.connect_timeout + 2.0)
                reader, writer = await asyncio.wait_for(asyncio.open_connection(
                    sock=sock, ssl=context, limit=READ_SIZE,
                    server_hostname=host if context is not None else None),
                    self.connect_timeout)
            else:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(host, port, ssl=context, limit=READ_SIZE),
                    self.connect_timeout)
        except asyncio.TimeoutError:   # before OSError: TimeoutError is one since 3.11
            raise ConnectFailed(f"no connection within {self.connect_timeout:g} s (a wrong "
                                "address, or a firewall dropping packets?)") from None
        except (OSError, ssl.SSLError) as e:
            raise ConnectFailed(str(e) or type(e).__name__) from e
        return _Connection(reader, writer)

    def _request(self, url: str) -> tuple[tuple[str, str, int], h11.Request]:
        """(origin, the GET request) for ``url``, made once per URL: h11 validates every
        header of a new Request (~50 us of the event loop a scrape, every scrape)."""
        hit = self._requests.get(url)
        if hit is None:
            hit = self._make_request(url)
            if len(self._requests) >= 8:   # the URL and a redirect or two
                self._requests.clear()
            self._requests[url] = hit
        return hit

    def _make_request(self, url: str) -> tuple[tuple[str, str, int], h11.Request]:
        parts = urlsplit(url)
        scheme, host = parts.scheme, parts.hostname or ""
        port = parts.port or (443 if scheme == "https" else 80)
        if scheme not in ("http", "https") or not host:
            raise HttpError(f"not an http(s) URL: {url[:200]!r}")
        origin = (scheme, host, port)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        default_port = port == (443 if scheme == "https" else 80)
        try:
            host_text = host if host.isascii() else host.encode("idna").decode("ascii")
        except UnicodeError:
            raise HttpError(f"bad host name {host[:100]!r}") from None
        host_text = f"[{host_text}]" if ":" in host_text else host_text
        host_header = host_text if default_port else f"{host_text}:{port}"
        request = h11.Request(method="GET", target=target.encode("ascii", "replace"),
                              headers=[(b"host", host_header.encode("ascii"))] + self._headers)
        return origin, request

    async def _open(self, url: str) -> tuple[Response, _Connection]:
        origin, request = self._request(url)
        for attempt in (0, 1):
            conn, self._conn = self._conn, None
            if conn is not None and (self._origin != origin or not conn.reusable):
                conn.close()
                conn = None
            reused = conn is not None
            if not reused:
                conn = await self._connect(*origin)
            assert conn is not None
            conn.received, conn.first, conn.head_done = 0, b"", False
            try:
                conn.writer.write(conn.h11.send(request) + conn.h11.send(h11.EndOfMessage()))
                await conn.writer.drain()
                event = await conn.next_event()
                while isinstance(event, h11.InformationalResponse):   # 100 Continue and kin
                    event = await conn.next_event()
            except (OSError, HttpError) as e:
                conn.close()
                # a kept connection the server closed as we sent: once more on a new one
                if reused and attempt == 0 and conn.received == 0:
                    continue
                if isinstance(e, HttpError):
                    raise
                raise HttpError(f"connection lost: {e or type(e).__name__}") from None
            except BaseException:
                conn.close()
                raise
            if not isinstance(event, h11.Response):   # pragma: no cover - h11 raises first
                conn.close()
                raise HttpError(CLOSED_EARLY)
            conn.head_done = True
            headers: dict[str, str] = {}
            for name, value in event.headers:
                k, v = name.decode("latin-1"), value.decode("latin-1")
                headers[k] = f"{headers[k]}, {v}" if k in headers else v
            self._origin = origin
            return Response(event.status_code, headers, conn), conn
        raise HttpError(CLOSED_EARLY)  # pragma: no cover

    def _release(self, conn: _Connection, ok: bool) -> None:
        """Keep ``conn`` for the next request if its answer was read to the end (h11 says
        DONE for the server only after the body's end was read) and both sides keep it."""
        if ok and conn.h11.our_state is h11.DONE and conn.h11.their_state is h11.DONE:
            try:
                conn.h11.start_next_cycle()
            except h11.LocalProtocolError:
                conn.close()
                return
            self._conn = conn
        else:
            conn.close()


class _Exchange:
    """``async with client.stream(url) as resp``: one request and its answer."""

    __slots__ = ("_client", "_url", "_conn")

    def __init__(self, client: Http11Client, url: str) -> None:
        self._client, self._url = client, url
        self._conn: _Connection | None = None

    async def __aenter__(self) -> Response:
        resp, self._conn = await self._client._open(self._url)
        return resp

    async def __aexit__(self, exc_type, exc, tb) -> None:
        if self._conn is not None:
            self._client._release(self._conn, exc_type is None)
