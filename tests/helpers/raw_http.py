"""A scripted HTTP/1.1 server on a real socket, for the /metrics probe's tests.

``handler(req)`` answers each request with a ``Resp``: a status, headers and a body
(bytes, or an iterable of pieces sent chunked), or ``raw`` bytes written as they are (for
answers that are not HTTP), after ``delay`` seconds; ``close`` hangs up after it.
Connections are kept alive otherwise, as servers do.  ``connections`` counts accepts.
"""

from __future__ import annotations

import asyncio
import inspect
import shutil
import ssl
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Req:
    method: str
    path: str
    headers: dict[str, str]
    url: str


@dataclass
class Resp:
    status: int = 200
    content: bytes | Iterable[bytes] = b""
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None      # written as is instead of an answer built here
    delay: float = 0.0            # seconds before answering
    close: bool = False           # hang up after answering (without saying so)


REASONS = {200: "OK", 204: "No Content", 301: "Moved Permanently", 302: "Found",
           307: "Temporary Redirect", 404: "Not Found", 500: "Internal Server Error",
           501: "Not Implemented"}


class RawServer:
    def __init__(self, handler: Callable[[Req], Resp] | None = None, *,
                 tls: ssl.SSLContext | None = None, host: str = "127.0.0.1") -> None:
        self.handler = handler or (lambda req: Resp(404))
        self.tls, self.host = tls, host
        self.requests: list[Req] = []
        self.connections = 0
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task] = set()
        self.port = 0

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"{self.url}/metrics"

    async def __aenter__(self) -> RawServer:
        self._server = await asyncio.start_server(self._serve, self.host, 0, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc) -> None:
        assert self._server is not None
        self._server.close()
        for w in list(self._writers):
            w.close()
        if self._tasks:   # each sees its connection closed and returns; one still
            # waiting out a Resp.delay would hold the test up to 2 s: nobody reads its
            # answer any more, so it is cancelled
            for t in self._tasks:
                t.cancel()
            await asyncio.wait(list(self._tasks), timeout=2)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                        ConnectionError, asyncio.CancelledError):
                    return   # (cancelled: the loop is ending; asyncio would log it)
                line, *rest = head.decode("latin-1").split("\r\n")
                method, path, _ = line.split(" ", 2)
                headers = {k.strip().lower(): v.strip()
                           for k, _, v in (h.partition(":") for h in rest if h)}
                req = Req(method, path, headers, f"{self.url}{path}")
                self.requests.append(req)
                resp = self.handler(req)
                if inspect.isawaitable(resp):
                    resp = await resp
                if resp.delay:
                    await asyncio.sleep(resp.delay)
                try:
                    await self._answer(writer, resp)
                except ConnectionError:
                    return
                if resp.close:
                    return
        finally:
            self._writers.discard(writer)
            self._tasks.discard(task)
            writer.close()

    async def _answer(self, writer: asyncio.StreamWriter, resp: Resp) -> None:
        if resp.raw is not None:
            writer.write(resp.raw)
            await writer.drain()
            return
        head = [f"HTTP/1.1 {resp.status} {REASONS.get(resp.status, 'Status')}"]
        head += [f"{k}: {v}" for k, v in resp.headers.items()]
        if isinstance(resp.content, (bytes, bytearray)):
            if "content-length" not in {k.lower() for k in resp.headers}:
                head.append(f"Content-Length: {len(resp.content)}")
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + resp.content)
            await writer.drain()
            return
        head.append("Transfer-Encoding: chunked")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        for piece in resp.content:
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()


def self_signed(folder: Path) -> tuple[Path, ssl.SSLContext] | None:
    """A certificate for 127.0.0.1 made by the openssl program (None without it) and a
    server context that presents it."""
    openssl = shutil.which("openssl")
    if openssl is None:
        return None
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return cert, context
