"""The App's and the widgets' Textual privates go through tui/textual_gate.py too (issue 34
gate caveats): BoundaryWrapped's cached auto height (Widget ``_content_height_cache``), the
finding copy (App ``_clipboard``, ``_driver``), the exit deadline's driver and the
shutdown check (MessagePump ``_closing``, ``_closed``) and the panes' own line drawing
(Widget ``_dirty_regions``, ``_get_style``).  Each works on the gate's fast
path and on stock Textual."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll

from infertop.tui import textual_gate
from infertop.tui.clipboard import osc52
from infertop.tui.widgets.boundary_wrap import BoundaryWrapped, wrap_line

ROOT = Path(__file__).resolve().parent.parent
PRIVATES = ("driver|clipboard|content_height_cache|render_markup|closing|closed|"
            "dirty_regions|get_style")
# an attribute read (app._driver) or one by name (getattr(app, "_closing", False))
PRIVATE = re.compile(rf"\._({PRIVATES})\b|[\"']_({PRIVATES})[\"']")
# the gate, and the fast paths' subclasses of the private classes it hands out (their
# own attributes: the gate's docstring lists what to re-check in them)
GATED = {"textual_gate.py", "compositor.py", "styles_cache.py", "driver.py"}
LONG = ("python -m vllm.entrypoints.openai.api_server --model "
        "/models/meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 2")


def test_no_app_or_widget_private_is_read_outside_the_gate() -> None:
    offenders = []
    for top in ("tui", "cli"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if path.name in GATED:
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if PRIVATE.search(line.split("#", 1)[0]):
                    offenders.append(f"{path.relative_to(ROOT)}:{n}")
    assert offenders == []


class Wrapped(App[None]):
    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield BoundaryWrapped(Text(LONG), id="w")


@pytest.mark.parametrize("fast", [True, False])
async def test_the_wrapped_height_follows_width_and_content_on_both_paths(
        monkeypatch: pytest.MonkeyPatch, fast: bool) -> None:
    monkeypatch.setattr(textual_gate, "FAST", fast)
    app = Wrapped()
    async with app.run_test(size=(33, 20)) as pilot:
        w = app.query_one("#w", BoundaryWrapped)
        for width in (33, 60):
            await pilot.resize_terminal(width, 20)
            await pilot.pause()
            want = len(wrap_line(Text(LONG), width))
            assert w.size == (width, want)
            # the fast path keeps it where Textual resets it; stock measures every time
            got = textual_gate.content_height_cached(w, width)
            assert got == (want if fast else None)
        w.update(Text("short"))      # a content change: the cached height is not reused
        await pilot.pause()
        assert w.size.height == 1


@pytest.mark.parametrize("fast", [True, False])
async def test_a_copy_reaches_the_clipboard_on_both_paths(
        monkeypatch: pytest.MonkeyPatch, fast: bool) -> None:
    monkeypatch.setattr(textual_gate, "FAST", fast)
    text = "MEM-001 WARN: KV-cache pressure\n"
    app: App[None] = App()
    assert textual_gate.app_driver(app) is None           # not running: no driver
    async with app.run_test():
        driver = textual_gate.app_driver(app)
        assert driver is not None
        written: list[str] = []
        monkeypatch.setattr(driver, "write", written.append)
        textual_gate.copy_with(app, text, osc52(text, in_tmux=True))
        assert app.clipboard == text
        # ours (tmux's passthrough after the plain one) on the fast path; Textual's plain
        # OSC 52 on stock
        assert written == [osc52(text, in_tmux=True) if fast else osc52(text, in_tmux=False)]


def test_a_textual_without_the_names_gives_the_defaults() -> None:
    class Elsewhere:
        pass
    assert textual_gate.app_driver(Elsewhere()) is None
    assert textual_gate.closing(Elsewhere()) is False
    assert textual_gate.style_parser(Elsewhere()) is None
    textual_gate.mark_drawn(Elsewhere())      # nothing to clear: no error


async def test_closing_follows_the_app() -> None:
    app: App[None] = App()
    async with app.run_test():
        assert not textual_gate.closing(app) and not textual_gate.closing(app.screen)
        screen = app.screen
    assert textual_gate.closing(screen) and textual_gate.closing(app)


@pytest.mark.slow   # a pytest subprocess: the gate decides at import
def test_the_wrap_and_copy_tests_pass_with_the_gate_closed() -> None:
    env = {**os.environ, textual_gate.STOCK_ENV: "1"}
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/test_boundary_wrap.py",
         "tests/test_screen_habits.py::test_y_copies_the_worst_finding_and_f_copies_the_"
         "selected_one"],
        env=env, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "skipped" not in proc.stdout
