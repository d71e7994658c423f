"""infertop/compare.py pinned where a mutation run (tools/mutate.py, issue 31 item 8) found
its tests silent: the bootstrap's block length and interval indices, the too-few-points
and steady counts, the unit of a reading, the regressions of ``--fail-on-regression``,
and what the text says.  Fast: synthetic runs, no recording, no CLI."""

from __future__ import annotations

import math
import random

from infertop.compare import (
    ABS_FLOOR,
    NAME_MAX,
    Comparison,
    Moved,
    _finding_dict,
    block_length,
    block_medians,
    compare,
    interval,
    regressions,
    render_text,
)
from infertop.model import Labels, make_labels
from infertop.runsummary import RunSummary

LAT = ("latency.ttft_seconds", make_labels(quantile="0.5"))


def _run(series: dict[tuple[str, Labels], list[float]],
         units: dict[str, str] | None = None, start: float = 1000.0) -> RunSummary:
    r = RunSummary(start=start)
    n = max(len(v) for v in series.values())
    r.ticks, r.end = n, start + n - 1
    for sid, vals in series.items():
        r.series[sid] = [(start + i, v) for i, v in enumerate(vals)]
    r.units = dict(units if units is not None else {k: "s" for k, _ in series})
    return r


def _moved(key: str, before: float, after: float, unit: str = "s", name_labels: Labels = (),
           before_bound: str = "", after_bound: str = "") -> Moved:
    return Moved(key, name_labels, unit, "server", 30, 30, before, after,
                 min(0.0, after - before), max(0.0, after - before), before_bound,
                 after_bound)


# ---- Moved: a median that is only a bucket bound has no size ------------------------------
def test_a_change_from_a_bound_has_a_direction_and_no_size() -> None:
    m = _moved("latency.ttft_seconds", 0.3, 3.75, before_bound="<")
    assert m.bounded is True
    assert m.rel is None
    d = m.to_dict()
    assert d["delta"] is None and d["relative"] is None and d["interval"] is None
    plain = _moved("latency.ttft_seconds", 2.0, 3.0)
    assert plain.bounded is False and plain.rel == 0.5


# ---- the block bootstrap -------------------------------------------------------------------
def test_block_length_of_short_constant_and_stepped_series() -> None:
    assert block_length([]) == 1 and block_length([2.0]) == 1
    assert block_length([5.0] * 10) == 1           # constant: nothing to decorrelate
    # a step at the end: the lag-1 autocorrelation counts every consecutive pair, the last
    # one too (r = 0.46: blocks of ceil(-2 / ln r) = 3 ticks)
    assert block_length([0.0] * 18 + [5.0, 5.0]) == 3
    # a straight ramp forgets nothing in its length: blocks of a third of it
    assert block_length([float(i) for i in range(30)]) == 10


def test_the_interval_uses_the_slower_forgetting_sides_block_length() -> None:
    rng = random.Random(5)
    x, slow = 0.0, []
    for _ in range(60):
        x = 0.95 * x + rng.gauss(0, 1)
        slow.append(x)
    fast = [rng.gauss(0.5, 1) for _ in range(60)]
    b_slow, b_fast = block_length(slow), block_length(fast)
    assert b_slow > b_fast
    got = interval(slow, fast, resamples=200, seed=3)
    assert got == interval(slow, fast, resamples=200, seed=3, block=b_slow)
    assert got != interval(slow, fast, resamples=200, seed=3, block=b_fast)


def test_the_interval_is_read_at_the_confidence_indices_of_the_sorted_differences() -> None:
    rng = random.Random(9)
    before = [rng.gauss(1.0, 0.3) for _ in range(40)]
    after = [rng.gauss(1.2, 0.3) for _ in range(40)]
    lo, hi = interval(before, after, resamples=41, seed=4, block=1)
    again = random.Random(4)
    mb = block_medians(before, again, 41, 1)
    ma = block_medians(after, again, 41, 1)
    diffs = sorted(a - b for a, b in zip(ma, mb))
    # 41 differences: the 2.5 % point is index int(0.025 * 40) = 1, the 97.5 % one
    # ceil(0.975 * 40) = 39
    assert diffs[0] < diffs[1] and diffs[39] < diffs[40]
    assert (lo, hi) == (diffs[1], diffs[39])


# ---- compare ---------------------------------------------------------------------------------
def test_too_few_points_on_either_side_is_not_compared() -> None:
    c = compare(_run({LAT: [1.0, 1.1, 1.0]}), _run({LAT: [2.0] * 20}))
    assert c.too_few == 1 and not c.compared and not c.moved and c.steady == 0
    c = compare(_run({LAT: [2.0] * 20}), _run({LAT: [1.0, 1.1, 1.0]}))
    assert c.too_few == 1 and not c.compared


