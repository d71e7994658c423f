"""NvmlProbe against the fake pynvml (tests/helpers/fake_pynvml.py): no GPU needed, no sleeping.

A ManualClock drives both the fake (GPM sample times, byte counters) and the probe's GPM
spacing, so "two samples >= 0.1 s apart" is a clock advance, not a wait.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import subprocess
import sys
import threading
from pathlib import Path

import pynvml as real_pynvml
import pytest

from helpers.fake_pynvml import FakeGPU, FakeNVML, GiB, ManualClock, h100_pair
from helpers.nvml_probe import opened, reading
from helpers.snapkit import meta_of
from infertop.keys import SPECS
from infertop.meta import NvmlMeta
from infertop.model import Status
from infertop.probes.base import StillRunning
from infertop.probes.nvml.decode import decode_throttle, is_throttled, topology_name
from infertop.probes.nvml.gpu import GPU_KEYS
from infertop.probes.nvml.probe import LOST_REASON, NvmlProbe
from infertop.probes.sources.hub import Hub

ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------ helpers
async def ticks(probe: NvmlProbe, clock: ManualClock, n: int, dt: float = 1.0):
    s = None
    for _ in range(n):
        s = await probe.collect()
        clock.advance(dt)
    return s


# ------------------------------------------------------------------ the fake itself
def test_fake_functions_match_real_pynvml_signatures():
    fake = FakeNVML()
    names = [n for n in dir(fake) if n.startswith("nvml")]
    assert len(names) > 30
    for n in names:
        real = getattr(real_pynvml, n)   # AttributeError: the fake invented a function
        want = list(inspect.signature(real).parameters)
        got = list(inspect.signature(getattr(fake.module, n)).parameters)
        assert got == want, n


def test_fake_shares_real_error_classes_and_refuses_unknown_calls():
    mod = FakeNVML().module
    assert mod.NVMLError_NotSupported is real_pynvml.NVMLError_NotSupported
    assert mod.NVMLError_GpuIsLost is real_pynvml.NVMLError_GpuIsLost
    assert mod.c_nvmlGpmMetricsGet_t is real_pynvml.c_nvmlGpmMetricsGet_t
    with pytest.raises(real_pynvml.NVMLError_Uninitialized):
        mod.nvmlDeviceGetCount()             # before nvmlInit, as the real module
    with pytest.raises(AttributeError, match="does not implement"):
        _ = mod.nvmlDeviceGetBAR1MemoryInfo
    mod.nvmlInit()
    with pytest.raises(real_pynvml.NVMLError_Timeout):
        mod.nvmlEventSetWait_v2(mod.nvmlEventSetCreate(), 0)


# ------------------------------------------------------------------ healthy H100 pair
async def test_healthy_h100_pair_with_gpm():
    clock = ManualClock()
    fake = h100_pair(clock)
    probe = await opened(fake)
    assert {"gpm", "nvlink", "xid"} <= probe.capability.features
    assert "mig" not in probe.capability.features

    first = await probe.collect()
    # GPM and rates need a second sample: NODATA with the reason, never a zero
    for k in ("gpu.sm_active_ratio", "gpu.pcie_tx_bytes_per_second"):
        r = reading(first, k, gpu=0)
        assert r.status is Status.NODATA and r.value is None and "two samples" in r.reason

    clock.advance(1.0)
    s = await probe.collect()
    t = clock()
    assert s.status is Status.OK
    assert meta_of(s, NvmlMeta).driver == "580.95.05" and meta_of(s, NvmlMeta).gpm == (0, 1)
    assert [g.name for g in meta_of(s, NvmlMeta).gpus] == ["NVIDIA H100 80GB HBM3"] * 2
    for gpu in (0, 1):
        info = reading(s, "gpu.info", gpu=gpu)
        assert info.text == "NVIDIA H100 80GB HBM3"
        assert info.label("uuid") == fake.gpus[gpu].uuid
        assert info.label("pci_bus_id") == fake.gpus[gpu].pci_bus_id
        assert reading(s, "gpu.lost", gpu=gpu).value == 0
        assert reading(s, "gpu.util_ratio", gpu=gpu).value == pytest.approx(0.87)
        assert reading(s, "gpu.mem_util_ratio", gpu=gpu).value == pytest.approx(0.45)
        assert reading(s, "gpu.mem_used_bytes", gpu=gpu).value == 60 * GiB   # v2: no reserved
        assert reading(s, "gpu.mem_total_bytes", gpu=gpu).value == 85520809984
        assert reading(s, "gpu.power_watts", gpu=gpu).value == pytest.approx(512.0)
        assert reading(s, "gpu.power_limit_watts", gpu=gpu).value == pytest.approx(700.0)
        assert reading(s, "gpu.temp_celsius", gpu=gpu).value == 61
        assert reading(s, "gpu.sm_clock_hz", gpu=gpu).value == 1980e6
        assert reading(s, "gpu.mem_clock_max_hz", gpu=gpu).value == 2619e6
        assert reading(s, "gpu.pcie_link_gen", gpu=gpu).value == 5
        assert reading(s, "gpu.pcie_link_width", gpu=gpu).value == 16
        assert reading(s, "gpu.mig_enabled", gpu=gpu).value == 0
        assert reading(s, "gpu.nvlink_links_active", gpu=gpu).value == 18
        assert reading(s, "gpu.ecc_uncorrected_total", gpu=gpu).value == 0
        # GPM: percent -> 0..1, and the values are the fake's functions at the sample time
        assert reading(s, "gpu.sm_active_ratio", gpu=gpu).value == \
            pytest.approx((60 + 20 * math.sin(t)) / 100)
        assert reading(s, "gpu.sm_occupancy_ratio", gpu=gpu).value == \
            pytest.approx((30 + 10 * math.cos(t)) / 100)
        assert reading(s, "gpu.tensor_active_ratio", gpu=gpu).value == \
            pytest.approx((40 + 15 * math.sin(t / 2)) / 100)
        assert reading(s, "gpu.dram_bw_util_ratio", gpu=gpu).value == \
            pytest.approx((55 + 5 * math.cos(t / 3)) / 100)
        # GPM link rates MiB/s -> bytes/s
        assert reading(s, "gpu.pcie_tx_bytes_per_second", gpu=gpu).value == pytest.approx(2e9)
        assert reading(s, "gpu.pcie_rx_bytes_per_second", gpu=gpu).value == pytest.approx(1e9)
        assert reading(s, "gpu.nvlink_tx_bytes_per_second", gpu=gpu).value == \
            pytest.approx(100e9)
    # the values move with time: a later pair gives other numbers
    clock.advance(1.0)
    s3 = await probe.collect()
    assert reading(s3, "gpu.sm_active_ratio", gpu=0).value != \
        reading(s, "gpu.sm_active_ratio", gpu=0).value
    # every reading uses a declared key with its declared unit and kind
    for r in s.readings:
        assert r.unit == SPECS[r.key].unit and r.kind is SPECS[r.key].kind, r.key
    await probe.close()
    assert fake.refcount == 0 and not fake._samples   # GPM buffers freed, NVML shut down


async def test_gpm_buffers_are_allocated_once_and_pairs_respect_min_interval():
    clock = ManualClock()
    fake = h100_pair(clock)
    probe = await opened(fake, gpm_min_interval=0.1)
    await probe.collect()
    clock.advance(0.05)   # too close to the first sample: no pair yet
    s = await probe.collect()
    assert reading(s, "gpu.sm_active_ratio", gpu=0).status is Status.NODATA
    clock.advance(0.06)   # 0.11 s after the kept reference sample
    s = await probe.collect()
    assert reading(s, "gpu.sm_active_ratio", gpu=0).value == \
        pytest.approx((60 + 20 * math.sin(clock())) / 100)
    before = reading(s, "gpu.sm_active_ratio", gpu=0).value
    clock.advance(0.01)   # too soon again: the last computed values stay on screen
    s = await probe.collect()
    assert reading(s, "gpu.sm_active_ratio", gpu=0).value == before
    await ticks(probe, clock, 20, 0.5)
    assert fake.calls["nvmlGpmSampleAlloc"] == 4          # 2 GPUs x 2 buffers, reused
    assert fake.calls["nvmlGpmSampleGet"] == 2 * 24       # one sample per GPU per tick
    await probe.close()


# ------------------------------------------------------------------ degraded GPUs
async def test_gpu_without_gpm_reports_unsupported_gpm_and_counter_rates():
    clock = ManualClock()
    a100 = FakeGPU(name="NVIDIA A100-SXM4-80GB", gpm=False, nvlinks=12, nvlinks_active=12,
                   pcie_tx_bps=3e9, pcie_rx_bps=1.5e9, nvlink_tx_bps=60e9)
    fake = FakeNVML([FakeGPU(), a100], clock=clock)
    probe = await opened(fake)
    assert probe.capability.features >= {"gpm"}    # GPU 0 has it
    s1 = await probe.collect()
    assert reading(s1, "gpu.pcie_tx_bytes_per_second", gpu=1).status is Status.NODATA
    clock.advance(2.0)
    s = await probe.collect()
    assert meta_of(s, NvmlMeta).gpm == (0,)
    for key in ("gpu.sm_active_ratio", "gpu.sm_occupancy_ratio", "gpu.tensor_active_ratio",
                "gpu.dram_bw_util_ratio"):
        r = reading(s, key, gpu=1)
        assert r.status is Status.UNSUPPORTED and r.value is None
        assert "not supported on NVIDIA A100-SXM4-80GB" in r.reason
        assert reading(s, key, gpu=0).status is Status.OK
    # no GPM: PCIe/NVLink rates from byte-counter fields, differenced over 2 s
    assert reading(s, "gpu.pcie_tx_bytes_per_second", gpu=1).value == pytest.approx(3e9, 1e-6)
    assert reading(s, "gpu.pcie_rx_bytes_per_second", gpu=1).value == pytest.approx(1.5e9, 1e-6)
    assert reading(s, "gpu.nvlink_tx_bytes_per_second", gpu=1).value == \
        pytest.approx(60e9, rel=1e-4)
    assert reading(s, "gpu.util_ratio", gpu=1).status is Status.OK
    await probe.close()


async def test_pcie_throughput_fallback_only_on_slow_ticks():
    clock = ManualClock()
    old = FakeGPU(name="Tesla T4", gpm=False, pcie_counters=False, nvlinks=0,
                  pcie_tx_bps=1024 * 1000, pcie_rx_bps=1024 * 500)
    fake = FakeNVML([old], clock=clock)
    probe = await opened(fake, slow_every=5)
    s = await ticks(probe, clock, 10)
    # it blocks ~20 ms per call on a real GPU: read on slow ticks only (ticks 1, 6), x2 (tx, rx)
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 4
    assert reading(s, "gpu.pcie_tx_bytes_per_second", gpu=0).value == 1024 * 1000
    assert reading(s, "gpu.pcie_rx_bytes_per_second", gpu=0).value == 1024 * 500
    for key in ("gpu.nvlink_tx_bytes_per_second", "gpu.nvlink_links_active"):
        r = reading(s, key, gpu=0)
        assert r.status is Status.UNSUPPORTED and "no NVLink on Tesla T4" in r.reason
    assert "nvlink" not in probe.capability.features
    await probe.close()


async def test_not_supported_on_power_only():
    clock = ManualClock()
    fake = FakeNVML([FakeGPU(unsupported={"nvmlDeviceGetPowerUsage"}), FakeGPU()], clock=clock)
    probe = await opened(fake)
    s = await ticks(probe, clock, 2)
    r = reading(s, "gpu.power_watts", gpu=0)
    assert r.status is Status.UNSUPPORTED and r.value is None
    assert r.reason == "not supported on NVIDIA H100 80GB HBM3"
    assert reading(s, "gpu.power_watts", gpu=1).value == pytest.approx(512.0)
    others = [x for x in s.readings if x.label("gpu") == "0" and x.key != "gpu.power_watts"
              and x.key != "gpu.xid_last"]
    assert others and all(x.status is Status.OK for x in others)
    await probe.close()


async def test_no_permission_is_an_error_naming_the_call():
    clock = ManualClock()
    fake = FakeNVML([FakeGPU(no_permission={"nvmlDeviceGetTotalEccErrors"})], clock=clock)
    probe = await opened(fake)
    s = await probe.collect()
    r = reading(s, "gpu.ecc_corrected_total", gpu=0)
    assert r.status is Status.ERROR
    assert "no permission" in r.reason and "nvmlDeviceGetTotalEccErrors" in r.reason
    assert reading(s, "gpu.temp_celsius", gpu=0).status is Status.OK
    await probe.close()


async def test_gpu_lost_mid_run_leaves_the_other_gpu_alone():
    clock = ManualClock()
    fake = h100_pair(clock)
    probe = await opened(fake)
    s = await ticks(probe, clock, 2)
    assert reading(s, "gpu.lost", gpu=1).value == 0
    fake.lose(1)
    s = await probe.collect()
    assert reading(s, "gpu.lost", gpu=1).value == 1
    info = reading(s, "gpu.info", gpu=1)
    assert info.status is Status.ERROR and info.text == "NVIDIA H100 80GB HBM3"
    for key in GPU_KEYS:
        r = reading(s, key, gpu=1)
        assert r.status is Status.ERROR and r.reason == LOST_REASON and r.value is None
    assert not [r for r in s.readings if r.key.startswith("process.") and r.label("gpu") == "1"]
    healthy = [r for r in s.readings if r.label("gpu") == "0" and r.key != "gpu.xid_last"]
    assert healthy and all(r.status is Status.OK for r in healthy)
    assert s.status is Status.OK
    # a lost GPU is not called again (its calls may hang on a real driver)
    calls = fake.gpus[1].calls
    await ticks(probe, clock, 3)
    assert fake.gpus[1].calls == calls
    await probe.close()


async def test_gpu_lost_in_the_middle_of_a_collection():
    clock = ManualClock()
    fake = h100_pair(clock)
    probe = await opened(fake)
    await probe.collect()
    fake.gpus[0].lose_after_calls = fake.gpus[0].calls + 4   # dies after a few calls
    s = await probe.collect()
    assert reading(s, "gpu.lost", gpu=0).value == 1
    assert reading(s, "gpu.util_ratio", gpu=0).status is Status.ERROR
    assert reading(s, "gpu.util_ratio", gpu=1).status is Status.OK
    # the topology pair with the lost GPU is gone on the next slow tick
    s = await ticks(probe, clock, 5)
    assert not s.find("gpu.topology")
    fake.lose(1)
    s = await probe.collect()
    assert s.status is Status.ERROR and "no usable GPU" in s.reason
    await probe.close()


async def test_gpu_already_lost_at_open():
    clock = ManualClock()
    fake = h100_pair(clock)
    fake.lose(1)
    probe = await opened(fake)
    s = await probe.collect()
    assert reading(s, "gpu.lost", gpu=1).value == 1
    assert reading(s, "gpu.temp_celsius", gpu=1).reason == LOST_REASON
    assert reading(s, "gpu.temp_celsius", gpu=0).status is Status.OK
    assert not s.find("gpu.topology")
    await probe.close()


async def test_gpm_failing_mid_run():
    clock = ManualClock()
    fake = FakeNVML([FakeGPU(), FakeGPU()], clock=clock)
    probe = await opened(fake)
    await ticks(probe, clock, 2)
    # GPU 0: sampling refused (permission) -> GPM and the GPM-fed rates say so
    fake.gpus[0].no_permission.add("nvmlGpmSampleGet")
    # GPU 1: GPM goes away (as when MIG is switched on) -> counters take over the rates
    fake.gpus[1].unsupported.add("nvmlGpmSampleGet")
    s = await probe.collect()
    for key in ("gpu.sm_active_ratio", "gpu.pcie_tx_bytes_per_second",
                "gpu.nvlink_rx_bytes_per_second"):
        r = reading(s, key, gpu=0)
        assert r.status is Status.ERROR and "no permission" in r.reason, key
    r = reading(s, "gpu.sm_active_ratio", gpu=1)
    assert r.status is Status.UNSUPPORTED and "not supported on" in r.reason
    assert reading(s, "gpu.pcie_tx_bytes_per_second", gpu=1).status is Status.NODATA
    clock.advance(1.0)
    s = await probe.collect()
    assert reading(s, "gpu.pcie_tx_bytes_per_second", gpu=1).value == pytest.approx(2e9)
    assert reading(s, "gpu.nvlink_tx_bytes_per_second", gpu=1).value == \
        pytest.approx(100e9, rel=1e-4)
    await probe.close()


# ------------------------------------------------------------------ no NVML at all
@pytest.mark.parametrize("kwargs, reason", [
    ({"lib_missing": True}, "NVML library not found (no NVIDIA driver?)"),
    ({"init_error": real_pynvml.NVML_ERROR_DRIVER_NOT_LOADED}, "NVIDIA driver not loaded"),
    ({"init_error": real_pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH},
     "NVML and kernel driver versions differ"),
])
async def test_nvml_unavailable_is_a_capability(kwargs, reason):
    fake = FakeNVML(**kwargs)
    probe = NvmlProbe(nvml_module=fake.module)
    cap = await probe.open()
    assert not cap.available and cap.reason.startswith(reason)
    s = await probe.collect()               # never a traceback
    assert s.status is Status.ERROR and s.reason == cap.reason and not s.readings
    await probe.close()


async def test_pynvml_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)   # makes `import pynvml` fail
    probe = NvmlProbe()
    cap = await probe.open()
    assert not cap.available and "nvidia-ml-py (pynvml) is not installed" in cap.reason
    await probe.close()


async def test_default_import_uses_the_installed_module(monkeypatch):
    fake = FakeNVML([FakeGPU()], clock=ManualClock())
    fake.install(monkeypatch)
    probe = NvmlProbe(clock=fake.clock)
    assert (await probe.open()).available
    assert reading(await probe.collect(), "gpu.info", gpu=0).text == "NVIDIA H100 80GB HBM3"
    await probe.close()


async def test_no_gpu_visible():
    probe = NvmlProbe(nvml_module=FakeNVML([]).module)
    cap = await probe.open()
    assert not cap.available and cap.reason == "no NVIDIA GPU visible to NVML"
    await probe.close()


# ------------------------------------------------------------------ MIG
async def test_mig_enabled():
    clock = ManualClock()
    fake = FakeNVML([FakeGPU(mig=True, processes=[(77, 10 * GiB)], process_sm={}),
                     FakeGPU(mig=None)], clock=clock)
    probe = await opened(fake)
    assert "mig" in probe.capability.features
    s = await ticks(probe, clock, 2)
    assert reading(s, "gpu.mig_enabled", gpu=0).value == 1
    util = reading(s, "gpu.util_ratio", gpu=0)
    assert util.status is Status.UNSUPPORTED and "not supported on" in util.reason
    mem = reading(s, "process.gpu_mem_bytes", gpu=0, pid=77)
    assert mem.status is Status.UNSUPPORTED and "MIG" in mem.reason
    assert reading(s, "gpu.mig_enabled", gpu=1).status is Status.UNSUPPORTED  # not MIG-capable
    assert reading(s, "gpu.mem_used_bytes", gpu=0).status is Status.OK
    await probe.close()


# ------------------------------------------------------------------ throttle reasons
@pytest.mark.parametrize("mask, text, throttled", [
    (0x0, "none", False),
    (0x1, "idle", False),
    (0x4, "sw_power_cap", True),
    (0x4 | 0x40, "sw_power_cap,hw_thermal", True),
    (0x1 | 0x20, "idle,sw_thermal", True),
    (0x8 | 0x80, "hw_slowdown,hw_power_brake", True),
    (0x10, "sync_boost", True),
    (0x2 | 0x100, "app_clocks_setting,display_clock_setting", True),
    (0x200 | 0x400, "board_limit,reliability", True),
    (0x1000, "0x1000", True),
])
def test_throttle_decoding_table(mask, text, throttled):
    assert decode_throttle(mask) == text
    assert is_throttled(mask) is throttled


def test_decoder_bits_match_pynvml_constants():
    n = real_pynvml
    assert decode_throttle(n.nvmlClocksEventReasonSwPowerCap) == "sw_power_cap"
    assert decode_throttle(n.nvmlClocksEventReasonHwThermalSlowdown) == "hw_thermal"
    assert decode_throttle(n.nvmlClocksEventReasonHwPowerBrakeSlowdown) == "hw_power_brake"
    assert decode_throttle(n.nvmlClocksEventReasonSwThermalSlowdown) == "sw_thermal"
    assert decode_throttle(n.nvmlClocksThrottleReasonBoardLimit) == "board_limit"
    assert decode_throttle(n.nvmlClocksEventReasonAll).count(",") == 8


async def test_throttle_reading_and_old_driver_fallback():
    clock = ManualClock()
    fake = FakeNVML([FakeGPU(clocks_event_reasons=0x44),
                     FakeGPU(clocks_event_reasons=0x1,
                             missing={"nvmlDeviceGetCurrentClocksEventReasons"})], clock=clock)
    probe = await opened(fake)
    s = await probe.collect()
    r = reading(s, "gpu.throttle_reasons", gpu=0)
    assert r.value == 0x44 and r.text == "sw_power_cap,hw_thermal" and r.unit == "bitmask"
    old = reading(s, "gpu.throttle_reasons", gpu=1)
    assert old.status is Status.OK and old.text == "idle"
    assert fake.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == 1   # deprecated name
    await probe.close()


async def test_memory_v2_missing_falls_back_to_v1():
    fake = FakeNVML([FakeGPU(missing={"nvmlDeviceGetMemoryInfo_v2"})], clock=ManualClock())
    probe = await opened(fake)
    s = await probe.collect()
    assert reading(s, "gpu.mem_used_bytes", gpu=0).value == 60 * GiB + 512 * 1024 ** 2
    await probe.close()


# ------------------------------------------------------------------ processes
async def test_per_process_memory_and_sm_share():
    clock = ManualClock()
    gpu = FakeGPU(processes=[(101, 20 * GiB), (202, None), (303, 1 * GiB)],
                  process_sm={101: 50, 202: 30})
    fake = FakeNVML([gpu], clock=clock)
    probe = await opened(fake, slow_every=3)
    s = await probe.collect()
    assert reading(s, "process.gpu_mem_bytes", gpu=0, pid=101).value == 20 * GiB
    na = reading(s, "process.gpu_mem_bytes", gpu=0, pid=202)
    assert na.status is Status.UNSUPPORTED and na.value is None
    assert reading(s, "process.gpu_sm_ratio", gpu=0, pid=101).value == pytest.approx(0.5)
    assert reading(s, "process.gpu_sm_ratio", gpu=0, pid=202).value == pytest.approx(0.3)
    assert reading(s, "process.gpu_sm_ratio", gpu=0, pid=303).value == 0.0   # no kernels ran
    # slow cadence: the list is re-read every 3rd tick, re-sent in between
    gpu.processes = [(101, 21 * GiB)]
    gpu.process_sm = {}    # nothing ran: NVML says NOT_FOUND, which means idle
    s = await probe.collect()
    assert reading(s, "process.gpu_mem_bytes", gpu=0, pid=101).value == 20 * GiB
    assert fake.calls["nvmlDeviceGetComputeRunningProcesses"] == 1
    s = await ticks(probe, clock, 2)
    assert fake.calls["nvmlDeviceGetComputeRunningProcesses"] == 2
    assert reading(s, "process.gpu_mem_bytes", gpu=0, pid=101).value == 21 * GiB
    assert reading(s, "process.gpu_sm_ratio", gpu=0, pid=101).value == 0.0
    assert not s.find("process.gpu_mem_bytes")[1:]    # pid 202 and 303 are gone
    await probe.close()


async def test_process_list_failure_says_why_without_a_pid():
    fake = FakeNVML([FakeGPU(no_permission={"nvmlDeviceGetComputeRunningProcesses"})],
                    clock=ManualClock())
    probe = await opened(fake)
    r = reading(await probe.collect(), "process.gpu_mem_bytes", gpu=0)
    assert r.status is Status.ERROR and r.label("pid") == "" and "no permission" in r.reason
    await probe.close()


# ------------------------------------------------------------------ topology
def test_topology_names():
    n = real_pynvml
    assert [topology_name(x) for x in (n.NVML_TOPOLOGY_SINGLE, n.NVML_TOPOLOGY_MULTIPLE,
                                       n.NVML_TOPOLOGY_HOSTBRIDGE, n.NVML_TOPOLOGY_NODE,
                                       n.NVML_TOPOLOGY_SYSTEM)] == \
        ["PIX", "PXB", "PHB", "NODE", "SYS"]


async def test_topology_text_between_pairs():
    clock = ManualClock()
    gpus = [FakeGPU(), FakeGPU(), FakeGPU(nvlinks=0), FakeGPU(nvlinks=0)]
    fake = FakeNVML(gpus, clock=clock, topology={(0, 1): "NVLINK", (0, 2): "PHB",
                                                 (1, 2): "SYS", (2, 3): "PIX",
                                                 (0, 3): "NODE", (1, 3): "PXB"})
    probe = await opened(fake)
    s = await probe.collect()
    want = {(0, 1): "NVLINK", (0, 2): "PHB", (1, 2): "SYS", (2, 3): "PIX", (0, 3): "NODE",
            (1, 3): "PXB"}
    for (a, b), text in want.items():
        assert reading(s, "gpu.topology", gpu=a, peer=b).text == text
        assert reading(s, "gpu.topology", gpu=b, peer=a).text == text
    assert len(s.find("gpu.topology")) == 12
    await probe.close()


# ------------------------------------------------------------------ Xid events
async def test_xid_events_counted_per_gpu():
    clock = ManualClock()
    fake = h100_pair(clock)
    probe = await opened(fake)
    s = await probe.collect()
    assert reading(s, "gpu.xid_last", gpu=0).status is Status.NODATA
    fake.emit_xid(0, 48)
    fake.emit_xid(0, 79)
    s = await probe.collect()
    assert reading(s, "gpu.xid_total", gpu=0).value == 2
    assert reading(s, "gpu.xid_last", gpu=0).value == 79
    assert reading(s, "gpu.xid_total", gpu=1).value == 0
    await probe.close()


async def test_xid_left_out_when_event_sets_are_refused():
    fake = FakeNVML([FakeGPU()], clock=ManualClock(),
                    event_set_error=real_pynvml.NVML_ERROR_NO_PERMISSION)
    probe = await opened(fake)
    s = await probe.collect()
    assert not s.find("gpu.xid_total") and meta_of(s, NvmlMeta).xid == ()
    assert "xid" not in probe.capability.features
    await probe.close()


# ------------------------------------------------------------------ a hung driver call
async def test_hung_call_raises_still_running_instead_of_piling_threads():
    clock = ManualClock()
    fake = h100_pair(clock)
    probe = await opened(fake)
    hub = Hub([probe], deadline=5.0)
    await hub.start()
    snap = await hub.next()
    assert snap.samples["nvml"].status is Status.OK
    def workers() -> int:
        return sum(t.name.startswith("infertop-nvml") for t in threading.enumerate())

    before = workers()
    fake.hang(0, "nvmlDeviceGetPowerUsage")
    stuck = asyncio.create_task(probe.collect())
    loop = asyncio.get_running_loop()
    try:
        assert await loop.run_in_executor(None, fake.hung.wait, 10.0)
        for _ in range(3):
            with pytest.raises(StillRunning):
                await probe.collect()
        # the hub turns it into STALE at once, keeping the last values
        snap = await hub.next()
        stale = snap.samples["nvml"]
        assert stale.status is Status.STALE
        assert reading(stale, "gpu.power_watts", gpu=0).status is Status.STALE
        assert workers() == before   # no new thread queued behind the stuck one
    finally:
        fake.release()
    s = await stuck
    assert reading(s, "gpu.power_watts", gpu=0).value == pytest.approx(512.0)
    assert (await probe.collect()).status is Status.OK    # recovers once the call returns
    await probe.close()


# ------------------------------------------------------------------ scripts/gpu-check
def test_gpu_check_script_with_fake():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu-check"), "--fake"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.count("--- tick ") == 3
    assert "NVIDIA A100-SXM4-80GB" in text and "GPM on [0]" in text
    last = text.split("--- tick 3")[1]
    assert "gpu.sm_active_ratio" in last
    assert "[GPM not supported on NVIDIA A100-SXM4-80GB (needs Hopper or newer)]" in last
    assert "sw_power_cap" in last
    assert "nvmlDeviceGetFieldValues" in text.split("NVML call timings")[1]
    # by tick 3 every GPM/rate reading of the H100 is a number
    h100 = [ln for ln in last.splitlines() if "gpu=0 " in ln and "bytes_per_second" in ln]
    assert len(h100) == 4 and all(" ok " in ln for ln in h100)


def test_gpu_check_script_exits_2_with_one_line_without_nvml():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu-check"),
                          "--fake-lib-missing"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "gpu-check: NVML unavailable: NVML library not found (no NVIDIA driver?)"]
