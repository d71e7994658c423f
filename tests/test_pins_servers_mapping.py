"""infertop/servers/mapping.py (the dialect tables' vocabulary) pinned piece by piece
(tools/mutate.py, issue 31 item 8): ``rule``'s arguments, a reading's labels (engine,
the first model label, the page's model), the bounded label memo, ``gauge_configs`` and
``number_text``.  Direct calls on a small made-up dialect."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from infertop.model import Kind, make_labels
from infertop.promtext import Family, FrozenLabels, PromSample
from infertop.servers import mapping
from infertop.servers.mapping import (
    Ctx,
    Dialect,
    FamilyMap,
    gauge_configs,
    number_text,
    rule,
)

D = Dialect("toy", ("toy:",), "engine", ("model_name", "model"), ())


@pytest.fixture(autouse=True)
def _fresh_memo() -> Iterator[None]:
    mapping._LABELS.clear()
    yield
    mapping._LABELS.clear()


def _ctx(by_name: dict[str, Family] | None = None, model: str = "") -> Ctx:
    return Ctx(D, "h:1", by_name or {}, model)


def test_rule_turns_dict_arguments_into_pairs_and_checks_the_key() -> None:
    r = rule("toy:a", "server.requests_running", select={"state": "run"},
             keep=(("gpu", "gpu"),), const={"reason": "x"})
    assert r == FamilyMap(("toy:a",), "server.requests_running", select=(("state", "run"),),
                          keep=(("gpu", "gpu"),), const=(("reason", "x"),))
    assert rule(("toy:a", "toy:b"), "server.requests_running").families == ("toy:a", "toy:b")
    with pytest.raises(AssertionError):
        rule("toy:a", "no.such_key")


def test_a_readings_labels_take_the_engine_and_the_first_model_label() -> None:
    ctx = _ctx(model="page-model")
    assert ctx.labels({"engine": "3", "model_name": "a", "model": "b"}) == {
        "instance": "h:1", "engine": "3", "model": "a"}
    assert ctx.labels({"model": "b"}) == {"instance": "h:1", "model": "b"}
    assert ctx.labels({}, name="x") == {"instance": "h:1", "model": "page-model", "name": "x"}
    assert _ctx().labels({}) == {"instance": "h:1"}
    no_engine = Ctx(Dialect("plain", ("p_",), "", (), ()), "h:2", {}, "")
    assert no_engine.labels({"engine": "3", "": "x"}) == {"instance": "h:2"}


def test_frozen_labels_are_mapped_once_and_plain_dicts_every_time() -> None:
    ctx = _ctx()
    src = FrozenLabels(engine="0", model_name="m")
    first = ctx.reading_labels(src, name="n")
    assert first == make_labels({"instance": "h:1", "engine": "0", "model": "m", "name": "n"})
    assert ctx.reading_labels(src, name="n") is first       # the memo's own tuple
    assert len(mapping._LABELS) == 1
    other = FrozenLabels(engine="1")
    second = ctx.reading_labels(other)
    assert ctx.reading_labels(src, name="n") is first       # a second entry kept both
    assert ctx.reading_labels(other) is second
    assert len(mapping._LABELS) == 2
    plain = {"engine": "0"}
    assert ctx.reading_labels(plain) == make_labels({"instance": "h:1", "engine": "0"})
    assert len(mapping._LABELS) == 2                         # a dict may be edited: not kept


def test_the_label_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mapping, "_LABELS_MAX", 3)
    ctx = _ctx()
    kept = [FrozenLabels(engine=str(i)) for i in range(10)]
    for i, src in enumerate(kept):
        assert ctx.reading_labels(src) == make_labels({"instance": "h:1", "engine": str(i)})
        assert len(mapping._LABELS) <= 3


def _gauge(name: str, *samples: tuple[dict[str, str], float]) -> Family:
    return Family(name, "gauge", "", [PromSample(name, FrozenLabels(lab), v, None)
                                      for lab, v in samples])


def test_gauge_configs_gives_one_fact_per_engine_of_the_wanted_block_type() -> None:
    fams = {"toy:blocks": _gauge("toy:blocks",
                                 ({"engine": "0", "tp": "0", "kv_cache_block_type": "gpu"}, 512.0),
                                 ({"engine": "0", "tp": "1", "kv_cache_block_type": "gpu"}, 512.0),
                                 ({"engine": "1", "kv_cache_block_type": "gpu"}, 256.0),
                                 ({"engine": "2", "kv_cache_block_type": "cpu"}, 9.0)),
            "toy:ratio": _gauge("toy:ratio", ({"engine": "0"}, 0.9),
                                ({"engine": "1", "kv_cache_block_type": "gpu"}, 0.8))}
    ctx = _ctx(fams)
    gauge_configs(ctx, [("toy:missing", "absent", None),
                        ("toy:blocks", "num_gpu_blocks", "gpu"),
                        ("toy:ratio", "gpu_memory_utilization", None)])
    got = [(r.label("name"), r.label("engine"), r.text, r.value, r.kind) for r in ctx.extra]
    assert got == [("num_gpu_blocks", "0", "512", 1.0, Kind.INFO),
                   ("num_gpu_blocks", "1", "256", 1.0, Kind.INFO),
                   ("gpu_memory_utilization", "0", "0.9", 1.0, Kind.INFO),
                   ("gpu_memory_utilization", "1", "0.8", 1.0, Kind.INFO)]


def test_number_text_writes_whole_numbers_without_a_point() -> None:
    assert number_text(512.0) == "512"
    assert number_text(0.9) == "0.9"
    assert number_text(2.5) == "2.5"
    assert number_text(float("inf")) == "inf"
    assert number_text(float("nan")) == "nan"
