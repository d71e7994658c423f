"""Pins for the Diagnoser (infertop/rules/engine.py) where a mutation run found none
(issue 31 item 8): cause-before-symptom ordering (``cause_first``, ``explains``) as the
timeline, compare and report use it, and the engine's own bookkeeping.
"""

from __future__ import annotations

from helpers.rulekit import SERVER, Feed, tick
from infertop.config import config_from_dict
from infertop.findings import Finding, Severity
from infertop.model import Labels, Layer, Status
from infertop.rules.base import FACT_MAX_AGE
from infertop.rules.engine import Diagnoser, cause_first, explains

SRV: Labels = (("engine", "0"),)
Item = tuple[str, Labels, float, float]


def _codes(items: list[Item], spans: bool = False) -> list[str]:
    got = cause_first(items, lambda x: (x[0], x[1]),
                      (lambda x: (x[2], x[3])) if spans else None)
    return [x[0] for x in got]


def test_explains_is_the_table_not_its_complement() -> None:
    assert explains("MEM-001", "DEC-001") and explains("PAR-004", "DEC-001")
    assert not explains("MEM-001", "DEC-004") and not explains("DEC-001", "MEM-001")


def test_a_symptom_moves_right_after_its_cause() -> None:
    items: list[Item] = [("DEC-001", SRV, 0, 10), ("HW-006", (), 0, 10),
                         ("MEM-001", SRV, 0, 10)]
    assert _codes(items) == ["HW-006", "MEM-001", "DEC-001"]


def test_an_unrelated_item_is_no_cause() -> None:
    """The loop goes past items that do not explain the symptom to the one that does."""
    items: list[Item] = [("DEC-001", SRV, 0, 10), ("HW-006", (), 0, 10),
                         ("KRN-001", SRV, 0, 10), ("SCH-002", SRV, 0, 10)]
    assert _codes(items) == ["HW-006", "KRN-001", "SCH-002", "DEC-001"]


def test_a_cause_on_another_server_is_no_cause() -> None:
    items: list[Item] = [("DEC-001", SRV, 0, 10), ("MEM-001", (("engine", "1"),), 0, 10)]
    assert _codes(items) == ["DEC-001", "MEM-001"]


def test_with_spans_only_a_cause_that_overlaps_in_time_explains() -> None:
    before: list[Item] = [("DEC-001", SRV, 20, 30), ("MEM-001", SRV, 0, 10)]
    after: list[Item] = [("DEC-001", SRV, 0, 10), ("MEM-001", SRV, 20, 30)]
    overlap: list[Item] = [("DEC-001", SRV, 5, 30), ("MEM-001", SRV, 0, 10)]
    assert _codes(before, spans=True) == ["DEC-001", "MEM-001"]
    assert _codes(after, spans=True) == ["DEC-001", "MEM-001"]
    assert _codes(overlap, spans=True) == ["MEM-001", "DEC-001"]
    # touching ends overlap
    touch: list[Item] = [("DEC-001", SRV, 10, 30), ("MEM-001", SRV, 0, 10)]
    assert _codes(touch, spans=True) == ["MEM-001", "DEC-001"]


def test_every_item_comes_out_once() -> None:
    items: list[Item] = [("DEC-001", SRV, 0, 10), ("DEC-002", SRV, 0, 10),
                         ("MEM-001", SRV, 0, 10), ("SCH-001", SRV, 0, 10)]
    got = _codes(items)
    assert got == ["MEM-001", "DEC-001", "DEC-002", "SCH-001"]


def test_a_delay_met_exactly_at_its_slack_raises_on_that_tick() -> None:
    """raise_after 1.1 s with TICK_SLACK 0.1: four ticks 0.25 s apart (1.0 s held, exactly
    1.1 - 0.1) are enough; a strict ``<`` is what makes "met to within the slack"."""
    cfg = config_from_dict({"rules": {"HW-005": {"raise_after": 1.1}}})
    f = Feed(cfg, dt=0.25)
    f.run(lambda: {"gpu.lost": {"gpu=0": 1}}, 4)      # held 0.75 s
    assert not f.active("HW-005")
    f.tick({"gpu.lost": {"gpu=0": 1}})                # held 1.0 s
    assert [x.severity for x in f.active("HW-005")] == [Severity.CRIT]


