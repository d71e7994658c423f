"""The dialect mapping's kept plan (infertop/mapping_plan.py) gives exactly the readings of
the full mapping, page after page: values moving (counter resets, NaN, Inf, 1e308, a
percent ratio), series appearing and going, relabels, families added and dropped, a
family written twice, escapes in label values, and a page of an earlier shape coming back.

The oracle ("full") maps the same text with plans neither looked up nor kept; the "warm"
mapping is the scrape's own (plans and promtext's templates kept across pages).  A test
below swaps in a plan check that ignores the shape and shows the comparison then fails:
a stale plan cannot pass it."""

from __future__ import annotations

import math
from contextlib import contextmanager

import pytest
from hypothesis import given
from hypothesis import strategies as st

import infertop.dialects as dialects
from helpers.props import floats, props
from infertop import mapping_plan
from infertop.dialects import readings_from_families
from infertop.promtext import Family, ParseError, PromSample, parse

INST = "10.0.0.1:8000"

# family -> type; names the vLLM table maps (plus one the table does not know)
FAMILIES = {
    "vllm:num_requests_running": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",          # a fraction: >1 is a percent, >100 bad
    "vllm:gpu_cache_usage_perc": "gauge",         # legacy: only without the one above
    "vllm:num_requests_waiting_by_reason": "gauge",   # select reason="deferred"
    "vllm:prompt_tokens": "counter",
    "vllm:request_success": "counter",            # keep finished_reason
    "process_start_time_seconds": "gauge",        # GENERIC, max
    "vllm:time_to_first_token_seconds": "histogram",
    "vllm:iteration_tokens_total": "histogram",   # a histogram and its count as a counter
    "vllm:not_in_the_table": "gauge",
}
ENGINES = ["0", "1", 'a"b', "x\\y", "new\nline", "\x1b[2J"]
MODELS = ["m", "other"]
BOUNDS = ["0.1", "1", "1.0", "2.5", "+Inf", "NaN", "-0.0", "0.0", "1e308"]
VALUES = st.one_of(floats, st.sampled_from([0.0, -0.0, 1e308, -1e308, 0.5, 50.0, 150.0,
                                            math.nan, math.inf, -math.inf]))


def esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def num(v: float) -> str:
    if v != v:
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v)


shapes = st.fixed_dictionaries({
    "families": st.lists(st.sampled_from(sorted(FAMILIES)), min_size=1, max_size=6,
                         unique=True),
    "series": st.lists(st.tuples(st.sampled_from(ENGINES), st.sampled_from(MODELS)),
                       min_size=1, max_size=3, unique=True),
    "bounds": st.lists(st.sampled_from(BOUNDS), min_size=1, max_size=4, unique=True),
    "reasons": st.lists(st.sampled_from(["stop", "length", "capacity", "deferred"]),
                        min_size=1, max_size=2, unique=True),
    "created": st.booleans(),     # counters with their _created samples
    "repeat": st.booleans(),      # the first family written again at the end of the page
})


def sample_lines(shape: dict, family: str, series: list) -> list[str]:
    typ = FAMILIES[family]
    out = []
    for engine, model in series:
        lab = f'engine="{esc(engine)}",model_name="{esc(model)}"'
        if typ == "histogram":
            for le in shape["bounds"]:
                out.append(f'{family}_bucket{{{lab},le="{le}"}} @')
            out += [f"{family}_sum{{{lab}}} @", f"{family}_count{{{lab}}} @"]
        elif family.endswith("by_reason") or family.endswith("success"):
            name = family + ("_total" if typ == "counter" else "")
            label = "reason" if family.endswith("by_reason") else "finished_reason"
            for r in shape["reasons"]:
                out.append(f'{name}{{{lab},{label}="{r}"}} @')
        elif typ == "counter":
            out.append(f"{family}_total{{{lab}}} @")
            if shape["created"]:
                out.append(f"{family}_created{{{lab}}} @")
        else:
            out.append(f"{family}{{{lab}}} @")
    return out


def template(shape: dict) -> list[str]:
    """The page's lines with ``@`` where each value goes."""
    lines: list[str] = []
    for fam in shape["families"]:
        lines += [f"# HELP {fam} help text", f"# TYPE {fam} {FAMILIES[fam]}"]
        lines += sample_lines(shape, fam, shape["series"][:2] if FAMILIES[fam] == "histogram"
                              else shape["series"])
    if shape["repeat"]:   # the same family further down: prometheus_client makes it two
        fam = shape["families"][0]
        lines += [f"# TYPE {fam} {FAMILIES[fam]}"]
        lines += sample_lines(shape, fam, [("9", "m")])
    return lines


