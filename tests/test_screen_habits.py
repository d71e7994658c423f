"""Habits users bring from htop, btop, k9s and nvitop (issue 35, item 4)."""

from __future__ import annotations

import base64
import re

import pytest

from helpers.tui_demo import demo_app
from infertop.tui.clipboard import osc52


def test_osc52_carries_the_text_and_passes_through_tmux():
    text = "MEM-001 WARN: KV-cache pressure\nremedy: lower --max-num-seqs\n"
    plain = osc52(text, in_tmux=False)
    m = re.fullmatch(r"\x1b\]52;c;([A-Za-z0-9+/=]+)\x07", plain)
    assert m and base64.b64decode(m.group(1)).decode() == text
    wrapped = osc52(text, in_tmux=True)
    assert wrapped.startswith(plain)          # tmux with set-clipboard on takes this one
    inner = wrapped[len(plain):]
    assert inner.startswith("\x1bPtmux;\x1b\x1b]52;c;") and inner.endswith("\x07\x1b\\")
    big = osc52("é" * 100_000, in_tmux=False)   # cut, at a character boundary
    data = base64.b64decode(big[len("\x1b]52;c;"):-1])
    assert len(data) <= 74_994 and data.decode("utf-8")


@pytest.mark.slow   # the demo app driven
async def test_y_copies_the_worst_finding_and_f_copies_the_selected_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    app = demo_app("mem-kv-pressure")
    async with app.run_test(size=(100, 30)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        while app.ticks < 40:
            await app._poll()
        await pilot.pause()
        assert app.frame is not None and app._driver is not None
        findings = app.frame.findings
        assert len(findings) >= 2, findings
        sent: list[str] = []
        real_write = app._driver.write

        def spy(data: str) -> None:
            sent.append(data)
            real_write(data)
        monkeypatch.setattr(app._driver, "write", spy)
        await pilot.press("y")
        await pilot.pause()
        copied = [s for s in sent if s.startswith("\x1b]52;c;")]
        assert copied, sent
        text = base64.b64decode(copied[-1][len("\x1b]52;c;"):].split("\x07")[0]).decode()
        first = findings[0]
        assert text.startswith(first.code) and "evidence:" in text and "remedy:" in text
        assert first.evidence[0].describe() in text and first.remedy in text
        await pilot.press("f")
        await pilot.pause()
        await pilot.press("down", "y")
        await pilot.pause()
        assert app._clipboard.startswith(findings[1].code), app._clipboard
        await pilot.press("end", "y")
        await pilot.pause()
        assert app._clipboard.startswith(findings[-1].code)


@pytest.mark.parametrize("argv,hint", [
    (["--thme", "nord"], "(did you mean --theme?)"),
    (["doctor", "--duraton=3"], "(did you mean --duration?)"),
    (["--theme", "nrod", "--source", "demo"], "unknown theme 'nrod' (did you mean nord?)"),
])
def test_a_mistyped_flag_or_theme_says_what_was_meant(argv, hint):
    from helpers.inproc import run_main
    r = run_main(*argv)
    assert r.returncode == 2, r
    assert hint in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_no_suggestion_for_a_flag_like_none():
    from helpers.inproc import run_main
    r = run_main("doctor", "--zzzzz")
    assert r.returncode == 2 and "did you mean" not in r.stderr, r.stderr


@pytest.mark.slow   # the demo app driven through a capture screen
async def test_home_and_end_move_to_the_first_and_last_row_of_a_capture():
    from helpers.tui_demo import open_capture
    app = demo_app("healthy")
    async with app.run_test(size=(100, 30)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        screen = await open_capture(app, pilot, "p")
        table = screen.query_one("#capture-threads")
        table.focus()
        assert table.row_count > 2
        await pilot.press("end")
        await pilot.pause()
        assert table.cursor_row == table.row_count - 1
        await pilot.press("home")
        await pilot.pause()
        assert table.cursor_row == 0


def test_process_tree_puts_each_process_under_its_parent():
    from infertop.tui.screens.processes import tree_order
    pids = ["1", "10", "11", "12", "20", "30"]
    parent = {"10": "1", "11": "10", "12": "1", "20": "999", "30": "30"}
    assert tree_order(pids, parent) == [("1", 0), ("10", 1), ("11", 2), ("12", 1),
                                        ("20", 0), ("30", 0)]
    # a cycle (hostile or racing ppids): every PID once, none lost
    assert sorted(tree_order(["5", "6"], {"5": "6", "6": "5"})) == [("5", 0), ("6", 0)]


def test_o_tree_indents_the_server_children_under_the_api_server():
    from helpers.panes import frames_of
    from infertop.probes.sources.demo import DemoSource
    from infertop.themes import roles
    from infertop.tui.panes.context import PaneContext
    from infertop.tui.screens.processes import process_rows
    frame = frames_of(DemoSource("healthy"), 3)
    ctx = PaneContext(frame, roles({}), wide=True, height=40, width=150)
    flat = [r[-1].plain for r in process_rows(ctx).rows]
    tree = [r[-1].plain for r in process_rows(ctx, tree=True).rows]
    assert not any(c.startswith("└─") for c in flat), flat
    assert not tree[0].startswith("└─") and "vllm serve" in tree[0], tree
    assert any(c == "└─ VLLM::EngineCore" for c in tree[1:]), tree


def test_a_muted_finding_comes_back_when_its_time_is_up_or_it_worsens():
    from dataclasses import replace

    from infertop.findings import Finding, Layer, Severity
    from infertop.tui.mute import MUTE_SECONDS, Mutes
    warn = Finding("MEM-001", Layer.MEMORY, Severity.WARN, "KV-cache pressure", (), "r", 0.0)
    other = replace(warn, code="SCH-002")
    m = Mutes()
    m.mute(warn, now=100.0)
    assert m.split([warn, other], 200.0) == ([other], 1)
    assert m.muted(warn, 100.0 + MUTE_SECONDS) is None            # time is up
    m.mute(warn, now=100.0)
    assert m.muted(replace(warn, severity=Severity.CRIT), 200.0) is None   # it worsened
    assert m.muted(warn, 200.0) is None          # and the mute is gone for good


@pytest.mark.slow   # the demo app driven
async def test_m_in_f_mutes_the_selected_finding_dimmed_and_out_of_the_strip():
    from helpers.tui_demo import screen_lines
    app = demo_app("mem-kv-pressure")
    async with app.run_test(size=(100, 30)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        while app.ticks < 40:
            await app._poll()
        await pilot.pause()
        assert app.frame is not None
        first = app.frame.findings[0]
        assert screen_lines(app)[1].lstrip().startswith(first.code)
        await pilot.press("f")
        await pilot.pause()
        await pilot.press("m")
        await pilot.pause()
        block = app.screen.query_one("#finding-0")
        assert block.has_class("-muted")
        await pilot.press("escape")
        await app._poll()
        await pilot.pause()
        strip = screen_lines(app)[1]
        assert not strip.lstrip().startswith(first.code) and "1 muted: f" in strip, strip
        await pilot.press("f")                        # still listed, and m unmutes
        await pilot.pause()
        assert app.screen.query_one("#finding-0").has_class("-muted")
        await pilot.press("m")
        await pilot.pause()
        assert not app.screen.query_one("#finding-0").has_class("-muted")
