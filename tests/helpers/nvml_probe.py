"""Shared by the NVML probe's tests: a probe opened on a fake NVML, and one reading of a
sample picked by key and labels (exactly one must match)."""

from __future__ import annotations

from helpers.fake_pynvml import FakeNVML
from infertop.probes.nvml.probe import NvmlProbe


def reading(sample, key, **labels):
    found = [r for r in sample.readings if r.key == key
             and all(r.label(k) == str(v) for k, v in labels.items())]
    assert len(found) == 1, f"{key} {labels}: {len(found)} readings"
    return found[0]


async def opened(fake: FakeNVML, **kw) -> NvmlProbe:
    probe = NvmlProbe(nvml_module=fake.module, clock=fake.clock, **kw)
    cap = await probe.open()
    assert cap.available, cap.reason
    return probe
