"""ServerMetricsProbe against scripted answers on a real socket (tests/helpers/raw_http.py)."""

from __future__ import annotations

import asyncio
import http.server
import re
import threading
import time
from pathlib import Path

import pytest

from helpers.faulty_server import closed_port
from helpers.raw_http import RawServer, Resp, self_signed
from infertop.model import Status
from infertop.probes.server.metrics import (
    ServerMetricsError,
    ServerMetricsProbe,
    normalize_url,
)
from infertop.probes.sources.hub import Hub

METRICS = Path(__file__).parent / "fixtures" / "metrics"
VLLM = (METRICS / "vllm-0.32-busy.prom").read_bytes()
LLAMA = (METRICS / "llamacpp-busy.prom").read_bytes()
URL = "http://127.0.0.1:8000/metrics"
PLAIN = {"content-type": "text/plain; version=0.0.4; charset=utf-8"}


@pytest.fixture
async def server():
    async with RawServer() as srv:
        yield srv


def probe_of(srv: RawServer, **kw) -> ServerMetricsProbe:
    return ServerMetricsProbe(f"127.0.0.1:{srv.port}", **kw)


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


async def test_ok_vllm_fixture_and_request_shape(server):
    server.handler = lambda req: Resp(200, VLLM, PLAIN)
    s = await scrape(probe_of(server))
    inst = f"127.0.0.1:{server.port}"
    assert s.status is Status.OK and s.source == f"server:{inst}"
    assert s.meta.to_dict() == {"dialect": "vllm", "model": "tiny-llama", "engines": ["0"],
                                "url": server.metrics_url, "scrape_bytes": len(VLLM)}
    assert s.find("server.generation_tokens_total")[0].value == 61167.0
    assert s.find("server.requests_running")[0].label("instance") == inst
    [req] = server.requests
    assert (req.method, req.path, req.headers["host"]) == ("GET", "/metrics", inst)
    assert req.headers["accept"] == "text/plain"  # never OpenMetrics (breaks vllm: names)
    assert req.headers["accept-encoding"] == "gzip, deflate"
    assert req.headers["user-agent"].startswith("infertop/")
    assert s.duration > 0


async def test_ok_llamacpp_with_start_time_header(server):
    server.handler = lambda req: Resp(200, LLAMA, {**PLAIN, "Process-Start-Time-Unix": "1795000000"})
    s = await scrape(probe_of(server))
    assert s.meta.dialect == "llamacpp"
    assert s.find("server.process_start_seconds")[0].value == 1795000000.0
    assert s.find("server.requests_waiting")[0].value == 4.0


async def test_llamacpp_without_metrics_flag_says_the_fix(server):
    body = (b'{"error":{"code":501,"message":"This server does not support metrics endpoint. '
            b'Start it with `--metrics`","type":"not_supported_error"}}')
    server.handler = lambda req: Resp(501, body)
    with pytest.raises(ServerMetricsError) as e:
        await scrape(probe_of(server))
    msg = str(e.value)
    assert msg.startswith(f"HTTP 501 from {server.metrics_url}: ")
    assert "This server does not support metrics endpoint" in msg
    assert msg.endswith("start llama-server with --metrics")


async def test_http_500_includes_status_and_the_start_of_the_body(server):
    body = b"Internal Server Error: " + b"x" * 500
    server.handler = lambda req: Resp(500, body)
    with pytest.raises(ServerMetricsError) as e:
        await scrape(probe_of(server))
    msg = str(e.value)
    assert "HTTP 500" in msg and "Internal Server Error: xxx" in msg
    assert "x" * 121 not in msg  # body cut at 120 characters


async def test_404_points_at_port_and_flags(server):
    server.handler = lambda req: Resp(404, b'{"detail":"Not Found"}')
    with pytest.raises(ServerMetricsError, match="HTTP 404 .*enable-metrics"):
        await scrape(probe_of(server))


async def test_garbage_body_is_rejected_clearly(server):
    html = b"<!DOCTYPE html><html><body>Welcome to nginx!</body></html>"
    server.handler = lambda req: Resp(200, html)
    with pytest.raises(ServerMetricsError, match="did not return Prometheus metrics: line 1.*HTML"):
        await scrape(probe_of(server))
    server.handler = lambda req: Resp(200, b'{"status": "ok"}')
    with pytest.raises(ServerMetricsError, match="JSON"):
        await scrape(probe_of(server))


async def test_an_answer_that_is_not_http_says_so(server):
    server.handler = lambda req: Resp(raw=b"SSH-2.0-OpenSSH_9.6\r\n", close=True)
    with pytest.raises(ServerMetricsError, match=r"/metrics: not an HTTP answer \(it began 'SSH-2.0-OpenSSH_9.6\\r\\n'\)"):
        await scrape(probe_of(server))


async def test_empty_body_is_an_error_not_silent_zeros(server):
    server.handler = lambda req: Resp(200, b"")
    with pytest.raises(ServerMetricsError, match="empty response"):
        await scrape(probe_of(server))