def render(lines: list[str], values: list[float]) -> str:
    it = iter(values)
    return "\n".join(line[:-1] + num(next(it)) if line.endswith(" @") else line
                     for line in lines) + "\n"


@contextmanager
def no_plans():
    """The full mapping: no plan looked up, none kept."""
    known, remember = mapping_plan.known, mapping_plan.remember
    mapping_plan.known = lambda shape: None
    mapping_plan.remember = lambda shape, plan: None
    try:
        yield
    finally:
        mapping_plan.known, mapping_plan.remember = known, remember


def digest(text: str, instance: str = INST) -> str:
    """Everything the mapping hands on (readings, meta), as text (NaN bounds compare)."""
    try:
        e = readings_from_families(parse(text), instance)
    except ParseError as err:
        return f"ParseError: {err}"
    return repr((e.dialect, e.family_count, e.readings, e.meta))


def full_digest(text: str, instance: str = INST) -> str:
    with no_plans():
        return digest(text, instance)


class Hits:
    """Counts the pages mapped with a kept plan."""

    def __init__(self) -> None:
        self.n = 0
        self._known = mapping_plan.known

    def __enter__(self) -> Hits:
        def known(shape):
            plan = self._known(shape)
            self.n += plan is not None
            return plan
        mapping_plan.known = known
        return self

    def __exit__(self, *exc) -> None:
        mapping_plan.known = self._known


@props(60)
@given(st.data())
def test_kept_plan_maps_every_page_as_the_full_mapping(data):
    kinds = data.draw(st.lists(shapes, min_size=1, max_size=3), label="shapes")
    order = data.draw(st.lists(st.integers(0, len(kinds) - 1), min_size=2, max_size=8),
                      label="order")
    mapping_plan.clear()
    last: dict[int, list[float]] = {}
    with Hits() as hits:
        for i in order:
            lines = template(kinds[i])
            values = data.draw(st.lists(VALUES, min_size=len(lines), max_size=len(lines)))
            if i in last:   # some lines as they were: promtext hands back their samples
                keep = data.draw(st.lists(st.booleans(), min_size=len(lines),
                                          max_size=len(lines)), label="unchanged")
                values = [b if k else v for v, b, k in zip(values, last[i], keep)]
            last[i] = values
            text = render(lines, values)
            warm = digest(text)
            assert warm == full_digest(text)
    again = sum(a == b for a, b in zip(order, order[1:]))
    if again:   # the property did exercise a kept plan
        assert hits.n >= 1


def _vllm_page(engines=("0",), running=3.0, ttft=(1.0, 2.0, 4.0), extra=""):
    lines = ["# TYPE vllm:num_requests_running gauge"]
    lines += [f'vllm:num_requests_running{{engine="{e}",model_name="m"}} {running}'
              for e in engines]
    lines += ["# TYPE vllm:time_to_first_token_seconds histogram"]
    for e in engines:
        for le, c in zip(("0.1", "1.0", "+Inf"), ttft):
            lines.append(f'vllm:time_to_first_token_seconds_bucket'
                         f'{{engine="{e}",le="{le}",model_name="m"}} {c}')
        lines.append(f'vllm:time_to_first_token_seconds_count{{engine="{e}",model_name="m"}} '
                     f'{ttft[-1]}')
        lines.append(f'vllm:time_to_first_token_seconds_sum{{engine="{e}",model_name="m"}} 1.5')
    return "\n".join(lines) + "\n" + extra


def _series(text: str) -> set:
    e = readings_from_families(parse(text), INST)
    return {(r.key, r.label("engine"), r.value) for r in e.readings}


def test_a_series_that_appears_or_goes_is_seen_the_same_page():
    mapping_plan.clear()
    one, two = _vllm_page(("0",)), _vllm_page(("0", "1"))
    for text in (one, one, two, two, one, one):
        assert digest(text) == full_digest(text)
    assert ("server.requests_running", "1", 3.0) in _series(two)
    assert ("server.requests_running", "1", 3.0) not in _series(one)


