"""vLLM 0.32's queue, admission, sleep and prompt-source families (issue 25, item 1), read
from the real pages captured on the recipes in scripts/realserver and from copies of them edited to
the states a busy or sleeping server reports."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infertop.dialects import readings_from_exposition
from infertop.model import Kind, Reading

METRICS = Path(__file__).parent / "fixtures" / "metrics"
INST = "127.0.0.1:8000"
LAB = {"engine": "0", "model": "tiny-llama"}


def page(name: str = "vllm-0.32-busy.prom", /, **edits: float | str) -> str:
    """The real page, with some samples' values replaced (sample line prefix -> value)."""
    text = (METRICS / name).read_text()
    for prefix, value in edits.items():
        pat = re.compile("^(" + re.escape(prefix) + r") \S+$", re.M)

        def replaced(m: re.Match[str], value: float | str = value) -> str:
            return f"{m.group(1)} {value}"
        text, n = pat.subn(replaced, text)
        assert n == 1, prefix
    return text


def readings(text: str, key: str) -> dict[tuple, Reading]:
    e = readings_from_exposition(text, INST)
    return {tuple(sorted((k, v) for k, v in r.labels if k != "instance")): r
            for r in e.readings if r.key == key}


def test_real_busy_page_reads_every_new_family():
    text = page()
    deferred = readings(text, "server.requests_deferred")
    assert [r.value for r in deferred.values()] == [0.0]
    assert dict(next(iter(deferred))) == LAB
    sleep = readings(text, "server.sleep_level")
    assert [(dict(k), r.value) for k, r in sleep.items()] == [(LAB, 0.0)]   # awake
    by_src = {dict(k)["source"]: r.value for k, r in
              readings(text, "kv.prompt_tokens_by_source_total").items()}
    assert by_src == {"local_compute": 1754.0, "local_cache_hit": 0.0,
                      "external_kv_transfer": 0.0}
    cached = {dict(k)["source"] for k in readings(text, "kv.cached_tokens_by_source_total")}
    assert cached == {"device", "host", "p2p", "disk", "external_unspecified"}
    assert [r.value for r in readings(text, "kv.external_prefix_cache_queries_total").values()] \
        == [0.0]
    # admission rejections carry no engine label on the page: none is made up
    rej = readings(text, "server.admission_rejections_total")
    assert {k: r.value for k, r in rej.items()} == {
        (("model", "tiny-llama"), ("reason", "max_num_queued_reqs")): 0.0,
        (("model", "tiny-llama"), ("reason", "max_num_queued_tokens")): 0.0}
    [hist] = readings(text, "request.prefill_computed_tokens").values()
    assert hist.kind is Kind.HISTOGRAM and (hist.value, hist.hist_sum) == (138.0, 1658.0)


def test_idle_page_reads_too():
    text = page("vllm-0.32-idle.prom")
    assert readings(text, "server.requests_deferred")
    assert readings(text, "server.admission_rejections_total")
    assert [r.value for r in readings(text, "server.sleep_level").values()] == [0.0]


P = 'vllm:engine_sleep_state{engine="0",model_name="tiny-llama",sleep_state="%s"}'


@pytest.mark.parametrize("awake,offloaded,discarded,level", [
    (0, 1, 0, 1.0), (0, 0, 1, 2.0), (0, 1, 1, 2.0), (1, 0, 0, 0.0)])
def test_sleep_level_from_the_one_hot_states(awake, offloaded, discarded, level):
    text = page(**{P % "awake": awake, P % "weights_offloaded": offloaded,
                   P % "discard_all": discarded})
    assert [r.value for r in readings(text, "server.sleep_level").values()] == [level]


def test_no_state_flagged_is_not_read_as_awake():
    """A page that flags no state (or NaN) says nothing: no reading, not 'awake'."""
    text = page(**{P % "awake": "NaN", P % "weights_offloaded": "0", P % "discard_all": "0"})
    assert readings(text, "server.sleep_level") == {}


def test_deferred_part_of_the_queue():
    w = 'vllm:num_requests_waiting{engine="0",model_name="tiny-llama"}'
    r = 'vllm:num_requests_waiting_by_reason{engine="0",model_name="tiny-llama",reason="%s"}'
    text = page(**{w: 7, r % "capacity": 2, r % "deferred": 5})
    assert [x.value for x in readings(text, "server.requests_deferred").values()] == [5.0]
    assert [x.value for x in readings(text, "server.requests_waiting").values()] == [7.0]
