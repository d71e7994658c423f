"""What the NVML probe no longer asks every tick, and what it still must see at once.

Each cache of the probe (refused calls, static facts, topology, readings shared between
ticks, GPM's trimmed metrics request) gets a test that fails when it serves a stale value:
a value that changes must reach the readings within the cadence documented for it, and a
GPU that falls off the bus must be seen the tick it happens, whatever is cached.
"""

from __future__ import annotations

import pytest

from helpers.fake_pynvml import FakeGPU, FakeNVML, ManualClock, h100_pair
from helpers.nvml_probe import opened, reading
from infertop.model import Status
from infertop.probes.nvml.gpu import NOT_SUPPORTED_RECHECK
from infertop.probes.nvml.probe import LOST_REASON, NvmlProbe


async def ticks(probe: NvmlProbe, clock: ManualClock, n: int):
    s = None
    for _ in range(n):
        s = await probe.collect()
        clock.advance(1.0)
    return s


# ------------------------------------------------------------------ refused calls
async def test_a_missing_function_is_asked_once_and_its_reading_stays_every_tick():
    clock = ManualClock()
    fake = FakeNVML([FakeGPU(missing={"nvmlDeviceGetCurrPcieLinkGeneration"}), FakeGPU()],
                    clock=clock)
    probe = await opened(fake)
    for _ in range(3 * NOT_SUPPORTED_RECHECK):
        s = await probe.collect()
        clock.advance(1.0)
        r = reading(s, "gpu.pcie_link_gen", gpu=0)
        assert r.status is Status.UNSUPPORTED and "missing in this driver" in r.reason
        assert reading(s, "gpu.pcie_link_gen", gpu=1).value == 5
    # GPU 0 asked once (the driver will not grow the symbol); GPU 1 every tick
    assert fake.calls["nvmlDeviceGetCurrPcieLinkGeneration"] == 1 + 3 * NOT_SUPPORTED_RECHECK
    await probe.close()


async def test_not_supported_is_asked_again_and_a_new_answer_shows_within_the_recheck():
    clock = ManualClock()
    gpu = FakeGPU(unsupported={"nvmlDeviceGetPowerUsage"})
    fake = FakeNVML([gpu], clock=clock)
    probe = await opened(fake)
    s = await ticks(probe, clock, 5)
    assert reading(s, "gpu.power_watts", gpu=0).status is Status.UNSUPPORTED
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 1      # not asked every tick
    gpu.unsupported.clear()   # e.g. MIG switched off: the GPU answers again
    seen_at = None
    for n in range(NOT_SUPPORTED_RECHECK + 1):
        s = await probe.collect()
        clock.advance(1.0)
        if reading(s, "gpu.power_watts", gpu=0).status is Status.OK:
            seen_at = n
            break
    assert seen_at is not None and seen_at < NOT_SUPPORTED_RECHECK
    assert reading(s, "gpu.power_watts", gpu=0).value == pytest.approx(512.0)
    await probe.close()


async def test_other_failures_are_never_remembered():
    clock = ManualClock()
    gpu = FakeGPU(no_permission={"nvmlDeviceGetTemperature"})
    fake = FakeNVML([gpu], clock=clock)
    probe = await opened(fake)
    s = await ticks(probe, clock, 3)
    assert reading(s, "gpu.temp_celsius", gpu=0).status is Status.ERROR
    assert fake.calls["nvmlDeviceGetTemperature"] == 3     # asked every tick
    gpu.no_permission.clear()
    s = await probe.collect()
    assert reading(s, "gpu.temp_celsius", gpu=0).value == 61    # the very next tick
    await probe.close()


async def test_a_gpu_lost_is_seen_the_same_tick_when_its_refusals_are_remembered():
    clock = ManualClock()
    refusing = {"nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkWidth",
                "nvmlDeviceGetPowerUsage", "nvmlDeviceGetTemperature"}
    fake = FakeNVML([FakeGPU(unsupported=set(refusing)), FakeGPU(missing=set(refusing))],
                    clock=clock)
    probe = await opened(fake)
    await ticks(probe, clock, 3)
    fake.lose(0)
    fake.lose(1)
    s = await probe.collect()
    for gpu in (0, 1):
        assert reading(s, "gpu.lost", gpu=gpu).value == 1
        for key in ("gpu.power_watts", "gpu.pcie_link_gen", "gpu.sm_clock_max_hz"):
            r = reading(s, key, gpu=gpu)
            assert r.status is Status.ERROR and r.reason == LOST_REASON, key
    await probe.close()


# ------------------------------------------------------------------ static facts, topology
async def test_static_facts_are_read_on_their_cadence_and_present_every_tick():
    clock = ManualClock()
    gpu = FakeGPU()
    fake = FakeNVML([gpu], clock=clock)
    probe = await opened(fake, slow_every=5, static_every=20)
    for _ in range(20):             # ticks 0..19: read at tick 0, re-sent since
        s = await probe.collect()
        clock.advance(1.0)
        assert reading(s, "gpu.sm_clock_max_hz", gpu=0).value == 1980e6
        assert reading(s, "gpu.cuda_cores", gpu=0).value == 16896
        assert reading(s, "gpu.compute_capability", gpu=0).text == "9.0"
    assert fake.calls["nvmlDeviceGetNumGpuCores"] == 1
    gpu.sm_clock_max_mhz = 1755     # (a fake's change: a real board's max clock is fixed)
    s = await probe.collect()       # tick 20: the static cadence
    assert reading(s, "gpu.sm_clock_max_hz", gpu=0).value == 1755e6
    # the power limit is not static: an admin may set it; it follows the slow cadence
    gpu.power_limit_mw = 400_000
    s = await ticks(probe, clock, 5)
    assert reading(s, "gpu.power_limit_watts", gpu=0).value == pytest.approx(400.0)
    await probe.close()


