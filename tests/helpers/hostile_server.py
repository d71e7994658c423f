"""A small hostile /metrics server on 127.0.0.1 for tests: terminal escapes in label values
and error bodies, gzip bombs, pages with very many series.

    with hostile_server({"/metrics": Route(body=page)}) as url: ...

Loopback only, an ephemeral port, one daemon thread, shut down on exit.  Each route is a
status, a body (bytes, or a callable returning bytes per request) and headers.
"""

from __future__ import annotations

import contextlib
import http.server
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "metrics"

# What a hostile label value looks like: clear screen, set the terminal title, ring the
# bell, an 8-bit CSI (C1), a right-to-left override and an isolate.
EVIL = "\x1b[2J\x1b]0;PWNED\x07\x9b31m\u202eevil\u2066x\u2069"
RAW_BAD = ("\x1b", "\x07", "\x9b", "\u202e", "\u2066", "\u2069")


def has_raw_control(text: str) -> list[str]:
    """The dangerous characters (raw) that ``text`` holds; [] when none."""
    return [c for c in RAW_BAD if c in text]


def evil_vllm_page() -> bytes:
    """The busy vLLM fixture with the model name replaced by EVIL (a valid exposition:
    the value holds no quote, backslash or newline)."""
    text = (FIXTURES / "vllm-0.32-busy.prom").read_text()
    assert "tiny-llama" in text
    text = text.replace("tiny-llama", EVIL)
    text += f'# HELP evil_info {EVIL}\n# TYPE evil_info gauge\nevil_info{{v="{EVIL}"}} 1\n'
    return text.encode("utf-8")


def gzip_bomb(decompressed: int) -> bytes:
    """``decompressed`` zero bytes, gzip-compressed (about 1000:1)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"\0" * (1 << 20)
    out = []
    left = decompressed
    while left > 0:
        n = min(left, len(block))
        out.append(z.compress(block[:n]))
        left -= n
    out.append(z.flush())
    return b"".join(out)


def many_series_page(n: int) -> bytes:
    """A vLLM-looking page whose one gauge has ``n`` series (a label per request id)."""
    head = (b"# HELP vllm:num_requests_running running\n# TYPE vllm:num_requests_running gauge\n"
            b'vllm:num_requests_running{engine="0",model_name="m"} 1\n'
            b"# HELP vllm:request_tag per-request tag\n# TYPE vllm:request_tag gauge\n")
    rows = b"".join(b'vllm:request_tag{engine="0",model_name="m",rid="r%d"} 1\n' % i
                    for i in range(n))
    return head + rows


@dataclass
class Route:
    body: bytes | Callable[[], bytes] = b""
    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {
        "Content-Type": "text/plain; version=0.0.4; charset=utf-8"})


class _Handler(http.server.BaseHTTPRequestHandler):
    routes: dict[str, Route] = {}

    def do_GET(self):  # noqa: N802 (http.server's naming)
        route = self.routes.get(self.path.split("?")[0])
        if route is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = route.body() if callable(route.body) else route.body
        self.send_response(route.status)
        for k, v in route.headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client refused a bomb halfway: expected

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def hostile_server(routes: dict[str, Route]) -> Iterator[str]:
    """Serve ``routes`` on 127.0.0.1; yields the base URL ``http://127.0.0.1:PORT``."""
    handler = type("H", (_Handler,), {"routes": dict(routes)})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(5)
