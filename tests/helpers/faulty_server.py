"""Small misbehaving /metrics servers for the fault tests, loopback only.

``hostile(mode)`` starts a ThreadingHTTPServer on 127.0.0.1 (a free port) in a daemon
thread and yields its base URL; ``server.mode`` can be changed while it runs (a server
that goes down, or starts answering garbage).  Modes:

    ok       a small valid vLLM exposition (counters grow each scrape)
    500      HTTP 500 with a text body
    404      HTTP 404 with a long HTML page (what a wrong path or a web UI answers)
    html     HTTP 200 with an HTML page (the URL is a web page, not /metrics)
    hang     accepts, reads the request, never answers (until the server stops)
    dup      a valid page with one series written twice (the first scrape only: ``dup_once``)
    nanhist  a valid page plus a TTFT histogram whose bucket counts are NaN and +Inf

Bounded: a hanging handler waits on an Event that ``stop`` sets, so nothing outlives the
test.  ``closed_port()`` returns a loopback port with nothing listening on it.
"""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

HTML_404 = ("<!DOCTYPE html><html><head><title>404 Not Found</title><style>body{font:"
            "14px sans-serif}</style></head><body><h1>Not Found</h1><p>The requested URL "
            "was not found on this server.</p>" + "<!-- padding -->" * 200 + "</body></html>")


def exposition(n: int, *, dup: bool = False) -> str:
    """A small vLLM page; counters grow with the scrape number ``n``."""
    lines = [
        "# HELP vllm:num_requests_running Number of requests running.",
        "# TYPE vllm:num_requests_running gauge",
        'vllm:num_requests_running{model_name="m"} 3.0',
        "# HELP vllm:num_requests_waiting Number of requests waiting.",
        "# TYPE vllm:num_requests_waiting gauge",
        'vllm:num_requests_waiting{model_name="m"} 0.0',
        "# HELP vllm:kv_cache_usage_perc KV usage.",
        "# TYPE vllm:kv_cache_usage_perc gauge",
        'vllm:kv_cache_usage_perc{model_name="m"} 0.25',
        "# HELP vllm:generation_tokens_total Generated tokens.",
        "# TYPE vllm:generation_tokens_total counter",
        f'vllm:generation_tokens_total{{model_name="m"}} {1000.0 + 100.0 * n}',
    ]
    if dup:
        lines.append(f'vllm:generation_tokens_total{{model_name="m"}} {1000.0 + 100.0 * n}')
    return "\n".join(lines) + "\n"


NAN_HISTOGRAM = """\
# HELP vllm:time_to_first_token_seconds TTFT.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} NaN
vllm:time_to_first_token_seconds_bucket{le="1.0",model_name="m"} +Inf
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} NaN
vllm:time_to_first_token_seconds_count{model_name="m"} NaN
vllm:time_to_first_token_seconds_sum{model_name="m"} +Inf
"""


class HostileServer:
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.scrapes = 0
        self.dup_once = False
        self._stop = threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_GET(self):
                outer.scrapes += 1
                mode = outer.mode
                if mode == "hang":
                    outer._stop.wait(30)
                    return
                if mode == "500":
                    return self._send(500, "text/plain", "internal error: engine dead\n")
                if mode == "404":
                    return self._send(404, "text/html", HTML_404)
                if mode == "html":
                    return self._send(200, "text/html", "<html><body>hello</body></html>")
                dup = mode == "dup" or (outer.dup_once and outer.scrapes == 1)
                page = exposition(outer.scrapes, dup=dup)
                if mode == "nanhist":
                    page += NAN_HISTOGRAM
                return self._send(200, "text/plain; version=0.0.4", page)

            def _send(self, code: int, ctype: str, body: str) -> None:
                data = body.encode()
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:
                    pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@contextmanager
def hostile(mode: str) -> Iterator[HostileServer]:
    s = HostileServer(mode)
    try:
        yield s
    finally:
        s.stop()


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
