"""ServerMetricsProbe against httpx.MockTransport, plus one real socket server."""

from __future__ import annotations

import http.server
import threading
from pathlib import Path

import httpx
import pytest

from infertop.model import Status
from infertop.probes.sources.hub import Hub
from infertop.probes.server.metrics import ServerMetricsError, ServerMetricsProbe, normalize_url

METRICS = Path(__file__).parent / "fixtures" / "metrics"
VLLM = (METRICS / "vllm-0.32-busy.prom").read_bytes()
LLAMA = (METRICS / "llamacpp-busy.prom").read_bytes()
URL = "http://127.0.0.1:8000/metrics"
PLAIN = {"content-type": "text/plain; version=0.0.4; charset=utf-8"}


def mock(handler) -> ServerMetricsProbe:
    return ServerMetricsProbe("127.0.0.1:8000", transport=httpx.MockTransport(handler))


async def scrape(probe: ServerMetricsProbe):
    cap = await probe.open()
    assert cap.available
    try:
        return await probe.collect()
    finally:
        await probe.close()


@pytest.mark.parametrize("given, url, instance", [
    ("127.0.0.1:8000", URL, "127.0.0.1:8000"),
    ("http://127.0.0.1:8000", URL, "127.0.0.1:8000"),
    ("http://127.0.0.1:8000/", URL, "127.0.0.1:8000"),
    ("http://127.0.0.1:8000/metrics", URL, "127.0.0.1:8000"),
    ("8000", URL, "127.0.0.1:8000"),
    ("localhost:3000", "http://localhost:3000/metrics", "localhost:3000"),
    ("https://gpu-box", "https://gpu-box:443/metrics", "gpu-box:443"),
    ("http://[::1]:8002/metrics", "http://[::1]:8002/metrics", "[::1]:8002"),
    ("http://h:9000/prometheus/metrics", "http://h:9000/prometheus/metrics", "h:9000"),
])
def test_url_normalisation(given: str, url: str, instance: str):
    assert normalize_url(given) == (url, instance)
    p = ServerMetricsProbe(given)
    assert (p.url, p.name) == (url, f"server:{instance}")


async def test_bad_url_is_an_unavailable_capability():
    p = ServerMetricsProbe("ftp://x:1")
    cap = await p.open()
    assert not cap.available and "http" in cap.reason
    with pytest.raises(ServerMetricsError):
        await p.collect()


async def test_ok_vllm_fixture_and_request_shape():
    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(200, content=VLLM, headers=PLAIN)

    s = await scrape(mock(handler))
    assert s.status is Status.OK and s.source == "server:127.0.0.1:8000"
    assert s.meta == {"dialect": "vllm", "model": "tiny-llama", "engines": ["0"], "url": URL,
                      "scrape_bytes": len(VLLM)}
    assert s.find("server.generation_tokens_total")[0].value == 61167.0
    assert s.find("server.requests_running")[0].label("instance") == "127.0.0.1:8000"
    assert str(seen[0].url) == URL
    assert seen[0].headers["accept"] == "text/plain"  # never OpenMetrics (breaks vllm: names)
    assert s.duration > 0


async def test_ok_llamacpp_with_start_time_header():
    def handler(req):
        return httpx.Response(200, content=LLAMA,
                              headers={**PLAIN, "Process-Start-Time-Unix": "1795000000"})

    s = await scrape(mock(handler))
    assert s.meta["dialect"] == "llamacpp"
    assert s.find("server.process_start_seconds")[0].value == 1795000000.0
    assert s.find("server.requests_waiting")[0].value == 4.0


async def test_llamacpp_without_metrics_flag_says_the_fix():
    body = (b'{"error":{"code":501,"message":"This server does not support metrics endpoint. '
            b'Start it with `--metrics`","type":"not_supported_error"}}')
    p = mock(lambda req: httpx.Response(501, content=body))
    with pytest.raises(ServerMetricsError) as e:
        await scrape(p)
    msg = str(e.value)
    assert msg.startswith(f"HTTP 501 from {URL}: ")
    assert "This server does not support metrics endpoint" in msg
    assert msg.endswith("start llama-server with --metrics")


async def test_http_500_includes_status_and_the_start_of_the_body():
    body = b"Internal Server Error: " + b"x" * 500
    with pytest.raises(ServerMetricsError) as e:
        await scrape(mock(lambda req: httpx.Response(500, content=body)))
    msg = str(e.value)
    assert "HTTP 500" in msg and "Internal Server Error: xxx" in msg
    assert "x" * 121 not in msg  # body cut at 120 characters


async def test_404_points_at_port_and_flags():
    with pytest.raises(ServerMetricsError, match="HTTP 404 .*enable-metrics"):
        await scrape(mock(lambda req: httpx.Response(404, content=b'{"detail":"Not Found"}')))