async def test_oversize_body_stops_at_the_cap(server):
    sent = []

    def chunks():
        for _ in range(200):
            sent.append(1)
            yield b"# " + b"x" * 65534 + b"\n"

    server.handler = lambda req: Resp(200, chunks())
    with pytest.raises(ServerMetricsError, match="response larger than 1 MB"):
        await scrape(probe_of(server, max_bytes=1_000_000))
    await asyncio.sleep(0.2)   # let the server find the connection closed
    assert len(sent) < 200  # stopped reading, did not buffer the whole body (13 MB)


async def test_default_cap_message_says_8_mb(server):
    big = b"#" * 8_000_001
    server.handler = lambda req: Resp(200, big)
    with pytest.raises(ServerMetricsError, match="response larger than 8 MB"):
        await scrape(probe_of(server))


async def test_connection_refused():
    port = closed_port()
    with pytest.raises(ServerMetricsError) as e:
        await scrape(ServerMetricsProbe(f"127.0.0.1:{port}"))
    url = f"http://127.0.0.1:{port}/metrics"
    assert str(e.value) == f"connection refused at {url} — is the server running?"


async def test_timeout(server):
    server.handler = lambda req: Resp(200, VLLM, delay=5)
    started = time.monotonic()
    with pytest.raises(ServerMetricsError, match=r"no answer from .* within 0.3 s"):
        await scrape(probe_of(server, timeout=0.3))
    assert time.monotonic() - started < 3


async def test_a_connect_that_never_completes_times_out(monkeypatch):
    """An address that swallows SYNs (a firewall's DROP): the connect's own timeout."""
    async def never(*a, **k):
        await asyncio.sleep(3600)

    monkeypatch.setattr(asyncio, "open_connection", never)
    started = time.monotonic()
    with pytest.raises(ServerMetricsError) as e:
        await scrape(ServerMetricsProbe("10.0.0.1:8000", timeout=0.3))
    assert str(e.value) == ("cannot connect to http://10.0.0.1:8000/metrics: no connection "
                            "within 0.3 s (a wrong address, or a firewall dropping packets?)")
    assert time.monotonic() - started < 3


async def test_same_host_redirect_is_followed_other_host_is_not(server):
    def same(req):
        if req.path == "/metrics":
            return Resp(307, headers={"location": "/metrics/"})
        return Resp(200, LLAMA)

    server.handler = same
    s = await scrape(probe_of(server))
    assert s.meta.url == f"{server.metrics_url}/"
    server.handler = lambda req: Resp(302, headers={"location": "http://evil.example/metrics"})
    with pytest.raises(ServerMetricsError, match="redirects to another host"):
        await scrape(probe_of(server))


async def test_a_redirect_from_http_to_https_is_refused_with_the_url_to_pass(server):
    """The client of an http URL loads no certificates, so it must not follow a redirect
    into TLS; the message names the https URL to pass instead."""
    target = f"https://127.0.0.1:{server.port}/metrics"
    server.handler = lambda req: Resp(301, headers={"location": target})
    with pytest.raises(ServerMetricsError, match=f"redirects to {re.escape(target)}; "
                                                 r"pass that URL with --url"):
        await scrape(probe_of(server))


async def test_only_an_https_scrape_loads_the_ca_bundle(monkeypatch):
    """Loading the CA bundle into an SSL context costs ~1.4 MB of RSS for the session; a
    plain-http scrape never uses TLS and skips it, an https one verifies as always (once,
    on its first connection, kept for the next ones)."""
    import ssl
    loads: list = []
    real = ssl.SSLContext.load_default_certs

    def counting(self, *a, **k):
        loads.append(a or k)
        return real(self, *a, **k)

    monkeypatch.setattr(ssl.SSLContext, "load_default_certs", counting)
    port = closed_port()
    for url, want in ((f"http://127.0.0.1:{port}", 0), (f"https://127.0.0.1:{port}", 1)):
        loads.clear()
        probe = ServerMetricsProbe(url)
        await probe.open()
        for _ in range(2):
            with pytest.raises(ServerMetricsError, match="connection refused"):
                await probe.collect()
        await probe.close()
        assert len(loads) == want, (url, loads)


async def test_https_is_verified_against_the_trusted_certificates(tmp_path, monkeypatch):
    """An https scrape checks the server's certificate: a self-signed one is refused
    with the reason, and accepted once it is trusted (SSL_CERT_FILE, as OpenSSL reads)."""
    made = self_signed(tmp_path)
    if made is None:
        pytest.skip("needs the openssl program (Debian: apt-get install openssl)")
    cert, context = made
    async with RawServer(lambda req: Resp(200, VLLM, PLAIN), tls=context) as srv:
        with pytest.raises(ServerMetricsError, match="certificate verify failed"):
            await scrape(ServerMetricsProbe(srv.url))
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        s = await scrape(ServerMetricsProbe(srv.url))
    assert s.status is Status.OK and s.meta.url == srv.metrics_url
    assert s.meta.dialect == "vllm"


async def test_hub_turns_a_dead_server_into_an_error_sample():
    port = closed_port()
    hub = Hub([ServerMetricsProbe(f"127.0.0.1:{port}")], deadline=1.0)
    caps = await hub.start()
    assert caps[f"server:127.0.0.1:{port}"].available  # it may come up later
    snap = await hub.next()
    s = snap.samples[f"server:127.0.0.1:{port}"]
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
    assert s.meta.dialect == "vllm" and s.meta.scrape_bytes == len(VLLM)
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
