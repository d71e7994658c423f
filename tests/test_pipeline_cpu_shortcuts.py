"""The pipeline thread's shortcuts (benchmarks/cpu-issue23.md, stop 28) give what the code
they stand for gives, and their memos never hand out a stale value: quantiles and bound
checks of buckets sorted once, labels and peaks memoised, History.latest_by."""

from __future__ import annotations

import math
import random

from helpers.snapkit import reading, sample, snap
from infertop import qbound
from infertop.history import (
    History,
    bucket_quantile,
    sort_buckets,
    sorted_bucket_quantile,
)
from infertop.model import Snapshot, Status, make_labels, with_label
from infertop.pipeline import Pipeline

SPECIAL = (math.inf, -math.inf, math.nan, 0.0, -1.0)


def random_buckets(rnd: random.Random) -> list[tuple[float, float]]:
    """Cumulative or not, sorted or not, duplicate bounds, no +Inf, NaN and negatives."""
    out = []
    c = 0.0
    for _ in range(rnd.randint(0, 12)):
        le = rnd.choice(SPECIAL) if rnd.random() < 0.1 else round(rnd.uniform(0, 5), 1)
        c = c + rnd.choice((0, 1, 3)) if rnd.random() < 0.9 else rnd.choice(SPECIAL)
        out.append((le, c))
    if out and rnd.random() < 0.5:
        out.append((math.inf, out[-1][1] + rnd.choice((0, 2))))
    if rnd.random() < 0.3:
        rnd.shuffle(out)
    return out


def same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and
                      math.isnan(a) and math.isnan(b))


def test_quantiles_and_bounds_of_buckets_sorted_once_equal_the_originals():
    rnd = random.Random(23)
    for _ in range(3000):
        bs = random_buckets(rnd)
        ordered = sort_buckets(bs)
        kept = list(ordered)
        edges = qbound.edges(ordered)
        for q in (0.0, 0.5, 0.9, 0.99, 1.0):
            v = bucket_quantile(q, bs)
            assert same(sorted_bucket_quantile(q, ordered), v), (q, bs)
            for value in (v, 0.0, 0.3, 2.5, 99.0, math.inf, math.nan):
                assert qbound.side_at_edges(value, edges) == qbound.side_of(value, bs), \
                    (value, bs)
        assert ordered == kept        # read, never extended in place (shared by quantiles)


def test_with_label_is_make_labels_and_its_memo_keeps_types_apart():
    rnd = random.Random(5)
    for _ in range(500):
        labels = make_labels({rnd.choice("abcgq"): str(rnd.randint(0, 3))
                              for _ in range(rnd.randint(0, 3))})
        name = rnd.choice(("quantile", "of", "a"))
        value = rnd.choice((0.5, 0.99, 1, 1.0, True, "x", "latency.ttft_seconds"))
        assert with_label(labels, name, value) == make_labels(labels, **{name: value})
    # 1, 1.0 and True hash alike: a memo that mixed them would label a p100 "True"
    assert with_label((), "q", 1) == (("q", "1"),)
    assert with_label((), "q", 1.0) == (("q", "1.0"),)
    assert with_label((), "q", True) == (("q", "True"),)
    odd = (("a", ["not", "hashable"]),)        # labels made by hand: no memo, same answer
    assert with_label(odd, "q", 0.5) == make_labels(odd, q=0.5)   # type: ignore[arg-type]


def test_latest_by_answers_as_latest_does_for_each_value():
    rnd = random.Random(9)
    h = History()
    for t in range(40):
        rs = []
        for g in range(6):
            if rnd.random() < 0.8:
                status = rnd.choice(("ok", "ok", "ok", "stale", "error"))
                value = rnd.random() if status != "error" else None
                rs.append(reading("gpu.sm_clock_max_hz", value, gpu=g % 4, pid=g,
                                  status=Status(status)))
        h.add(snap(float(t), sample("nvml", float(t), rs)))
        got = h.latest_by("gpu.sm_clock_max_hz", "gpu")
        for gpu in ("0", "1", "2", "3", "9"):
            assert got.get(gpu) == h.latest("gpu.sm_clock_max_hz", gpu=gpu), (t, gpu)


def gpu_tick(t: float, name: str, sm_clock: float, cc: str = "9.0") -> Snapshot:
    return snap(t, sample("nvml", t, [
        reading("gpu.info", 1.0, text=name, gpu=0),
        reading("gpu.compute_capability", 1.0, text=cc, gpu=0),
        reading("gpu.cuda_cores", 16896.0, gpu=0),
        reading("gpu.sm_clock_max_hz", sm_clock, gpu=0),
        reading("gpu.mem_bus_width_bits", 5120.0, gpu=0),
        reading("gpu.mem_clock_max_hz", 2.6e9, gpu=0),
    ]))


def peak(frame) -> float | None:
    rs = frame.by_key("gpu.peak_flops")
    assert len(rs) == 1
    return rs[0].value


def test_a_gpus_peak_follows_its_inputs_on_the_tick_they_change():
    """The peaks are memoised on every input: a GPU whose max clock, name or compute
    capability changes gets its new peak that same tick, and the old one back after."""
    pipe = Pipeline()
    # not in the datasheet table: the peak is computed from SMs x max clock x arch rate
    slow = peak(pipe.feed(gpu_tick(1.0, "NVIDIA Hypothetical X", 1.5e9)))
    fast = peak(pipe.feed(gpu_tick(2.0, "NVIDIA Hypothetical X", 1.98e9)))
    assert slow and fast and math.isclose(fast / slow, 1.98 / 1.5)
    ampere = peak(pipe.feed(gpu_tick(3.0, "NVIDIA Hypothetical X", 1.98e9, cc="8.6")))
    assert ampere is not None and math.isclose(ampere, fast / 4)   # GA10x: a quarter
    assert peak(pipe.feed(gpu_tick(4.0, "NVIDIA Hypothetical X", 1.5e9))) == slow
    h100 = peak(pipe.feed(gpu_tick(5.0, "NVIDIA H100 80GB HBM3", 1.5e9)))
    assert h100 is not None and h100 != slow          # the datasheet's, by name