def test_values_move_under_a_kept_plan_counter_reset_nan_and_inf():
    mapping_plan.clear()
    pages = [_vllm_page(running=v, ttft=t) for v, t in [
        (3.0, (1.0, 2.0, 4.0)), (5.0, (2.0, 3.0, 9.0)), (0.0, (0.0, 0.0, 0.0)),   # a reset
        (math.nan, (1.0, math.inf, 4.0)), (1e308, (1.0, 2.0, 1e308)),
        (-0.0, (3.0, 2.0, 4.0))]]                    # counts falling: an invalid histogram
    with Hits() as hits:
        for text in pages:
            assert digest(text) == full_digest(text)
    assert hits.n == len(pages) - 1
    last = readings_from_families(parse(pages[3]), INST).readings
    ttft = next(r for r in last if r.key == "latency.ttft_seconds")
    assert ttft.value is None and "bucket le=1.0 is +Inf" in ttft.reason


def test_a_relabel_and_a_shape_coming_back_map_afresh():
    mapping_plan.clear()
    a = _vllm_page(("0",))
    b = a.replace('model_name="m"', 'model_name="renamed"')
    for text in (a, a, b, b, a):
        assert digest(text) == full_digest(text)
    models = {r.label("model") for r in readings_from_families(parse(b), INST).readings
              if r.key == "server.requests_running"}
    assert models == {"renamed"}


def test_samples_renamed_under_the_same_labels_map_afresh():
    """Same families, same number of samples, labels equal: only the samples' names moved
    (a histogram's _sum and _count lines swapped).  The kept plan must not be used."""
    mapping_plan.clear()
    head = "# TYPE vllm:time_to_first_token_seconds histogram\n"
    total = 'vllm:time_to_first_token_seconds_count{engine="0"} 4\n'
    summed = 'vllm:time_to_first_token_seconds_sum{engine="0"} 1.5\n'
    one, two = head + total + summed, head + summed + total.replace(" 4", " 8")
    for text in (one, one, two, two, one):
        assert digest(text) == full_digest(text)
    ttft = next(r for r in readings_from_families(parse(two), INST).readings
                if r.key == "latency.ttft_seconds")
    assert (ttft.value, ttft.hist_sum) == (8.0, 1.5)


def test_a_family_whose_type_moved_maps_afresh():
    """Same samples, the TYPE line says summary instead of histogram: a histogram rule
    reads only a histogram, so the latency reading goes."""
    mapping_plan.clear()
    body = ('vllm:time_to_first_token_seconds_count{engine="0"} 4\n'
            'vllm:time_to_first_token_seconds_sum{engine="0"} 1.5\n')
    hist = "# TYPE vllm:time_to_first_token_seconds histogram\n" + body
    summ = "# TYPE vllm:time_to_first_token_seconds summary\n" + body
    for text in (hist, hist, summ, summ, hist):
        assert digest(text) == full_digest(text)
    assert not any(r.key == "latency.ttft_seconds"
                   for r in readings_from_families(parse(summ), INST).readings)


def test_plans_are_per_instance():
    mapping_plan.clear()
    text = _vllm_page()
    for inst in ("a:1", "b:2", "a:1", "b:2"):
        assert digest(text, inst) == full_digest(text, inst)
        e = readings_from_families(parse(text), inst)
        assert {r.label("instance") for r in e.readings} == {inst}


def test_a_stale_plan_fails_the_comparison(monkeypatch):
    """The check the property relies on: a plan used for a page of another shape (here:
    a shape check that says yes to anything) gives other readings, and the comparison
    sees it.  With the real check the same pages compare equal."""
    one, two = _vllm_page(("0",)), _vllm_page(("0", "1"))
    relabel = one.replace('engine="0"', 'engine="7"')
    mapping_plan.clear()
    for text in (one, two, relabel):
        assert digest(text) == full_digest(text)
    monkeypatch.setattr(mapping_plan.Shape, "same", lambda self, other: True)
    mapping_plan.clear()
    assert digest(one) == full_digest(one)
    assert digest(two) != full_digest(two)           # engine 1 missing: stale plan
    mapping_plan.clear()
    assert digest(one) == full_digest(one)
    assert digest(relabel) != full_digest(relabel)   # old engine label: stale plan


def test_labels_the_caller_may_edit_keep_no_plan():
    """A plain dict of labels may be edited in place by its owner between two calls:
    the plan would compare the edited dict with itself.  No plan is kept for such a page."""
    mapping_plan.clear()
    lab = {"model_name": "m", "engine": "0"}
    fam = Family("vllm:num_requests_running", "gauge", "",
                 [PromSample("vllm:num_requests_running", lab, 3.0, None)])
    first = readings_from_families([fam], INST).readings
    lab["engine"] = "1"                                  # same dict object, edited
    second = readings_from_families([fam], INST).readings
    key = "server.requests_running"
    assert {r.label("engine") for r in first if r.key == key} == {"0"}
    assert {r.label("engine") for r in second if r.key == key} == {"1"}


