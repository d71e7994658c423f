"""--low-bandwidth N (issue 35, item 1's last way): the screen's body is drawn at most every
N seconds of the frames' clock, the findings strip on every tick (a new or worsened finding
shows at once), and a key repaints at once.  Whole draws are counted through the app's
draw hook (``_apply``), the strip through what it was last given; no wall clock."""

from __future__ import annotations

from typing import Any

import pytest

from helpers.tui_demo import demo_app


def test_the_flag_and_the_config_key_take_seconds_in_their_range() -> None:

    from infertop.cli.interactive import _low_bandwidth
    from infertop.cli.main import build_parser
    from infertop.config import LOW_BANDWIDTH_SECONDS, ConfigError, config_from_dict
    parse = build_parser().parse_args
    assert parse([]).low_bandwidth is None
    assert parse(["--low-bandwidth", "10"]).low_bandwidth == 10.0
    for bad in ("0.5", "4000", "nan", "x"):
        with pytest.raises(SystemExit):
            parse(["--low-bandwidth", bad])
    assert config_from_dict({"ui": {"low_bandwidth": 7}}).low_bandwidth == 7.0
    for bad_value in (0.5, 1e9, "5", True):
        with pytest.raises(ConfigError, match="ui.low_bandwidth"):
            config_from_dict({"ui": {"low_bandwidth": bad_value}})
    # the config's value, read from the config itself (a fleet's pipeline keeps none)
    configured = config_from_dict({"ui": {"low_bandwidth": 7}}).low_bandwidth
    flag_alone = parse(["--low-bandwidth", "--url", "http://127.0.0.1:1"]).low_bandwidth
    assert _low_bandwidth(flag_alone, None) == LOW_BANDWIDTH_SECONDS
    assert _low_bandwidth(flag_alone, configured) == 7.0     # the config's N
    assert _low_bandwidth(None, configured) == 7.0           # on from the config alone
    assert _low_bandwidth(12.0, configured) == 12.0          # the flag's N wins
    assert _low_bandwidth(None, None) is None


def counting(app: Any) -> list[float]:
    """The frames' times at which the app drew its whole screen."""
    drawn: list[float] = []
    apply = app._apply

    def counted(frame: Any) -> None:
        drawn.append(frame.time)
        apply(frame)
    app._apply = counted
    return drawn


@pytest.mark.slow   # the demo app driven
async def test_the_body_waits_for_its_mark_while_the_strip_and_keys_do_not() -> None:
    app = demo_app("mem-kv-pressure")      # MEM-001, then DEC-001, appear near 30 s
    app.options.low_bandwidth = 5.0
    async with app.run_test(size=(100, 30)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        drawn = counting(app)
        seen: dict[str, tuple[float, bool]] = {}   # code -> (when it first showed, body?)
        header = app._shown["#header"].plain
        for _ in range(40):
            before = len(drawn)
            await app._poll()
            await pilot.pause()
            assert app.frame is not None
            now, body = app.frame.time, len(drawn) > before
            strip = app._shown.get("#findings-strip")
            for f in app.frame.findings:      # every finding in the strip on its own tick
                assert strip is not None and f.code in strip.plain, (now, f.code)
                seen.setdefault(f.code, (now, body))
            if not body:                      # the header's tick counter did not move
                assert app._shown["#header"].plain == header
            header = app._shown["#header"].plain
        assert {"MEM-001", "DEC-001"} <= set(seen), seen
        # the body: once per 5 s of the frames' clock, never in between
        gaps = [b - a for a, b in zip(drawn, drawn[1:])]
        assert gaps and all(g == 5.0 for g in gaps), drawn
        assert 7 <= len(drawn) <= 9, drawn
        # at least one finding came up between two marks: the strip alone showed it
        assert any(not body for _, body in seen.values()), seen
        count = len(drawn)
        await pilot.press("x")                # any key: the newest frame, drawn at once
        await pilot.pause()
        assert app.frame is not None
        assert len(drawn) == count + 1 and drawn[-1] == app.frame.time


@pytest.mark.slow
async def test_without_it_every_tick_draws_the_whole_screen() -> None:
    app = demo_app("healthy")
    async with app.run_test(size=(100, 30)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        drawn = counting(app)
        for _ in range(6):
            await app._poll()
        await pilot.pause()
        assert len(drawn) == 6
