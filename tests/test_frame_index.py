"""Frame.by_label / Frame.prepare: the per-row lookups the panes make (gpu=, pid=) go
through indexes the app builds in its pipeline thread, so the event loop's share of a
tick follows the rows drawn, not the readings held."""

from __future__ import annotations

import random

from helpers.snapkit import reading, sample, snap
from helpers.synthetic_source import SyntheticSource
from infertop.pipeline import Pipeline
from infertop.tui.app import InfertopApp
from infertop.tui.options import AppOptions
from infertop.tui.panes.context import PaneContext


def frame_of(readings):
    return Pipeline().feed(snap(100.0, sample("nvml", 100.0, readings)))


def some_readings(seed: int):
    rnd = random.Random(seed)
    out = []
    for g in range(rnd.randint(0, 12)):
        out.append(reading("gpu.util_ratio", rnd.random(), gpu=g))
        if rnd.random() < 0.7:
            out.append(reading("gpu.power_watts", rnd.random() * 700, gpu=g))
        for pid in rnd.sample(range(100, 130), rnd.randint(0, 3)):
            out.append(reading("process.gpu_mem_bytes", rnd.random() * 2**34, gpu=g, pid=pid))
    out.append(reading("gpu.power_watts", 1.0))   # no gpu label: grouped under ""
    return out


def scan(frame, key, name, value):
    return [r for r in frame.by_key(key) if r.label(name) == value]


def test_lookups_equal_a_scan_prepared_or_not():
    for seed in range(30):
        lazy, ready = frame_of(some_readings(seed)), frame_of(some_readings(seed)).prepare()
        assert ready._by_label is not None and lazy._by_label is None
        for key in ("gpu.util_ratio", "gpu.power_watts", "process.gpu_mem_bytes", "gpu.absent"):
            for name in ("gpu", "pid", "engine"):
                for value in ["", "0", "3", "11", "105", "x"]:
                    want = scan(lazy, key, name, value)
                    assert lazy.by_label(key, name).get(value, []) == want
                    assert ready.by_label(key, name).get(value, []) == \
                        scan(ready, key, name, value)
                    ctx = PaneContext(lazy, {})
                    assert ctx.readings(key, **{name: value}) == want


def test_prepare_builds_every_key_by_gpu_and_pid_up_front():
    frame = frame_of(some_readings(3)).prepare()
    built = set(frame._by_label)
    for key in frame._index:
        assert {(key, "gpu"), (key, "pid")} <= built


async def test_the_app_draws_prepared_frames():
    app = InfertopApp(SyntheticSource(gpus=2), pipeline=Pipeline(), interval=0.05,
                      options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(120, 40)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        await app._poll()
        assert app.frame is not None and app.frame._by_label is not None
        assert ("gpu.util_ratio", "gpu") in app.frame._by_label
