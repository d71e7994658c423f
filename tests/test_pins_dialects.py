"""infertop/dialects.py pinned where a mutation run (tools/mutate.py, issue 31 item 8) found
its tests silent: the cardinality cap's count and worst family, the first model label
that a sample carries, a dialect table with no kinds, the overflow message's series count
and a histogram page without ``_count``."""

from __future__ import annotations

import math

import pytest

from infertop import dialects
from infertop.model import Kind, Status
from infertop.promtext import Family, FrozenLabels, PromSample
from infertop.servers import registry
from infertop.servers.mapping import Acc


def _family(name: str, n: int, **labels: str) -> Family:
    return Family(name, "gauge", "", [PromSample(name, FrozenLabels(i=str(i), **labels),
                                                 1.0, None) for i in range(n)])


def test_a_dialect_table_without_kinds_names_no_dialect(monkeypatch: pytest.MonkeyPatch) -> None:
    fams = [_family("vllm:num_requests_running", 1)]
    assert dialects.detect_dialect(fams) == "vllm"
    monkeypatch.setattr(registry, "dialects", lambda: {})
    assert dialects.detect_dialect(fams) == "unknown"
    assert dialects.detect_dialect([]) == "unknown"


def test_the_cap_counts_what_it_drops_and_names_the_family_that_lost_most(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dialects, "MAX_SERIES_PER_FAMILY", 4)
    monkeypatch.setattr(dialects, "MAX_SERIES_PER_PAGE", 1000)
    by_name = {"a": _family("a", 3), "b": _family("b", 6), "c": _family("c", 14),
               "d": _family("d", 9)}
    assert dialects._cap_series(by_name) == (2 + 10 + 5, "c")
    assert [len(f.samples) for f in by_name.values()] == [3, 4, 4, 4]
    # nothing over the caps: nothing dropped, no family named
    small = {"a": _family("a", 3), "b": _family("b", 4)}
    assert dialects._cap_series(small) == (0, "")
    # one sample over: that family is named
    assert dialects._cap_series({"a": _family("a", 5)}) == (1, "a")


def test_a_sample_with_two_model_labels_gives_the_dialects_first() -> None:
    triton = registry.dialects()["triton"]
    assert triton.model_labels[:2] == ("model", "model_name")
    fam = _family("nv_inference_request_success", 1, model="first", model_name="second")
    models, engines = dialects._models_and_engines(triton, {fam.name: fam})
    assert models == ["first"] and engines == []


def test_an_overflowing_sum_says_how_many_series_it_summed() -> None:
    a = Acc(Kind.GAUGE, "sum")
    dialects._add(a, 1.5e308)
    dialects._add(a, 1.5e308)
    r, note = dialects._finish_one("server.requests_running", (), a, [])
    assert r.status is Status.ERROR and r.value is None
    assert r.reason == "invalid value: the sum of 2 series overflows"
    assert note == ""


def test_a_histogram_without_its_count_counts_its_last_bucket() -> None:
    a = Acc(Kind.HISTOGRAM, "sum", buckets={0.1: 2.0, 1.0: 5.0, math.inf: 7.0})
    r, _ = dialects._finish_one("latency.ttft_seconds", (), a, [])
    assert r.ok and r.value == 7.0
    assert r.buckets == ((0.1, 2.0), (1.0, 5.0), (math.inf, 7.0))
    # no +Inf bucket: the last bound's count is the count, and +Inf is added with it
    b = Acc(Kind.HISTOGRAM, "sum", buckets={0.1: 2.0, 1.0: 5.0})
    r, _ = dialects._finish_one("latency.ttft_seconds", (), b, [])
    assert r.value == 5.0 and r.buckets == ((0.1, 2.0), (1.0, 5.0), (math.inf, 5.0))


def test_a_histogram_page_without_count_lines_still_maps() -> None:
    page = ("# TYPE vllm:time_to_first_token_seconds histogram\n"
            'vllm:time_to_first_token_seconds_bucket{model_name="m",le="0.1"} 2\n'
            'vllm:time_to_first_token_seconds_bucket{model_name="m",le="+Inf"} 7\n'
            'vllm:time_to_first_token_seconds_sum{model_name="m"} 3.5\n')
    ex = dialects.readings_from_exposition(page, "h:1")
    (r,) = [x for x in ex.readings if x.key == "latency.ttft_seconds"]
    assert r.ok and r.value == 7.0 and r.hist_sum == 3.5