async def test_garbage_body_is_rejected_clearly():
    html = b"<!DOCTYPE html><html><body>Welcome to nginx!</body></html>"
    with pytest.raises(ServerMetricsError, match="did not return Prometheus metrics: line 1.*HTML"):
        await scrape(mock(lambda req: httpx.Response(200, content=html)))
    with pytest.raises(ServerMetricsError, match="JSON"):
        await scrape(mock(lambda req: httpx.Response(200, content=b'{"status": "ok"}')))


async def test_empty_body_is_an_error_not_silent_zeros():
    with pytest.raises(ServerMetricsError, match="empty response"):
        await scrape(mock(lambda req: httpx.Response(200, content=b"")))


async def test_oversize_body_stops_at_the_cap():
    sent = []

    async def chunks():
        for _ in range(50):
            sent.append(1)
            yield b"# " + b"x" * 65534 + b"\n"

    p = ServerMetricsProbe("127.0.0.1:8000", max_bytes=1_000_000,
                           transport=httpx.MockTransport(
                               lambda req: httpx.Response(200, content=chunks())))
    with pytest.raises(ServerMetricsError, match="response larger than 1 MB"):
        await scrape(p)
    assert len(sent) < 50  # stopped reading, did not buffer the whole body


async def test_default_cap_message_says_8_mb():
    big = b"#" * 8_000_001
    with pytest.raises(ServerMetricsError, match="response larger than 8 MB"):
        await scrape(mock(lambda req: httpx.Response(200, content=big)))


async def test_connection_refused():
    def handler(req):
        raise httpx.ConnectError("[Errno 111] Connection refused", request=req)

    with pytest.raises(ServerMetricsError) as e:
        await scrape(mock(handler))
    assert str(e.value) == f"connection refused at {URL} — is the server running?"


async def test_timeout():
    def handler(req):
        raise httpx.ReadTimeout("timed out", request=req)

    with pytest.raises(ServerMetricsError, match=r"no answer from .* within 2 s"):
        await scrape(mock(handler))


async def test_same_host_redirect_is_followed_other_host_is_not():
    def same(req):
        if req.url.path == "/metrics":
            return httpx.Response(307, headers={"location": "/metrics/"})
        return httpx.Response(200, content=LLAMA)

    s = await scrape(mock(same))
    assert s.meta["url"] == "http://127.0.0.1:8000/metrics/"

    def other(req):
        return httpx.Response(302, headers={"location": "http://evil.example/metrics"})

    with pytest.raises(ServerMetricsError, match="redirects to another host"):
        await scrape(mock(other))


async def test_a_redirect_from_http_to_https_is_refused_with_the_url_to_pass():
    """The client of an http URL loads no certificates, so it must not follow a redirect
    into TLS; the message names the https URL to pass instead."""
    def to_tls(req):
        return httpx.Response(301, headers={"location": "https://127.0.0.1:8000/metrics"})

    with pytest.raises(ServerMetricsError, match=r"redirects to https://127\.0\.0\.1:8000/metrics; "
                                                 r"pass that URL with --url"):
        await scrape(mock(to_tls))


async def test_only_an_https_scrape_loads_the_ca_bundle(monkeypatch):
    """Loading certifi's CA bundle into an SSL context costs 1.4 MB of RSS for the session;
    a plain-http scrape never uses TLS and skips it, an https one verifies as always."""
    import ssl
    loads: list = []
    real = ssl.SSLContext.load_verify_locations

    def counting(self, *a, **k):
        loads.append(a or k)
        return real(self, *a, **k)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counting)
    for url, want in (("http://127.0.0.1:8000", 0), ("https://127.0.0.1:8443", 1)):
        loads.clear()
        probe = ServerMetricsProbe(url)
        await probe.open()
        await probe.close()
        assert len(loads) == want, (url, loads)


async def test_hub_turns_a_dead_server_into_an_error_sample():
    def handler(req):
        raise httpx.ConnectError("[Errno 111] Connection refused", request=req)

    hub = Hub([mock(handler)], deadline=1.0)
    caps = await hub.start()
    assert caps["server:127.0.0.1:8000"].available  # it may come up later
    snap = await hub.next()
    s = snap.samples["server:127.0.0.1:8000"]
    assert s.status is Status.ERROR and "is the server running?" in s.reason


# ---- a real socket ---------------------------------------------------------------------------

class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's naming)
        if self.path != "/metrics":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(VLLM)))
        self.end_headers()
        self.wfile.write(VLLM)

    def log_message(self, *args):
        pass


@pytest.fixture
def real_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        t.join(5)


async def test_real_http_server(real_server: int):
    p = ServerMetricsProbe(f"127.0.0.1:{real_server}")
    s = await scrape(p)
    assert s.status is Status.OK
    assert s.meta["dialect"] == "vllm" and s.meta["scrape_bytes"] == len(VLLM)
    assert s.find("server.requests_running")[0].value == 8.0


async def test_real_socket_refused():
    # bind a port, close it: nothing listens there now
    import socket
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    p = ServerMetricsProbe(f"127.0.0.1:{port}")
    with pytest.raises(ServerMetricsError,
                       match=f"connection refused at http://127.0.0.1:{port}/metrics"):
        await scrape(p)
