"""The disaggregated P/D demo (par-pd-slow-transfer): the vLLM decode instance's page
carries vLLM's NIXL families, its command line its kv_role, and doctor names the KV
transfer as the cause of the TTFT breach (PAR-004 before DEC-001)."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from infertop.cli.demo_server import DemoServer
from infertop.probes.server.metrics import ServerMetricsProbe
from infertop.probes.server.settings import server_settings
from infertop.probes.sources.demo import DemoSource

NAME = "par-pd-slow-transfer"


async def test_demo_server_serves_the_nixl_families_the_vllm_dialect_reads():
    server = DemoServer(NAME, port=0, dialect="vllm", autoplay=False, seed=5)
    await server.start()
    try:
        for _ in range(40):            # into the TCP-fallback phase (starts at 30 s)
            await server.tick()
        async with httpx.AsyncClient(base_url=server.url) as c:
            page = (await c.get("/metrics")).text
        for family in ("vllm:nixl_xfer_time_seconds_bucket", "vllm:nixl_bytes_transferred_sum",
                       "vllm:nixl_num_failed_transfers_total"):
            assert family in page, family
        probe = ServerMetricsProbe(server.url)
        assert (await probe.open()).available
        got = (await probe.collect()).readings
        await probe.close()
    finally:
        await server.stop()
    xfer = [r for r in got if r.key == "latency.kv_transfer_seconds"]
    moved = [r for r in got if r.key == "kv.transfer_bytes_total"]
    assert xfer and xfer[0].value > 100          # transfers observed (~4/s for 40 s)
    # each transfer moves a 1,000-token prompt's KV at 128 KiB per token (~128 MiB)
    assert moved and 0.5e8 < moved[0].value / xfer[0].value < 3e8


def test_the_decode_role_comes_from_the_kv_transfer_config_on_its_command_line():
    src = DemoSource(NAME, dialect="vllm")
    snap = src.next_sync()
    info = [r for s in snap.samples.values() for r in s.readings if r.key == "process.info"
            and r.label("role") == "api_server"]
    settings = server_settings("vllm", info[0].text.split())
    assert settings["disagg_role"] == "decode"
    assert "NixlConnector" in settings["kv_transfer_config"]


@pytest.mark.slow   # doctor over 90 s of the scenario, as a user runs it
def test_doctor_names_the_transfer_as_the_cause_of_the_ttft_breach():
    r = subprocess.run([sys.executable, "-m", "infertop", "doctor", "--source", f"demo:{NAME}",
                        "--duration", "90"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr      # warnings only
    out = r.stdout
    par = out.index("PARALLELISM")
    assert "[WARN] PAR-004 KV transfer is" in out[par:]
    assert "DEC-001 TTFT p99" in out and "caused by PAR-004" in out
    # the RDMA baseline (first 30 s) raised nothing: both began in the TCP phase
    assert "since    00:00:3" in out[par:out.index("DECODING")]
    assert "put the pair on a fast path" in out