def test_a_delay_met_exactly_at_its_slack_clears_on_that_tick() -> None:
    cfg = config_from_dict({"rules": {"HW-005": {"raise_after": 0.0, "clear_after": 1.1}}})
    f = Feed(cfg, dt=0.25)
    f.run(lambda: {"gpu.lost": {"gpu=0": 1}}, 3)
    assert f.active("HW-005")
    f.run(lambda: {"gpu.lost": {"gpu=0": 0}}, 4)      # healthy for 0.75 s
    assert f.active("HW-005")
    f.tick({"gpu.lost": {"gpu=0": 0}})                # healthy for 1.0 s
    assert not f.active("HW-005")
    assert len(f.events("HW-005", "raised")) == len(f.events("HW-005", "cleared")) == 1


def _finding(code: str, layer: Layer, sev: Severity, subject: Labels) -> Finding:
    return Finding(code, layer, sev, f"{code} title", (), f"{code} remedy", 0.0, subject)


def test_the_chain_keeps_the_symptom_after_its_cause_naming_it() -> None:
    dec = _finding("DEC-001", Layer.DECODING, Severity.CRIT, SRV)
    mem = _finding("MEM-001", Layer.MEMORY, Severity.WARN, SRV)
    hot = _finding("HW-006", Layer.HARDWARE, Severity.WARN, (("gpu", "0"),))
    got = Diagnoser()._chain([hot, dec, mem])
    # the chain ranks by its worst member (the critical symptom), then the rest
    assert [f.code for f in got] == ["MEM-001", "DEC-001", "HW-006"]
    assert got[1].title == "DEC-001 title: caused by MEM-001 MEM-001 title"
    assert got[1].caused_by == ("MEM-001",) and got[1].remedy == "DEC-001 remedy"


def test_an_outage_runs_from_its_first_failed_tick_to_the_first_good_one() -> None:
    """The restart finding's downtime: (down since, back at, failed ticks, reason)."""
    d = Diagnoser()
    d._track_sources(tick(10.0, {}, {SERVER: Status.ERROR}))
    d._track_sources(tick(11.0, {}, {SERVER: Status.ERROR}))
    d._track_sources(tick(12.0, {"server.requests_running": {"model=m": 1}}))
    assert d._state["outages"][SERVER]["last"] == (10.0, 12.0, 2, "connection refused")
    assert d._state["outages"][SERVER]["down_since"] is None


def test_a_labelled_input_is_missing_while_only_other_labels_are_read() -> None:
    """PAR-001 needs server.setting{name=tensor_parallel_size} (or the GPU memory per
    process): a dtype setting is not it."""
    f = Feed()
    f.run(lambda: {"server.setting": {"name=dtype": "bfloat16"},
                   "gpu.util_ratio": {"gpu=0": 0.5}}, 3)
    lacking = f.diag.missing_inputs(f.history)["PAR-001"]
    assert [x.split(" (")[0] for x in lacking] == \
        ["process.gpu_mem_bytes|server.setting{name=tensor_parallel_size}"]
    f.tick({"server.setting": {"name=dtype": "bfloat16", "name=tensor_parallel_size": "2"},
            "gpu.util_ratio": {"gpu=0": 0.5}})
    assert "PAR-001" not in f.diag.missing_inputs(f.history)


def test_an_input_read_exactly_the_fact_age_ago_is_not_missing() -> None:
    """A reading last seen FACT_MAX_AGE seconds ago still counts (the same bound the rules'
    Context uses for facts); one second later it is missing."""
    f = Feed()
    f.tick({"server.setting": {"name=tensor_parallel_size": "2"},
            "gpu.util_ratio": {"gpu=0": 0.5}})
    f.run(lambda: {"gpu.util_ratio": {"gpu=0": 0.5}}, int(FACT_MAX_AGE))
    assert f.history.now == f.t - 1 and "PAR-001" not in f.diag.missing_inputs(f.history)
    f.tick({"gpu.util_ratio": {"gpu=0": 0.5}})
    assert "PAR-001" in f.diag.missing_inputs(f.history)