def test_the_default_number_of_resamples_is_recorded() -> None:
    c = compare(_run({LAT: [1.0] * 10}), _run({LAT: [1.0] * 10}))
    assert c.params["resamples"] == 400


def test_a_move_whose_interval_holds_zero_is_steady() -> None:
    # medians 5 -> 5.3 (6 %, past min_rel) but resamples of 0/10 alternation swing from 0
    # to 10: the interval of the change holds 0
    before = [0.0, 10.0] * 10
    after = [0.0, 10.6] * 10
    c = compare(_run({LAT: before}), _run({LAT: after}))
    assert c.compared == {"latency.ttft_seconds"}
    assert not c.moved and c.steady == 1


def test_the_unit_is_the_after_runs_else_the_before_runs() -> None:
    key = "server.requests_waiting"
    sid = (key, ())
    before, after = [1.0] * 10, [9.0] * 10
    c = compare(_run({sid: before}, {key: "count"}), _run({sid: after}, {}))
    assert [m.unit for m in c.moved] == ["count"]
    c = compare(_run({sid: before}, {key: "count"}), _run({sid: after}, {key: "requests"}))
    assert [m.unit for m in c.moved] == ["requests"]
    c = compare(_run({sid: before}, {}), _run({sid: after}, {}))
    assert [m.unit for m in c.moved] == [""]


def test_a_ratio_change_under_its_floor_is_steady() -> None:
    key = "server.error_ratio"
    sid = (key, ())
    small = ABS_FLOOR["ratio"] / 2
    c = compare(_run({sid: [0.001] * 10}, {key: "ratio"}),
                _run({sid: [0.001 + small] * 10}, {key: "ratio"}))
    assert c.steady == 1 and not c.moved


def test_a_findings_first_raise_is_given_to_a_tenth_of_a_second() -> None:
    d = _finding_dict("MEM-001", make_labels(gpu="0"), "KV full", 1005.1234, 1000.0)
    assert d["first_raised_after_s"] == 5.1
    assert d["subject"] == {"gpu": "0"}
    assert _finding_dict("MEM-001", (), "t", None, 0.0)["first_raised_after_s"] is None


# ---- regressions (compare --fail-on-regression) -----------------------------------------------
def _with(*moved: Moved) -> Comparison:
    c = Comparison()
    c.moved = list(moved)
    return c


def test_what_got_worse_is_a_regression_and_what_got_better_is_not() -> None:
    worse = [_moved("latency.ttft_seconds", 1.0, 2.0),
             _moved("throughput.generation_tokens_per_second", 100.0, 50.0, "tokens/s"),
             _moved("server.error_ratio", 0.01, 0.06, "ratio"),
             _moved("server.rejection_ratio", 0.0, 0.2, "ratio")]
    got = regressions(_with(*worse))
    assert len(got) == 4
    assert got[0].startswith("latency.ttft_seconds +")
    better = [_moved("latency.ttft_seconds", 2.0, 1.0),
              _moved("throughput.generation_tokens_per_second", 50.0, 100.0, "tokens/s"),
              _moved("server.error_ratio", 0.06, 0.01, "ratio"),
              # up, but neither a latency, a throughput nor an error share
              _moved("server.requests_waiting", 1.0, 9.0, "count"),
              _moved("gpu.busy_seconds", 1.0, 9.0)]
    assert regressions(_with(*better)) == []


# ---- the text ---------------------------------------------------------------------------------
def test_the_text_says_when_no_finding_came_went_or_stayed() -> None:
    c = compare(_run({LAT: [1.0] * 10}), _run({LAT: [1.0] * 10}))
    text = render_text(c)
    assert "FINDINGS\n  none in either recording\n" in text


def test_a_name_wider_than_the_column_goes_on_its_own_line() -> None:
    long_labels = make_labels(model="m" * (NAME_MAX + 10))
    c = compare(_run({("latency.ttft_seconds", long_labels): [1.0] * 10}),
                _run({("latency.ttft_seconds", long_labels): [3.0] * 10}))
    assert len(c.moved) == 1
    lines = render_text(c).splitlines()
    i = next(i for i, line in enumerate(lines) if "m" * (NAME_MAX + 10) in line)
    assert lines[i].strip() == f"latency.ttft_seconds{{model={'m' * (NAME_MAX + 10)}}}"
    assert "->" in lines[i + 1] and "m" * 20 not in lines[i + 1]
    assert not math.isnan(c.moved[0].after)
