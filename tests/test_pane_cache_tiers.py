"""Which cache tier supplied the prefix hits (vLLM's prompt_tokens_cached_by_source:
device HBM, host DRAM, disk, a peer): derived as each tier's share of the window
(kv.cached_source_ratio) and drawn as the memory pane's 'hit tiers' row only when a tier
beyond the device's own served some."""

from __future__ import annotations

from helpers.panes import pane_text
from helpers.rulekit import tick
from infertop.pipeline import Pipeline
from infertop.rules.engine import Diagnoser

LAB = "instance=v:8000,engine=0,model=m,source={}"


def _frame(rates: dict[str, float], ticks: int = 15):
    pipe = Pipeline(Diagnoser(), window=60.0)
    frame = None
    for i in range(ticks):
        frame = pipe.feed(tick(1_000_000.0 + i, {
            "kv.cached_tokens_by_source_total": {LAB.format(src): rate * i
                                                 for src, rate in rates.items()},
            "kv.usage_ratio": {"instance=v:8000,engine=0,model=m": 0.4}}))
    return frame


def _shares(frame) -> dict[str, float]:
    return {r.label("source"): r.value for r in frame.derived
            if r.key == "kv.cached_source_ratio" and r.ok}


def test_each_tier_gets_its_share_of_the_window_and_the_pane_names_them():
    frame = _frame({"device": 300.0, "host": 100.0, "disk": 0.0})
    shares = _shares(frame)
    assert abs(shares["device"] - 0.75) < 1e-9 and abs(shares["host"] - 0.25) < 1e-9
    assert shares["disk"] == 0.0
    row = next(ln for ln in pane_text("memory", frame).splitlines() if "hit tiers" in ln)
    assert "device 75" in row and "host 25" in row
    assert "disk" not in row            # a tier that served nothing is not listed


def test_all_hits_from_the_device_draw_no_tier_row():
    frame = _frame({"device": 300.0, "host": 0.0})
    assert _shares(frame)["device"] == 1.0
    assert "hit tiers" not in pane_text("memory", frame)


def test_an_idle_window_is_no_share_not_a_zero():
    frame = _frame({"device": 0.0, "host": 0.0})
    got = [r for r in frame.derived if r.key == "kv.cached_source_ratio"]
    assert got and all(not r.ok and "no traffic" in r.reason for r in got)
    assert "hit tiers" not in pane_text("memory", frame)