def test_the_plan_follows_the_registered_dialects(monkeypatch):
    """A kind registered between two scrapes (registry.dialects() is a new mapping) may
    read the page otherwise: the kept plan is not used."""
    mapping_plan.clear()
    text = _vllm_page()
    readings_from_families(parse(text), INST)
    with Hits() as hits:
        readings_from_families(parse(text), INST)
        assert hits.n == 1
        fresh = dict(dialects.registry.dialects())
        monkeypatch.setattr(dialects.registry, "dialects", lambda: fresh)
        readings_from_families(parse(text), INST)
        assert hits.n == 1


@pytest.mark.parametrize("bounds", [("1", "1.0", "+Inf"), ("-0.0", "0.0", "+Inf"),
                                    ("NaN", "1", "+Inf")])
def test_histograms_whose_bounds_repeat_or_are_nan(bounds):
    """Two samples of one bound are summed in page order; a NaN bound is its own bucket:
    such histograms take the op-by-op path, still equal to the full mapping."""
    mapping_plan.clear()
    for counts in ((1.0, 2.0, 3.0), (2.0, 2.0, 5.0), (1.0, math.nan, 5.0)):
        lines = ["# TYPE vllm:time_to_first_token_seconds histogram"]
        lines += [f'vllm:time_to_first_token_seconds_bucket{{le="{le}"}} {num(c)}'
                  for le, c in zip(bounds, counts)]
        lines += [f"vllm:time_to_first_token_seconds_count {num(counts[-1])}"]
        text = "\n".join(lines) + "\n"
        assert digest(text) == full_digest(text)


def test_a_series_read_from_the_same_samples_keeps_its_reading_and_a_moved_one_not():
    """Unchanged lines: promtext hands back the same sample objects and the series keeps
    the Reading made for the last page.  A line whose value moves (even 0.0 -> -0.0,
    equal as numbers) gives a new one."""
    mapping_plan.clear()
    a = _vllm_page(running=0.0)
    b = _vllm_page(running=-0.0)
    first = readings_from_families(parse(a), INST).readings
    again = readings_from_families(parse(a), INST).readings
    assert all(x is y for x, y in zip(first, again))
    moved = readings_from_families(parse(b), INST).readings
    running = [r for r in moved if r.key == "server.requests_running"]
    assert [repr(r.value) for r in running] == ["-0.0"]
    assert next(r for r in moved if r.key == "latency.ttft_seconds") is \
        next(r for r in first if r.key == "latency.ttft_seconds")
    assert digest(b) == full_digest(b)


def test_a_percent_note_is_said_on_every_page_of_a_kept_series():
    """kv usage reported as a percent: the note goes into every page's meta, also when
    the series' reading is the last page's."""
    mapping_plan.clear()
    text = ('# TYPE vllm:kv_cache_usage_perc gauge\n'
            'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 50.0\n')
    for _ in range(3):
        e = readings_from_families(parse(text), INST)
        assert any("reported as a percent" in n for n in e.meta.notes)
        assert [r.value for r in e.readings if r.key == "kv.usage_ratio"] == [0.5]


def test_extras_labels_follow_the_instance_the_model_and_edited_dicts():
    """Ctx.reading_labels remembers a series' labels by its FrozenLabels: another
    instance or model gives other labels; a plain dict edited in place is not remembered."""
    text = ('# TYPE vllm:cache_config_info gauge\n'
            'vllm:cache_config_info{block_size="16",engine="0",model_name="m"} 1\n'
            '# TYPE vllm:num_requests_running gauge\n'
            'vllm:num_requests_running{engine="0",model_name="m"} 1\n')

    def config_labels(t: str, inst: str) -> set:
        return {r.labels for r in readings_from_families(parse(t), inst).readings
                if r.key == "kv.config"}

    for inst in ("a:1", "b:2", "a:1"):
        assert {dict(lab)["instance"] for lab in config_labels(text, inst)} == {inst}
    renamed = text.replace('model_name="m"', 'model_name="n"')
    assert {dict(lab)["model"] for lab in config_labels(renamed, INST)} == {"n"}
    lab = {"block_size": "16", "engine": "0", "model_name": "m"}
    fam = Family("vllm:cache_config_info", "gauge", "",
                 [PromSample("vllm:cache_config_info", lab, 1.0, None)])
    def engines() -> set:
        return {dict(r.labels)["engine"] for r in readings_from_families([fam], INST).readings
                if r.key == "kv.config"}

    assert engines() == {"0"}
    lab["engine"] = "5"
    assert engines() == {"5"}
