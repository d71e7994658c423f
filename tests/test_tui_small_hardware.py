"""issue 23: at 80x24 the hardware pane's memory and temperature columns went as soon as a
GPU was flagged ("3 H100 ███ 90 % HW-001 45 % HW-001": the codes made the row 14 columns
wider, so whole columns of values were dropped).  Values with their units stay; the model
name gives way to the code ("3 PAR-001"), then the util bars go.  Eight GPUs from the fake NVML library, through
the real NVML probe, pipeline and rules, one simulated second a tick."""

from __future__ import annotations

import re

from pynvml import NVML_GPM_METRIC_SM_UTIL
from rich.text import Text

from helpers.fake_pynvml import FakeGPU, FakeNVML, ManualClock
from infertop.cli.main import build_parser, make_pipeline
from infertop.model import Snapshot
from infertop.probes.nvml.probe import NvmlProbe
from infertop.source import SnapshotSource
from infertop.tui.app import InfertopApp
from infertop.tui.options import AppOptions

CUT_NUMBER = re.compile(r"\d…")


class NvmlOnly(SnapshotSource):
    """The NVML probe over the fake library, a simulated second per tick."""

    def __init__(self, fake: FakeNVML, clock: ManualClock) -> None:
        self.clock = clock
        self.probe = NvmlProbe(nvml_module=fake.module, clock=clock)
        self.tick = 0
        self.caps: dict = {}

    async def start(self):
        self.caps = {"nvml": await self.probe.open()}
        return self.caps

    async def next(self):
        self.clock.advance(1.0)
        self.tick += 1
        return Snapshot(1_000_000.0 + self.tick, {"nvml": await self.probe.collect()},
                        self.tick, self.caps)

    async def stop(self):
        await self.probe.close()


def eight_gpus(busy: int | None) -> NvmlOnly:
    """Eight H100s; GPU ``busy`` (if any) always 'running a kernel' with its SMs mostly
    idle: PAR-001, out of step with the others (its SM activity far from theirs)."""
    gpus = [FakeGPU(util_gpu=60 + i) for i in range(8)]
    if busy is not None:
        gpus[busy].util_gpu = 99
        gpus[busy].gpm_values = {**gpus[busy].gpm_values, NVML_GPM_METRIC_SM_UTIL: 20.0}
    clock = ManualClock()
    return NvmlOnly(FakeNVML(gpus, clock=clock), clock)


async def hardware_lines(source: NvmlOnly, ticks: int = 30) -> tuple[list[str], str]:
    """The hardware pane's lines and its title after ``ticks`` ticks at 80x24."""
    app = InfertopApp(source, pipeline=make_pipeline(build_parser().parse_args([])),
                      options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(80, 24)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        for _ in range(ticks):
            await app._poll()
        await pilot.pause()
        pane = app.panes[0]
        assert isinstance(pane.last_renderable, Text)
        return pane.last_renderable.plain.splitlines(), str(pane.border_title)


def gpu_rows(lines: list[str]) -> dict[str, str]:
    return {m.group(1): ln for ln in lines if (m := re.match(r"(\d) ", ln))}


async def test_a_flagged_gpu_keeps_every_value_column_at_80x24():
    plain = gpu_rows((await hardware_lines(eight_gpus(None)))[0])
    lines, title = await hardware_lines(eight_gpus(3))
    rows = gpu_rows(lines)
    assert sorted(rows) == [str(g) for g in range(8)], lines      # all eight, one line each
    assert re.match(r"3 PAR-001 ", rows["3"]), rows["3"]   # its code, whole, in its label
    header = lines[0]
    # the columns of a box with nothing flagged are all there, on every row
    for unit in ("%", "GiB", "°C"):
        assert unit in plain["0"], plain
        for g, row in rows.items():
            assert unit in row, (g, unit, lines)
    assert header.split()[:2] == ["GPU", "util"] and "mem" in header and "temp" in header
    assert re.search(r"99 % +20 % +\d+/\d+ GiB +\d+ °C", rows["3"]), rows["3"]
    assert not [ln for ln in lines if CUT_NUMBER.search(ln) or len(ln) > 78], lines
