"""One index of a tick's readings (infertop/reading_index.py), built once by the Pipeline
and read by both the rules' Context and the Frame the panes draw: each lookup equals a
plain scan of what it indexes, and feeding a tick builds it once."""

from __future__ import annotations

import asyncio
import random

from helpers.snapkit import hist, reading, sample, snap
from helpers.synthetic_source import SyntheticSource
from infertop.config import DiagnosisConfig
from infertop.history import History
from infertop.model import Kind, Status
from infertop.pipeline import Frame, Pipeline
from infertop.reading_index import ReadingIndex
from infertop.rules.base import Context
from infertop.rules.engine import Diagnoser
from infertop.themes import roles
from infertop.tui.panes.context import FrameLookups

KEYS = ("gpu.util_ratio", "gpu.ecc_corrected_total", "latency.ttft_seconds", "process.info",
        "process.gpu_mem_bytes", "kv.usage_ratio", "gpu.absent")


def some_tick(seed: int):
    """A snapshot mixing gauges, counters, histograms and infos over a few sources, some
    derived readings and some STALE ones, in random order."""
    rnd = random.Random(seed)
    samples = []
    for src in ("nvml", "process", "server:a"):
        rs = []
        for _ in range(rnd.randint(0, 12)):
            g = str(rnd.randint(0, 3))
            pick = rnd.random()
            if pick < 0.3:
                rs.append(reading("gpu.util_ratio", rnd.random(), gpu=g))
            elif pick < 0.5:
                rs.append(reading("gpu.ecc_corrected_total", rnd.randint(0, 9), gpu=g))
            elif pick < 0.6:
                rs.append(hist("latency.ttft_seconds", {0.1: 1.0, 1.0: 3.0}, 1.5, engine=g))
            elif pick < 0.8:
                rs.append(reading("process.gpu_mem_bytes", rnd.random() * 2**34, gpu=g,
                                  pid=str(rnd.randint(100, 104))))
            else:
                rs.append(reading("process.info", 1.0, text="vllm", pid=str(rnd.randint(100, 104))))
        samples.append(sample(src, 10.0, rs))
    derived = [reading("kv.usage_ratio", rnd.random(), engine=str(rnd.randint(0, 2)))
               for _ in range(rnd.randint(0, 4))]
    derived += [reading("gpu.util_ratio", rnd.random(), gpu="9")][: rnd.randint(0, 1)]
    stale = [reading("gpu.util_ratio", 0.5, gpu="0").with_status(Status.STALE, "old"),
             reading("gpu.ecc_corrected_total", 1, gpu="0").with_status(Status.STALE, "old")
             ][: rnd.randint(0, 2)]
    return snap(10.0, *samples), derived, stale


def test_frame_lookups_equal_a_scan_of_its_readings():
    for seed in range(40):
        s, derived, stale = some_tick(seed)
        frame = Frame(s, derived, History(), stale=stale)
        shown = frame.all_readings()
        assert not any(r.kind in (Kind.COUNTER, Kind.HISTOGRAM) for r in shown
                       if r not in derived)
        for key in KEYS:
            want = [r for r in shown if r.key == key]
            assert frame.by_key(key) == want
            by_two: dict = {}
            for r in want:
                by_two.setdefault((r.label("gpu"), r.label("pid")), []).append(r)
            assert frame.by_labels(key, ("gpu", "pid")) == by_two
            assert frame.by_exact_labels(key) == {r.labels: r for r in want}


def test_rules_context_reads_every_raw_reading_and_the_derived_ones():
    for seed in range(40):
        s, derived, _ = some_tick(seed)
        ctx = Context(History(), s, derived, DiagnosisConfig(), {}, {})
        for key in ("gpu.util_ratio", "gpu.ecc_corrected_total", "latency.ttft_seconds",
                    "process.gpu_mem_bytes"):
            assert ctx.all(key) == [r for r in s.readings() if r.key == key]
        for r in derived:
            last = [d for d in derived if d.key == r.key and d.labels == r.labels][-1]
            assert ctx.derived(r.key, r.labels) == last.value


def test_stale_readings_do_not_reach_the_rules():
    s, derived, _ = some_tick(1)
    index = ReadingIndex(s, derived)
    before = {k: list(v) for k, v in index.shown.items()}
    stale = [reading("gpu.util_ratio", 0.5, gpu="7").with_status(Status.STALE, "old")]
    frame = Frame(s, derived, History(), stale=stale, readings_index=index)
    assert frame.by_key("gpu.util_ratio")[-1] is stale[0]
    assert {k: list(v) for k, v in index.shown.items()} == before   # shared lists untouched
    assert all(r.status is not Status.STALE for r in index.raw.get("gpu.util_ratio", ()))


def test_a_tick_is_indexed_once_for_the_rules_and_the_panes(monkeypatch):
    built = []
    original = ReadingIndex.__init__

    def counting(self, snapshot, derived):
        built.append(self)
        original(self, snapshot, derived)

    monkeypatch.setattr(ReadingIndex, "__init__", counting)
    seen = []
    original_ctx = Context.__init__

    def spy(self, *args, **kwargs):
        original_ctx(self, *args, **kwargs)
        seen.append(self)

    monkeypatch.setattr(Context, "__init__", spy)
    source = SyntheticSource()
    pipeline = Pipeline(Diagnoser())

    async def ticks():
        await source.start()
        out = [pipeline.feed(await source.next()) for _ in range(3)]
        await source.stop()
        return out

    frames = asyncio.run(ticks())
    assert len(built) == 3 and len(seen) == 3
    frame = frames[-1].prepare()
    lookups = FrameLookups(frame, roles({}))
    assert lookups.readings("gpu.util_ratio", gpu="0")
    assert len(built) == 3                      # the Frame and the panes built no other
    assert frame.reading_index() is built[-1]
    assert seen[-1]._by_key is built[-1].raw    # the rules read the same lists
