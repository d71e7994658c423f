"""infertop/mapping_plan.py pinned piece by piece (tools/mutate.py, issue 31 item 8): every
field of a page's shape counts, a plan groups its operations per series, a histogram is
read in C only when each bound is fed once, and the kept plans are bounded and refused
for labels a caller may edit.  Direct calls, no page parsing."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from infertop import mapping_plan
from infertop.mapping_plan import (
    ADD,
    BUCKET,
    HCOUNT,
    HSUM,
    MAX_PLANS,
    Plan,
    Shape,
    shape_of,
)
from infertop.promtext import Family, FrozenLabels, PromSample

DIALECTS: dict[str, Any] = {"vllm": object()}


@pytest.fixture(autouse=True)
def _no_kept_plans() -> Iterator[None]:
    mapping_plan.clear()
    yield
    mapping_plan.clear()


def _shape(instance: str = "h:1", **change: Any) -> Shape:
    s = Shape(instance, DIALECTS, ("a", "b"), ("gauge", "counter"), (1, 1),
              ["a", "b_total"], [FrozenLabels(x="1"), FrozenLabels(y="2")])
    return replace(s, **change)


def _plan() -> Plan:
    return Plan(None, ["m"], ["0"], [("k", "gauge", "max", False)], [(0, ADD, 0, 1.0)])


# ---- the shape ---------------------------------------------------------------------------
def test_every_part_of_the_shape_tells_two_pages_apart() -> None:
    assert _shape().same(_shape()) is True
    for change in ({"instance": "h:2"}, {"dialects": dict(DIALECTS)},
                   {"families": ("a", "c")}, {"types": ("gauge", "gauge")},
                   {"sizes": (1, 2)}, {"names": ["a", "b"]},
                   {"labels": [FrozenLabels(x="1"), FrozenLabels(y="3")]}):
        assert _shape().same(_shape(**change)) is False, change


def test_shape_of_reads_a_pages_families_and_samples() -> None:
    lab = FrozenLabels(model="m")
    fams = [Family("g", "gauge", "", [PromSample("g", lab, 1.0, None)]),
            Family("c", "counter", "", [PromSample("c_total", lab, 2.0, None),
                                        PromSample("c_created", lab, 3.0, None)])]
    samples = [s for f in fams for s in f.samples]
    got = shape_of(fams, samples, "h:1", DIALECTS)
    assert got == Shape("h:1", DIALECTS, ("g", "c"), ("gauge", "counter"), (1, 2),
                        ["g", "c_total", "c_created"], [lab, lab, lab])
    assert got.dialects is DIALECTS


# ---- the plan -----------------------------------------------------------------------------
def test_a_plan_groups_the_operations_per_series() -> None:
    accs = [("gpu.a", "gauge", "max", False), ("lat", "histogram", "sum", False),
            ("gpu.b", "gauge", "sum", True)]
    ops = [(0, ADD, 3, 1.0), (1, BUCKET, 5, (0.5,)), (0, ADD, 4, 2.0), (1, HCOUNT, 6, None)]
    p = Plan("d", ["m1", "m2"], ["0", "1"], accs, ops, plain=True)
    assert p.keys == ("gpu.a", "lat", "gpu.b")
    assert (p.models, p.engines, p.plain, p.tail, p.shape) == (["m1", "m2"], ["0", "1"], True,
                                                                None, None)
    assert p.last == [None, None, None]
    kind, agg, frac, mine, hist, positions = p.series[0]
    assert (kind, agg, frac) == ("gauge", "max", False)
    assert mine == ((ADD, 3, 1.0), (ADD, 4, 2.0)) and hist is None and positions == (3, 4)
    assert p.series[1][3] == ((BUCKET, 5, (0.5,)), (HCOUNT, 6, None))
    assert p.series[1][4] == ((5,), (0.5,), (), (6,))
    assert p.series[2][2] is True and p.series[2][3] == () and p.series[2][4] is None


def test_a_histogram_is_read_by_position_only_with_one_sample_per_bound() -> None:
    h = mapping_plan._histogram
    assert h([]) is None
    # buckets sorted by bound; _sum with its scale; _count positions
    assert h([(BUCKET, 7, (1.0,)), (BUCKET, 2, (0.1,)), (HSUM, 9, 0.001),
              (HCOUNT, 8, None)]) == ((2, 7), (0.1, 1.0), ((9, 0.001),), (8,))
    assert h([(HSUM, 1, 1.0), (HCOUNT, 2, None)]) == ((), (), ((1, 1.0),), (2,))
    # a scalar operation among them: not a histogram read in C
    assert h([(BUCKET, 1, (0.1,)), (ADD, 2, 1.0)]) is None
    assert h([(ADD, 2, 1.0)]) is None
    # two samples of one bound (summed in order), or a NaN bound
    assert h([(BUCKET, 1, (0.1,)), (BUCKET, 2, (0.1,))]) is None
    assert h([(BUCKET, 1, (float("nan"),)), (BUCKET, 2, (0.1,))]) is None


# ---- kept plans ------------------------------------------------------------------------------
def test_a_plan_is_known_for_its_shape_only() -> None:
    plan = _plan()
    assert mapping_plan.known(_shape()) is None
    mapping_plan.remember(_shape(), plan)
    assert plan.shape == _shape()
    assert mapping_plan.known(_shape()) is plan
    assert mapping_plan.known(_shape(sizes=(1, 2))) is None
    assert mapping_plan.known(_shape("h:2")) is None


def test_a_kept_plan_without_its_shape_is_not_known() -> None:
    plan = _plan()
    mapping_plan.remember(_shape(), plan)
    plan.shape = None
    assert mapping_plan.known(_shape()) is None


def test_labels_a_caller_may_edit_keep_no_plan_and_drop_the_old_one() -> None:
    mapping_plan.remember(_shape(), _plan())
    mapping_plan.remember(_shape(labels=[{"x": "1"}, FrozenLabels(y="2")]), _plan())
    assert mapping_plan.known(_shape()) is None
    assert "h:1" not in mapping_plan._PLANS
    # a page of no samples at all is plain enough to keep
    empty = _shape(names=[], labels=[], sizes=(0, 0))
    mapping_plan.remember(empty, p := _plan())
    assert mapping_plan.known(empty) is p


def test_the_kept_plans_are_bounded_per_instance() -> None:
    for i in range(MAX_PLANS):
        mapping_plan.remember(_shape(f"h:{i}"), _plan())
    assert len(mapping_plan._PLANS) == MAX_PLANS
    # the last shape of a known instance replaces its plan: nothing else is forgotten
    again = _plan()
    mapping_plan.remember(_shape("h:0", sizes=(1, 2)), again)
    assert len(mapping_plan._PLANS) == MAX_PLANS
    assert mapping_plan.known(_shape("h:0", sizes=(1, 2))) is again
    # one instance more than the bound: the kept plans start over
    mapping_plan.remember(_shape("new"), _plan())
    assert list(mapping_plan._PLANS) == ["new"]
