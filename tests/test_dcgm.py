"""DCGM exporter names -> NVML's reading keys, and Prometheus vectors -> the same readings
a direct scrape gives (the dialect tables read both)."""

from __future__ import annotations

import math

import pytest

from helpers.snapkit import must
from infertop.dcgm import families_from_series, gpu_readings
from infertop.demo.exposition import render_dcgm
from infertop.dialects import readings_from_exposition, readings_from_families
from infertop.model import Status
from infertop.probes.sources.demo import DemoSource
from infertop.promtext import parse

BASE = {"gpu": "0", "UUID": "GPU-abc", "device": "nvidia0", "modelName": "NVIDIA H100",
        "pci_bus_id": "00000000:18:00.0", "instance": "n1:9400", "job": "dcgm"}


def s(name, value, **labels):
    return ({**BASE, "__name__": name, **labels}, value)


def by_key(readings):
    return {(r.key, r.label("gpu")): r for r in readings}


def test_units_become_infertop_units():
    rs, meta = gpu_readings([
        s("DCGM_FI_DEV_GPU_UTIL", 87.0), s("DCGM_FI_DEV_FB_USED", 1024.0),
        s("DCGM_FI_DEV_FB_FREE", 3072.0), s("DCGM_FI_DEV_POWER_USAGE", 412.5),
        s("DCGM_FI_DEV_GPU_TEMP", 61.0), s("DCGM_FI_DEV_SM_CLOCK", 1980.0),
        s("DCGM_FI_PROF_SM_ACTIVE", 0.71), s("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0.42),
        s("DCGM_FI_PROF_PCIE_TX_BYTES", 2.5e9), s("DCGM_FI_DEV_XID_ERRORS", 79.0,
                                                  err_code="79", err_msg="fell off the bus"),
        s("DCGM_FI_DEV_GPU_UTIL", 10.0, gpu="1", Hostname="x"),
    ])
    r = by_key(rs)
    assert r["gpu.util_ratio", "0"].value == pytest.approx(0.87)
    assert r["gpu.mem_used_bytes", "0"].value == 1024 * 2**20
    assert r["gpu.mem_total_bytes", "0"].value == 4096 * 2**20
    assert r["gpu.power_watts", "0"].value == 412.5
    assert r["gpu.sm_clock_hz", "0"].value == 1.98e9
    assert r["gpu.sm_active_ratio", "0"].value == 0.71
    # already a per-second gauge: taken as is, never rated
    assert r["gpu.pcie_tx_bytes_per_second", "0"].value == 2.5e9
    assert r["gpu.xid_last", "0"].value == 79.0
    assert r["gpu.info", "0"].text == "NVIDIA H100"
    assert r["gpu.info", "0"].label("uuid") == "GPU-abc"
    assert r["gpu.util_ratio", "1"].value == pytest.approx(0.10)
    assert meta.hostname == "x"


def test_a_profiling_field_not_collected_is_nodata_never_zero():
    rs, _ = gpu_readings([s("DCGM_FI_DEV_GPU_UTIL", 50.0)])
    r = by_key(rs)
    for key in ("gpu.sm_active_ratio", "gpu.sm_occupancy_ratio", "gpu.tensor_active_ratio",
                "gpu.dram_bw_util_ratio"):
        assert r[key, "0"].value is None and r[key, "0"].status is Status.NODATA
        assert "not collected" in r[key, "0"].reason
    assert r["gpu.xid_last", "0"].status is Status.NODATA   # absent: unknown, not 0
    assert ("gpu.mem_total_bytes", "0") not in r           # FB_FREE missing: no total


def test_blank_sentinel_is_dropped_and_both_hostname_spellings_work():
    rs, meta = gpu_readings([s("DCGM_FI_DEV_POWER_USAGE", 9.223372036854775e18,
                               hostname="new-style")])
    r = by_key(rs)
    assert r["gpu.power_watts", "0"].value is None
    assert "blank" in r["gpu.power_watts", "0"].reason
    assert meta.hostname == "new-style"


def test_mig_instances_are_separate_gpus():
    rs, _ = gpu_readings([s("DCGM_FI_DEV_GPU_UTIL", 10.0, GPU_I_ID="1"),
                          s("DCGM_FI_DEV_GPU_UTIL", 20.0, GPU_I_ID="2")])
    assert {r.label("gpu") for r in rs if r.key == "gpu.util_ratio"} == {"0.1", "0.2"}


def _as_series(text: str, instance: str):
    """What Prometheus's instant query returns for a scraped page: every sample with its
    name in __name__, plus the target's instance/job labels (no TYPE, no HELP)."""
    out = []
    for fam in parse(text):
        for smp in fam.samples:
            out.append(({**smp.labels, "__name__": smp.name, "instance": instance,
                         "job": "server"}, smp.value))
    return out


def _comparable(readings):
    return sorted((r.key, r.labels, None if r.value is None else round(r.value, 9), r.text,
                   r.buckets, r.hist_sum) for r in readings if r.key != "server.families")


@pytest.mark.parametrize("page", ["vllm-0.32-busy.prom", "vllm-0.32-idle.prom",
                                  "llamacpp-busy.prom"])
def test_a_page_through_prometheus_maps_like_the_direct_scrape(fixtures_dir, page):
    text = (fixtures_dir / "metrics" / page).read_text()
    direct = readings_from_exposition(text, "n1:8000")
    via = readings_from_families(families_from_series(_as_series(text, "n1:8000")), "n1:8000")
    assert via.dialect == direct.dialect
    assert _comparable(via.readings) == _comparable(direct.readings)


@pytest.mark.parametrize("dialect", ["sglang", "tgi"])
def test_demo_pages_through_prometheus_map_like_the_direct_scrape(dialect):
    from infertop.demo.exposition import render
    src = DemoSource("mem-kv-pressure", dialect=dialect, seed=3)
    for _ in range(30):
        frame = must(src.step_frame(), "a demo frame")
    text = render(frame, dialect)
    direct = readings_from_exposition(text, "n1:8000")
    via = readings_from_families(families_from_series(_as_series(text, "n1:8000")), "n1:8000")
    assert _comparable(via.readings) == _comparable(direct.readings)


def test_demo_dcgm_page_reads_back_as_the_demo_gpus():
    src = DemoSource("hw-throttling", seed=2)
    for _ in range(40):
        frame = must(src.step_frame(), "a demo frame")
    text = render_dcgm(frame, "node-07")
    rs, meta = gpu_readings(_as_series(text, "n7:9400"))
    r = by_key(rs)
    g = frame.gpus[0]
    assert meta.hostname == "node-07"
    assert r["gpu.util_ratio", "0"].value == pytest.approx(g.values["util"], abs=1e-4)
    assert r["gpu.sm_clock_hz", "0"].value == pytest.approx(g.values["sm_clock"], rel=1e-3)
    assert r["gpu.mem_total_bytes", "0"].value == pytest.approx(g.values["mem_total"], rel=1e-3)
    assert math.isclose(r["gpu.sm_active_ratio", "0"].value, g.values["sm_active"], abs_tol=1e-5)