async def test_a_static_fact_that_failed_is_asked_again_on_the_slow_cadence():
    clock = ManualClock()
    gpu = FakeGPU(no_permission={"nvmlDeviceGetNumGpuCores"})
    fake = FakeNVML([gpu], clock=clock)
    probe = await opened(fake, slow_every=5, static_every=60)
    s = await ticks(probe, clock, 2)
    assert reading(s, "gpu.cuda_cores", gpu=0).status is Status.ERROR
    gpu.no_permission.clear()     # a passing error: not kept for the static minute
    s = await ticks(probe, clock, 5)
    assert reading(s, "gpu.cuda_cores", gpu=0).value == 16896
    await probe.close()


async def test_topology_is_read_once_and_again_the_tick_a_gpu_is_lost():
    clock = ManualClock()
    fake = FakeNVML([FakeGPU(nvlinks=0) for _ in range(3)], clock=clock)
    probe = await opened(fake, static_every=1000)
    at_open = fake.calls["nvmlDeviceGetTopologyCommonAncestor"]
    s = await ticks(probe, clock, 12)
    assert len(s.find("gpu.topology")) == 6
    assert fake.calls["nvmlDeviceGetTopologyCommonAncestor"] == at_open   # no re-reads
    fake.lose(2)
    s = await probe.collect()
    assert len(s.find("gpu.topology")) == 2          # only the pair (0, 1) is left
    assert reading(s, "gpu.topology", gpu=0, peer=1).status is Status.OK
    await probe.close()


# ------------------------------------------------------------------ shared readings
async def test_an_unchanged_reading_is_shared_and_a_changed_one_is_new_the_same_tick():
    clock = ManualClock()
    gpu = FakeGPU()
    fake = FakeNVML([gpu], clock=clock)
    probe = await opened(fake)
    a = await ticks(probe, clock, 2)
    b = await probe.collect()
    clock.advance(1.0)
    assert reading(b, "gpu.temp_celsius", gpu=0) is reading(a, "gpu.temp_celsius", gpu=0)
    gpu.temp_c, gpu.clocks_event_reasons, gpu.util_gpu = 83, 0x40, 12
    c = await probe.collect()
    assert reading(c, "gpu.temp_celsius", gpu=0).value == 83
    assert reading(c, "gpu.util_ratio", gpu=0).value == pytest.approx(0.12)
    thr = reading(c, "gpu.throttle_reasons", gpu=0)
    assert thr.value == 0x40 and thr.text == "hw_thermal"
    gpu.clocks_event_reasons = 0
    d = await probe.collect()
    assert reading(d, "gpu.throttle_reasons", gpu=0).text == "none"
    e = await probe.collect()     # the same mask: the same reading, not decoded again
    assert reading(e, "gpu.throttle_reasons", gpu=0) is reading(d, "gpu.throttle_reasons", gpu=0)
    await probe.close()


# ------------------------------------------------------------------ GPM request
async def test_gpm_stops_asking_for_rates_the_links_read_elsewhere():
    clock = ManualClock()
    # GPU 0: GPM has the link rates (kept); GPU 1: GPM lacks them (counters instead)
    fake = FakeNVML([FakeGPU(), FakeGPU(gpm_pcie=False)], clock=clock)
    probe = await opened(fake)
    s = await ticks(probe, clock, 4)
    g0, g1 = probe._gpus
    assert g0.gpm is not None and g0.gpm.rates
    assert g1.gpm is not None and not g1.gpm.rates
    assert g1.gpm._mg.numMetrics == 4
    assert reading(s, "gpu.pcie_tx_bytes_per_second", gpu=0).value == pytest.approx(2e9)
    assert reading(s, "gpu.pcie_tx_bytes_per_second", gpu=1).value == pytest.approx(2e9)
    assert reading(s, "gpu.nvlink_tx_bytes_per_second", gpu=1).value == \
        pytest.approx(100e9, rel=1e-4)
    fake.gpus[1].gpm_values = {k: (lambda t, v=v: v) for k, v in
                               zip(list(fake.gpus[1].gpm_values), (10.0, 20.0, 30.0, 40.0))}
    s = await probe.collect()
    assert reading(s, "gpu.sm_active_ratio", gpu=1).value == pytest.approx(0.10)
    assert reading(s, "gpu.dram_bw_util_ratio", gpu=1).value == pytest.approx(0.40)
    await probe.close()


async def test_calls_per_gpu_per_tick_on_a_healthy_h100():
    """The per-tick budget: what a steady H100 costs in NVML calls (a regression guard)."""
    clock = ManualClock()
    fake = h100_pair(clock)
    probe = await opened(fake, slow_every=5, static_every=60)
    await ticks(probe, clock, 3)
    before = sum(fake.calls.values())
    await ticks(probe, clock, 60)
    per_gpu_tick = (sum(fake.calls.values()) - before) / 60 / 2
    # util, memory, power, temp, 2 clocks, clocks-event reasons, PCIe gen and width,
    # field values (NVLink counters), GPM sample + metrics: 13; slow and static on top
    assert 13 <= per_gpu_tick < 17, per_gpu_tick
    await probe.close()
