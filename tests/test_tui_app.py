"""Pilot tests of the live screen: panes, keys, zoom, pause, interval, help, no-GPU notes."""

import asyncio

import pytest

from helpers.synthetic_source import SyntheticSource
from infertop.model import Reading, Sample, Snapshot, Status
from infertop.pipeline import Pipeline
from infertop.source import SnapshotSource
from infertop.tui.app import InfertopApp, UnknownTheme


def text_of(widget) -> str:
    r = widget.render()
    return str(getattr(r, "plain", r))


def pane_text(app, layer: str) -> str:
    pane = app.query_one(f"#pane-{layer}")
    from rich.console import Console
    con = Console(width=200, record=True, color_system=None)
    con.print(pane.last_renderable)
    return con.export_text()


async def settle(pilot, app, ticks: int):
    for _ in range(200):
        if app.ticks >= ticks:
            return
        await pilot.pause(0.02)
    raise AssertionError(f"only {app.ticks} ticks")


async def test_header_and_panes_update_on_ticks():
    """Pane content itself is tested through render_frame (test_panes_render.py); here the
    App's part: ticks reach every pane and the header."""
    app = InfertopApp(SyntheticSource(), pipeline=Pipeline(), interval=0.05)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, app, 3)
        assert "H100" in pane_text(app, "hardware")
        assert all(pane_text(app, layer).strip() for layer in
                   ("hardware", "kernels", "memory", "scheduling", "parallelism", "decoding"))
        header = text_of(app.query_one("#header"))
        assert "vllm" in header and "tiny-llama" in header and "2 GPU" in header


async def test_keys_zoom_pause_interval_and_help():
    app = InfertopApp(SyntheticSource(), pipeline=Pipeline(), interval=1.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app, 1)
        await pilot.press("3")
        assert [p.display for p in app.panes] == [False, False, True, False, False, False]
        await pilot.press("3")
        assert all(p.display for p in app.panes)
        await pilot.press("minus")
        assert app.interval == 2.0
        await pilot.press("plus")
        await pilot.press("plus")
        assert app.interval == 0.5
        await pilot.press("space")
        assert app.paused
        n = app.ticks
        await pilot.pause(1.2)
        assert app.ticks == n                   # paused: no new ticks
        await pilot.press("space")
        assert not app.paused
        await pilot.press("question_mark")
        assert app.screen.__class__.__name__ == "HelpScreen"
        await pilot.press("escape")
        assert app.screen.__class__.__name__ != "HelpScreen"


async def test_no_gpu_no_server_header_says_nvml_is_missing():
    app = InfertopApp(SyntheticSource(gpus=0, server=False), pipeline=Pipeline(), interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app, 2)
        assert "–nvml" in text_of(app.query_one("#header"))


class SlowSource(SnapshotSource):
    """Each tick takes longer than the interval: ticks must be skipped, not queued."""

    def __init__(self):
        self.calls = 0

    async def next(self):
        self.calls += 1
        await asyncio.sleep(0.3)
        return Snapshot(float(self.calls), {"x": Sample("x", 0.0, (Reading("host.load1", 1.0),))})


async def test_slow_source_skips_ticks_and_keys_stay_responsive():
    src = SlowSource()
    app = InfertopApp(src, pipeline=Pipeline(), interval=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(1.0)
        await pilot.press("2")                     # answered while polls are in flight
        assert app.zoomed == 1
        assert app.overruns > 0
        assert src.calls <= 5                      # never more than one poll at a time


def test_unknown_theme_is_a_clear_error():
    with pytest.raises(UnknownTheme, match="unknown theme 'nope'"):
        InfertopApp(SyntheticSource(), theme="nope")


async def test_stale_source_is_marked_in_header():
    class Stale(SyntheticSource):
        async def next(self):
            snap = await super().next()
            s = snap.samples["nvml"]
            samples = dict(snap.samples)
            samples["nvml"] = Sample("nvml", s.time, tuple(r.with_status(Status.STALE) for r in
                                                           s.readings), Status.STALE, "late")
            return Snapshot(snap.time, samples, snap.tick, snap.capabilities)
    app = InfertopApp(Stale(), pipeline=Pipeline(), interval=0.05)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, app, 2)
        assert "~nvml" in text_of(app.query_one("#header"))
        assert "90 %*" in pane_text(app, "hardware")   # stale values carry a marker


async def test_kv_event_sources_in_the_header_are_never_ok_when_not_read():
    """Issue 32 item 4 / issue 36 case 13: a subscriber whose publisher is gone is stale,
    one whose last batch did not decode is an error, a vLLM without events is '–'."""
    states = [(Status.STALE, "~kvevents"), (Status.ERROR, "✗kvevents"),
              (Status.NODATA, "–kvevents")]

    class Kv(SyntheticSource):
        ticks_served = 0

        async def next(self):
            snap = await super().next()
            # each state for 10 ticks: the header is read between ticks, at any pace
            status = states[min(self.ticks_served // 10, len(states) - 1)][0]
            self.ticks_served += 1
            samples = dict(snap.samples)
            samples["kvevents:h:8000"] = Sample("kvevents:h:8000", snap.time, (), status, "x")
            return Snapshot(snap.time, samples, snap.tick, snap.capabilities)
    src = Kv()
    app = InfertopApp(src, pipeline=Pipeline(), interval=0.05)
    seen = set()
    async with app.run_test(size=(160, 48)) as pilot:
        for _ in range(400):
            header = text_of(app.query_one("#header"))
            seen |= {glyph for _, glyph in states if glyph in header}
            assert "✓kvevents" not in header
            if len(seen) == len(states):
                break
            await pilot.pause(0.02)
    assert seen == {glyph for _, glyph in states}


async def test_interval_keys_retune_the_hub_deadline():
    from infertop.probes.sources.hub import Hub
    hub = Hub([], deadline=0.8)
    app = InfertopApp(hub, pipeline=Pipeline(), interval=1.0)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("minus")                 # 2 s ticks: probes may take 1.6 s
        assert app.interval == 2.0 and hub.deadline == pytest.approx(1.6)
        await pilot.press("plus", "plus", "plus")  # 0.25 s ticks: never below 0.2 s
        assert app.interval == 0.25 and hub.deadline == pytest.approx(0.2)


async def test_terminal_below_80x24_says_so_and_hides_the_panes():
    app = InfertopApp(SyntheticSource(), pipeline=Pipeline(), interval=0.05)
    async with app.run_test(size=(70, 20)) as pilot:
        await settle(pilot, app, 2)
        notice = app.query_one("#too-small")
        assert notice.display and app.screen.has_class("-too-small")
        assert "terminal too small: 70x20" in text_of(notice)
        assert "80x24" in text_of(notice)
        assert app.query_one("#panes").styles.display == "none"
        await pilot.resize_terminal(80, 24)
        await pilot.pause(0.1)
        assert not app.screen.has_class("-too-small")
        assert app.query_one("#panes").styles.display != "none"
