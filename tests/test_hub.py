import asyncio
import threading

from infertop.model import Capability, Reading, Sample, Status
from infertop.probes.base import BlockingProbe, Probe
from infertop.probes.sources.hub import Hub


class Fixed(Probe):
    def __init__(self, name, value=1.0):
        self.name, self.value = name, value

    async def collect(self):
        return Sample(self.name, 0.0, (Reading("gpu.util_ratio", self.value, "ratio"),))


class Failing(Probe):
    name = "server:x"

    async def collect(self):
        raise ConnectionError("connection refused at http://x/metrics - is the server running?")


class Unavailable(Probe):
    name = "nvml"

    async def open(self):
        return Capability("nvml", False, "NVML library not found")

    async def collect(self):  # must never be called
        raise AssertionError("collect on unavailable probe")


class BrokenOpen(Probe):
    name = "broken"

    async def open(self):
        raise RuntimeError("boom")


class Hanging(BlockingProbe):
    name = "hang"

    def __init__(self):
        self.release = threading.Event()
        self.calls = 0
        super().__init__()

    def collect_blocking(self):
        self.calls += 1
        if self.calls > 1:
            self.release.wait(5)
        return Sample(self.name, 0.0, (Reading("gpu.util_ratio", 0.5, "ratio"),))


async def test_errors_and_capabilities_do_not_break_the_tick():
    hub = Hub([Fixed("a"), Failing(), Unavailable(), BrokenOpen()], deadline=0.5)
    caps = await hub.start()
    assert caps["nvml"].available is False and "not found" in caps["nvml"].reason
    assert caps["broken"].available is False and "boom" in caps["broken"].reason
    snap = await hub.next()
    assert set(snap.samples) == {"a", "server:x"}
    assert snap.samples["server:x"].status is Status.ERROR
    assert "connection refused" in snap.samples["server:x"].reason
    assert snap.samples["a"].readings[0].value == 1.0
    await hub.stop()


async def test_hung_blocking_probe_goes_stale_with_last_value_and_loop_stays_free():
    p = Hanging()
    hub = Hub([p, Fixed("fast")], deadline=0.2)
    await hub.start()
    first = await hub.next()
    assert first.samples["hang"].status is Status.OK
    second = await hub.next()            # collect #2 hangs in its thread
    st = second.samples["hang"]
    assert st.status is Status.STALE and "no answer" in st.reason
    assert st.readings[0].value == 0.5 and st.readings[0].status is Status.STALE
    assert second.samples["fast"].status is Status.OK
    third = await hub.next()             # still hung: no second thread queued
    assert third.samples["hang"].status is Status.STALE and p.calls == 2
    assert hub.overruns == 2
    p.release.set()
    await asyncio.sleep(0)
    await hub.stop()


class SlowToCancel(Probe):
    """An async probe that, like a scrape of a CPU-starved server, neither answers in time
    nor lets go quickly when cancelled."""

    name = "server:slow"

    def __init__(self):
        self.release = asyncio.Event()
        self.calls = 0

    async def collect(self):
        self.calls += 1
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            await self.release.wait()   # cleanup that waits on the peer
            raise
        return Sample(self.name, 0.0, (Reading("server.requests_running", 3.0),))


async def test_a_probe_slow_to_cancel_does_not_hold_the_tick():
    p = SlowToCancel()
    hub = Hub([p, Fixed("fast")], deadline=0.1)
    await hub.start()
    for _ in range(3):   # each tick ends at its deadline; the slow collection keeps running
        snap = await asyncio.wait_for(hub.next(), 5.0)
        assert snap.samples["server:slow"].status is Status.STALE
        assert snap.samples["fast"].status is Status.OK
    assert p.calls == 1                  # never a second collection on top of the first
    p.release.set()
    snap = await hub.next()              # the late answer is used by the next tick
    assert snap.samples["server:slow"].status is Status.OK
    assert snap.samples["server:slow"].readings[0].value == 3.0
    snap = await hub.next()
    assert p.calls == 2                  # and then a fresh collection starts
    await hub.stop()
