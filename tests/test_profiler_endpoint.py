"""The server's profiler endpoints: httpx.MockTransport and one real local http.server."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
from collections.abc import Callable

import httpx

from infertop.probes.capture import profiler_endpoint as pe


def _mock(handler):
    seen: list[tuple[str, str, bytes]] = []

    def h(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.path, request.content))
        return handler(request)

    return httpx.MockTransport(h), seen


def _stop_at_first_tick() -> tuple[asyncio.Event, Callable[[float], None]]:
    cancel = asyncio.Event()
    return cancel, (lambda f: cancel.set())


VLLM_CMD = ["vllm", "serve", "m", "--profiler-config",
            '{"profiler": "torch", "torch_profiler_dir": "/data/traces"}']


async def test_vllm_start_then_stop():
    transport, seen = _mock(lambda r: httpx.Response(200))
    cancel, tick = _stop_at_first_tick()
    res = await pe.start_stop_profile("http://srv:8000/", "vllm", 30, transport=transport,
                                      cmdline=VLLM_CMD, cancel=cancel, progress=tick)
    assert [(m, p) for m, p, _ in seen] == [("POST", "/start_profile"), ("POST", "/stop_profile")]
    assert res.ok and res.started and res.stopped and res.cancelled
    assert res.trace_location == "/data/traces" and "/data/traces" in res.message


async def test_vllm_404_means_no_profiler_config():
    transport, seen = _mock(lambda r: httpx.Response(404, json={"detail": "Not Found"}))
    res = await pe.start_stop_profile("http://srv:8000", "vllm", 5, transport=transport)
    assert not res.ok and res.status_code == 404
    assert res.message == ("server not started with a profiler config "
                           "(vLLM: --profiler-config / VLLM_TORCH_PROFILER_DIR)")
    assert "--profiler-config" in res.fix
    assert len(seen) == 1  # no stop after a refused start


async def test_sglang_sends_step_count_and_stops_by_itself():
    transport, seen = _mock(lambda r: httpx.Response(200, text="Start profiling.\n"))
    res = await pe.start_stop_profile("http://srv:30000", "sglang", 10, transport=transport,
                                      num_steps=8, output_dir="/srv/prof")
    assert len(seen) == 1 and seen[0][1] == "/start_profile"
    assert json.loads(seen[0][2]) == {"num_steps": 8, "output_dir": "/srv/prof"}
    assert res.ok and res.started and not res.stopped
    assert "next 8 forward steps" in res.message and res.trace_location == "/srv/prof"


async def test_sglang_already_running_and_unreachable_and_stop_failure():
    transport, _ = _mock(lambda r: httpx.Response(
        200, text="Profiling is already in progress. Call /stop_profile first."))
    res = await pe.start_stop_profile("http://srv:30000", "sglang", 10, transport=transport)
    assert not res.ok and "already in progress" in res.message and "stop_profile" in res.fix

    def refuse(r):
        raise httpx.ConnectError("Connection refused", request=r)

    transport, _ = _mock(refuse)
    res = await pe.start_stop_profile("http://srv:8000", "vllm", 5, transport=transport)
    assert not res.ok and res.message.startswith("cannot reach http://srv:8000/start_profile")

    transport, _ = _mock(lambda r: httpx.Response(200 if r.url.path == "/start_profile" else 500,
                                                  text="boom"))
    cancel, tick = _stop_at_first_tick()
    res = await pe.start_stop_profile("http://srv:8000", "vllm", 5, transport=transport,
                                      cancel=cancel, progress=tick)
    assert res.started and not res.stopped and "500" in res.message
    assert res.fix == "stop it by hand: curl -X POST http://srv:8000/stop_profile"
    res = await pe.start_stop_profile("http://srv:8000", "llamacpp", 5, transport=transport)
    assert not res.ok and "no profiler endpoint" in res.message


def test_trace_dir_hint_and_confirm_text():
    assert pe.trace_dir_hint("vllm", ["vllm", "serve", "--profiler-config.torch_profiler_dir", "/t"]) == "/t"
    assert pe.trace_dir_hint("vllm", ["vllm", "serve", "--profiler-config.torch_profiler_dir=/u"]) == "/u"
    cuda = pe.trace_dir_hint("vllm", ["--profiler-config", '{"profiler": "cuda"}'])
    assert cuda is not None and "nsys" in cuda
    assert pe.trace_dir_hint("vllm", ["vllm", "serve", "m"]) is None
    sglang = pe.trace_dir_hint("sglang", [])
    assert sglang is not None and "SGLANG_TORCH_PROFILER_DIR" in sglang
    assert "12 s" in pe.confirm_text("vllm", 12) and "next 32 forward steps" in pe.confirm_text("sglang", 5)


async def test_real_local_http_server():
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's naming)
            hits.append(self.path)
            code = 200 if self.path in ("/start_profile", "/stop_profile") else 404
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        cancel, tick = _stop_at_first_tick()
        res = await pe.start_stop_profile(f"http://127.0.0.1:{srv.server_port}", "vllm", 5,
                                          cancel=cancel, progress=tick)
    finally:
        srv.shutdown()
        srv.server_close()
    assert hits == ["/start_profile", "/stop_profile"]
    assert res.ok and res.stopped and res.status_code == 200
