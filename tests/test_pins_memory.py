"""Pins for the memory rules where a mutation run found none (issue 31 item 8)."""

from __future__ import annotations

from typing import Any

from helpers.rulekit import Feed, tick
from infertop.config import DiagnosisConfig
from infertop.findings import Severity
from infertop.history import History
from infertop.rules import memory
from infertop.rules.base import Context

E0 = "engine=0,model=m"


# ---- MEM-001: SGLang's retraction gauge stands for preemptions ----------------------------
def _sglang(retracted: float, kv: float = 0.95) -> dict[str, Any]:
    return {"kv.usage_ratio": {E0: kv}, "server.requests_retracted": {E0: retracted},
            "server.requests_running": {E0: 8}}


def test_retracted_requests_with_a_full_cache_are_kv_pressure() -> None:
    f = Feed()
    f.run(lambda: _sglang(2), 15)
    (got,) = f.active("MEM-001")
    assert got.severity is Severity.WARN
    ret = got.evidence[1]
    assert (ret.key, ret.op, ret.threshold, ret.value) == \
        ("server.requests_retracted", ">", 0, 1.0)
    assert "requests retracted" in ret.note and "2 now" in ret.note


def test_a_retraction_gauge_at_zero_is_no_pressure() -> None:
    f = Feed()
    f.run(lambda: _sglang(0), 15)
    assert not f.active("MEM-001")


def test_the_rules_are_the_layers_five() -> None:
    assert [r.code for r in memory.RULES] == [f"MEM-00{i}" for i in range(1, 6)]


# ---- MEM-003: the level against the server's reservation ----------------------------------
def _card(used: float, setting: str | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"gpu.mem_used_bytes": {"gpu=0": used},
                            "gpu.mem_total_bytes": {"gpu=0": 100e9}}
    if setting is not None:
        data["server.setting"] = {"name=gpu_memory_utilization": setting}
    return data


def _mem003(data: dict[str, Any]) -> list:
    f = Feed()
    f.run(lambda: data, 8)
    return f.active("MEM-003")


def test_beyond_the_reservation_at_exactly_full_is_critical() -> None:
    """mem_full_ratio (0.98) is inclusive: 98 % used on a card the server reserved half
    of is critical, 97 % a warning."""
    (got,) = _mem003(_card(98e9, "0.5"))
    assert got.severity is Severity.CRIT
    assert got.title == "GPU 0: memory 98.0% used, beyond the reservation"
    (got,) = _mem003(_card(97e9, "0.5"))
    assert got.severity is Severity.WARN


def test_a_reservation_outside_zero_to_one_is_no_reservation() -> None:
    """gpu_memory_utilization 0 or 1.5 explains nothing: 99 % used is "nearly full"."""
    for bad in ("0", "1.5"):
        (got,) = _mem003(_card(99e9, bad))
        assert got.severity is Severity.CRIT
        assert got.title == "GPU 0: memory 99.0% used, nearly full", bad
    assert not _mem003(_card(99e9, "1.0"))   # the whole card reserved: usage as told


# ---- MEM-003: growth is most of the window's steps rising, not one jump -------------------
def _staircase(small: float) -> list:
    """MEM-003's candidates 120 s into a card whose used memory, read at the seven points
    the rule samples (every 20 s), rose 1.1 GB three times, then ``small`` three times."""
    t0, total, v = 1_000_000.0, 100e9, 50e9
    levels = [v]
    for rise in (1.1e9, 1.1e9, 1.1e9, small, small, small):
        levels.append(levels[-1] + rise)
    history = History()
    snaps = [tick(t0 + s, {"gpu.mem_used_bytes": {"gpu=0": levels[min(6, s // 20)]},
                           "gpu.mem_total_bytes": {"gpu=0": total}}) for s in range(121)]
    for snap in snaps:
        history.add(snap)
    ctx = Context(history, snaps[-1], [], DiagnosisConfig(), {}, {})
    return list(memory.mem_headroom(ctx))


def test_a_step_of_exactly_a_quarter_tolerance_is_not_a_rise() -> None:
    """Three 1.1 GB jumps then three steps of exactly tol / 4 (0.05 % of the card): three
    rising steps of six, a load, not growth; a little more than tol / 4 is growth."""
    quarter = 0.002 * 100e9 / 4
    assert _staircase(quarter) == []
    (got,) = _staircase(quarter * 1.5)
    assert got.title == "GPU 0: memory growing steadily"
