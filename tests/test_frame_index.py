"""Frame.by_label / Frame.prepare: the per-row lookups the panes make (gpu=, pid=) go
through indexes the app builds in its pipeline thread, so the event loop's share of a
tick follows the rows drawn, not the readings held."""

from __future__ import annotations

import random

from helpers.snapkit import reading, sample, snap
from helpers.synthetic_source import SyntheticSource
from infertop.model import Snapshot
from infertop.pipeline import Frame, Pipeline
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


def test_prepare_builds_what_earlier_frames_were_asked_and_only_that():
    """Once the panes have asked a frame for a (key, label) index it had not built, the
    pipeline's next frames build exactly the pairs asked so far in prepare (the panes read
    ~30 of ~170 (key, gpu/pid) pairs on 8 GPUs); answers are the same either way."""
    pipe = Pipeline()
    first = pipe.feed(snap(100.0, sample("nvml", 100.0, some_readings(5)))).prepare()
    assert first.asked is pipe.asked and not pipe.asked        # all built: nothing missed
    first.by_label("gpu.util_ratio", "engine")                 # not built: a miss, learnt
    assert pipe.asked == {("gpu.util_ratio", "engine")}
    second = pipe.feed(snap(101.0, sample("nvml", 101.0, some_readings(6)))).prepare()
    assert second._by_label is not None
    assert set(second._by_label) == {("gpu.util_ratio", "engine")}
    assert second.by_label("gpu.power_watts", "gpu") == {       # built where asked ...
        v: [r for r in second.by_key("gpu.power_watts") if r.label("gpu") == v]
        for v in {r.label("gpu") for r in second.by_key("gpu.power_watts")}}
    third = pipe.feed(snap(102.0, sample("nvml", 102.0, some_readings(7)))).prepare()
    assert third._by_label is not None
    assert set(third._by_label) == {("gpu.util_ratio", "engine"),   # ... and then by prepare
                                    ("gpu.power_watts", "gpu")}
    for key, name in third._by_label:
        for value in ("", "0", "3", "x"):
            assert third.by_label(key, name).get(value, []) == scan(third, key, name, value)
    assert pipe.asked == {("gpu.util_ratio", "engine"), ("gpu.power_watts", "gpu")}


async def test_after_its_first_frames_the_app_draws_with_every_lookup_prepared():
    """The pairs the panes read are learnt on the first frames; from then on the frame
    they draw has every one built in the pipeline thread (none is built on the event
    loop: the pipeline's asked set no longer grows)."""
    app = InfertopApp(SyntheticSource(gpus=2), pipeline=Pipeline(), interval=0.05,
                      options=AppOptions(manual_ticks=True))
    prepared: list[set] = []     # the pairs each frame had built when prepare returned
    feed = app._feed

    def spy(snap: Snapshot, epoch: object, prepare: bool = True) -> Frame:
        frame = feed(snap, epoch, prepare)
        prepared.append(set(frame._by_label or ()))
        return frame

    app._feed = spy   # type: ignore[method-assign]
    async with app.run_test(size=(120, 40)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        for _ in range(3):
            await app._poll()
            await pilot.pause()
        asked = set(app.pipeline.asked)
        assert ("gpu.util_ratio", "gpu") in asked
        await app._poll()
        await pilot.pause()
        assert app.pipeline.asked == asked
        assert asked <= prepared[-1]
        assert ("gpu.util_ratio", "pid") not in prepared[-1]   # never read: not built
