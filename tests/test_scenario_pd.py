"""The disaggregated P/D demo (par-pd-slow-transfer): the vLLM decode instance's page
carries vLLM's NIXL families, its command line its kv_role, and doctor names the KV
transfer as the cause of the TTFT breach (PAR-004 before DEC-001)."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from helpers.inproc import run_main
from infertop.cli.demo_server import DemoServer
from infertop.model import Reading, has_value
from infertop.probes.server.metrics import ServerMetricsProbe
from infertop.probes.server.settings import server_settings
from infertop.probes.sources.demo import DemoSource

NAME = "par-pd-slow-transfer"


def val(r: Reading) -> float:
    assert has_value(r), r
    return r.value


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
    assert xfer and val(xfer[0]) > 100          # transfers observed (~4/s for 40 s)
    # each transfer moves a 1,000-token prompt's KV at 128 KiB per token (~128 MiB)
    assert moved and 0.5e8 < val(moved[0]) / val(xfer[0]) < 3e8


def test_the_decode_role_comes_from_the_kv_transfer_config_on_its_command_line():
    src = DemoSource(NAME, dialect="vllm")
    snap = src.next_sync()
    assert snap is not None
    info = [r for s in snap.samples.values() for r in s.readings if r.key == "process.info"
            and r.label("role") == "api_server"]
    argv = info[0].text
    assert argv is not None
    settings = server_settings("vllm", argv.split())
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
    # DEC-001's remedy names the transfer (its cause), not its generic prefill remedy
    assert "chunked prefill or more capacity will not help" in out
    assert "enable chunked prefill and prefix caching, or cap" not in out


async def test_demo_server_serves_both_sides_of_the_pair_on_their_own_ports():
    """The prefill instance (another node) has its own page: vLLM's names, the NIXL
    families of its connector (no transfer observed on the sender), first tokens of its
    own (queue + prefill, max_tokens 1); the decode page counts its prompt tokens as
    external_kv_transfer.  Both parsed by the live probe, as two --url would be."""
    server = DemoServer(NAME, port=0, dialect="vllm", autoplay=False, seed=5,
                        prefill_port=0)
    await server.start()
    try:
        assert server.prefill_url and server.prefill_port != server.port
        for _ in range(40):
            await server.tick()
        async with httpx.AsyncClient() as c:
            dec = (await c.get(server.url + "/metrics")).text
            pre = (await c.get(server.prefill_url + "/metrics")).text
        got = {}
        for name, url in (("decode", server.url), ("prefill", server.prefill_url)):
            probe = ServerMetricsProbe(url)
            assert (await probe.open()).available
            got[name] = (await probe.collect()).readings
            await probe.close()
    finally:
        await server.stop()
    assert "vllm:time_to_first_token_seconds_bucket" in pre
    assert "vllm:nixl_xfer_time_seconds_bucket" in pre and "vllm:nixl_xfer_time_seconds_bucket" in dec

    def one(rs, key, **lab):
        return [r for r in rs if r.key == key and all(r.label(k) == v for k, v in lab.items())]
    [p_ttft] = one(got["prefill"], "latency.ttft_seconds")
    [p_xfer] = one(got["prefill"], "latency.kv_transfer_seconds")
    [d_xfer] = one(got["decode"], "latency.kv_transfer_seconds")
    assert p_ttft.value > 100 and p_xfer.value == 0 and d_xfer.value > 100
    [moved] = one(got["decode"], "kv.prompt_tokens_by_source_total", source="external_kv_transfer")
    [computed] = one(got["decode"], "kv.prompt_tokens_by_source_total", source="local_compute")
    assert moved.value > 50_000 and computed.value < 0.05 * moved.value


def test_the_pair_shows_in_the_parallelism_pane_and_in_snapshot_json():
    """The demo source gives both instances with their roles; the derived TTFT split
    names every part: the prefill instance's TTFT, the transfer, the decode side."""
    src = DemoSource(NAME, dialect="vllm", loop=False)
    from infertop.pipeline import Pipeline
    pipe = Pipeline(None, window=60.0)
    for _ in range(90):
        snap = src.next_sync()
        assert snap is not None
        frame = pipe.feed(snap)
    roles = {r.label("instance"): r.text for r in frame.all_readings()
             if r.key == "server.disagg_role"}
    assert roles == {"demo": "decode", "demo-prefill": "prefill"}
    split = {r.label("part"): r for r in frame.derived if r.key == "pd.ttft_split_seconds"}
    assert set(split) == {"prefill", "transfer", "decode", "total"}
    assert all(r.ok for r in split.values())
    assert val(split["transfer"]) > 0.3 and val(split["prefill"]) < 0.1
    assert abs(val(split["total"]) - sum(val(split[p]) for p in
                                         ("prefill", "transfer", "decode"))) < 1e-9
    assert split["transfer"].label("prefill") == "demo-prefill"


def test_snapshot_json_carries_the_roles_and_the_ttft_split():
    import json
    # main() in this process: the JSON is the point (tests/test_cli.py runs snapshot as a
    # program)
    r = run_main("snapshot", "--json", "--source", f"demo:{NAME}", "--window", "70")
    assert r.returncode == 0, r.stderr
    par = json.loads(r.stdout)["layers"]["parallelism"]["readings"]
    roles = {x["labels"]["instance"]: x["text"] for x in par if x["key"] == "server.disagg_role"}
    assert roles == {"demo": "decode", "demo-prefill": "prefill"}
    split = {x["labels"]["part"]: x for x in par if x["key"] == "pd.ttft_split_seconds"}
    assert set(split) == {"prefill", "transfer", "decode", "total"}
    assert all(x["status"] == "ok" and x["value"] > 0 for x in split.values())
