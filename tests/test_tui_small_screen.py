"""The 3 a.m. screen (issue 23): at 80x24 over SSH every fact on screen is readable.

A value is never shown cut ("58.5…", "249…": a digit right before the cut mark), over
every demo scenario at both sizes; all eight GPUs of an eight-GPU box have their line at
80x24; the key line always has q, ? and f; the header says the sources' state.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
from rich.text import Text

from helpers.tui_demo import demo_app, screen_lines
from infertop.cli.main import build_parser, make_pipeline
from infertop.demo.scenario import list_scenarios
from infertop.probes.sources.demo import DemoSource
from infertop.tui.modes import DemoApp
from infertop.tui.options import AppOptions
from infertop.tui.panes.widget import LayerPane

EIGHT = str(Path(__file__).parent / "fixtures" / "scenarios" / "eight-gpus-straggler.toml")
CUT_NUMBER = re.compile(r"\d…")


@pytest.fixture(autouse=True)
def fixed_host(monkeypatch):
    monkeypatch.setattr(socket, "gethostname", lambda: "gpu-box")






async def run_to(app, size: tuple[int, int], ticks: list[int]) -> list[list[str]]:
    """The screen's lines at each of ``ticks``."""
    shots = []
    async with app.run_test(size=size) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        for n in ticks:
            while app.ticks < n:
                await app._poll()
            await pilot.pause()
            shots.append(screen_lines(app))
    return shots


# every scenario at 80x24 (where cutting happens), one per layer and eight GPUs at 160x48
WIDE = ["healthy", "hw-throttling", "krn-launch-bound", "mem-kv-pressure",
        "sch-gil-contention", "par-dp-unbalanced", "dec-ttft-burst", EIGHT]


# each case drives the whole app through 35 ticks: `make test-fast` keeps one at each size
FAST_CUT = {("mem-kv-pressure", (80, 24)), ("mem-kv-pressure", (160, 48))}


@pytest.mark.parametrize("name,size", [
    pytest.param(n, size, marks=() if (n, size) in FAST_CUT else pytest.mark.slow)
    for n, size in [(n, (80, 24)) for n in list_scenarios() + [EIGHT]]
    + [(n, (160, 48)) for n in WIDE]])
async def test_no_value_is_shown_cut(name, size):
    lines = (await run_to(demo_app(name), size, [35]))[0]
    cut = [ln for ln in lines if CUT_NUMBER.search(ln)]
    assert not cut, "\n".join(cut)


@pytest.mark.slow   # the whole app driven (make test-fast keeps the cut check and the zoom key line)
async def test_eight_gpus_each_have_their_line_at_80x24():
    lines = (await run_to(demo_app(EIGHT), (80, 24), [40]))[0]
    text = "\n".join(lines)
    for g in range(8):
        # a flagged GPU's label holds its finding's code in place of the model's name
        assert any(re.match(rf"\s*{g} (H100|[A-Z]{{2,5}}-\d{{3}})\s.*\d+ %.*GiB.*°C", ln)
                   for ln in lines), text
    assert "press 1 to zoom" not in text, text       # nothing of the hardware is hidden


@pytest.mark.slow   # the whole app driven (make test-fast keeps the cut check and the zoom key line)
async def test_key_line_header_and_strip_at_80x24():
    lines = (await run_to(demo_app("mem-kv-pressure"), (80, 24), [90]))[0]
    keys, header, strip = lines[-1], lines[0], lines[1]
    for k in ("q quit", "? help", "f findings"):
        assert k in keys, keys
    assert "> next scenario" in keys and "] next phase" in keys, keys   # the mode's keys
    assert "✓nvml" in header and "✓server" in header, header
    assert strip.lstrip().startswith("MEM-001 ") and "%" in strip, strip


def rendered(renderable, width: int) -> str:
    from rich.console import Console
    con = Console(width=width, record=True, color_system=None)
    con.print(renderable)
    return con.export_text()


def test_help_lists_every_key_of_every_binding():
    """issue 23: `?` did not list G, P, Z or F1 (a binding's other keys were hidden)."""
    from infertop.tui.modes import LiveApp
    from infertop.tui.screens.help import bindings_table
    text = rendered(bindings_table(LiveApp(DemoSource("healthy"))), 120)
    for key in ("space / Z", "? / F1", "+ / =", "G ", "P ", "p ", "n ", "R ", "f ", "q "):
        assert key in text, (key, text)


def test_findings_window_never_breaks_a_word_at_80_columns():
    from infertop.findings import Evidence, Finding, Severity
    from infertop.model import Layer
    from infertop.tui.screens.findings import findings_renderable
    remedy = ("Raise gpu_memory_utilization or lower max_num_seqs; enable prefix caching "
              "where prompts share a prefix; add replicas when the pool is full anyway")
    f = Finding("MEM-001", Layer.MEMORY, Severity.CRIT, "KV-cache pressure (engine=0)",
                (Evidence("kv.usage_ratio", (("engine", "0"),), 0.98, 0.85, ">=", "ratio"),),
                remedy, 0.0)
    words = set(rendered(findings_renderable([f], {}), 72).split())
    for w in (remedy + " KV-cache pressure evidence remedy kv.usage_ratio{engine=0}").split():
        assert w in words, (w, sorted(words))


async def test_key_line_follows_zoom_in_and_out():
    """issue 23: the zoom table keys stayed on the key line after un-zooming."""
    app = demo_app("healthy")
    async with app.run_test(size=(80, 24)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        await pilot.press("3")
        await pilot.pause()
        zoomed = screen_lines(app)[-1]
        await pilot.press("3")
        await pilot.pause()
        back = screen_lines(app)[-1]
    assert "s sort" in zoomed and "/ filter" in zoomed and "f findings" in zoomed, zoomed
    assert "s sort" not in back and "f findings" in back, back


async def test_projector_theme_is_light_and_has_no_dim_text():
    app = DemoApp(DemoSource("mem-kv-pressure"), interval=1.0, theme="projector",
                  options=AppOptions(manual_ticks=True),
                  pipeline=make_pipeline(build_parser().parse_args([])))
    async with app.run_test(size=(80, 24)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        assert app.theme == "projector"
        assert not any("dim" in style for style in app.role_styles.values())
        assert app.get_css_variables()["background"].upper().startswith("#FFFFFF")


@pytest.mark.slow   # the whole app driven (make test-fast keeps the cut check and the zoom key line)
async def test_process_view_lists_the_servers_tree_and_every_gpu_process():
    """issue 23: a top-level process view as nvitop's, sortable and filterable."""
    app = demo_app("par-tp-straggler")
    async with app.run_test(size=(120, 36)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        for _ in range(40):
            await app._poll()
        await pilot.press("o")
        await pilot.pause()
        pane = app.screen.query_one("#pane-processes", LayerPane)
        assert isinstance(pane.last_renderable, Text)
        text = pane.last_renderable.plain
        rows = {ln.split()[0]: ln for ln in text.splitlines() if ln[:1].isdigit()}
        assert "engine_core" in rows["4180"] and "%" in rows["4180"]       # CPU of the tree
        assert "worker" in rows["4202"] and "GiB" in rows["4202"]          # a GPU process
        assert "(not the server)" in rows["7320"] and "alice" in rows["7320"]
        await app._poll()                                # it follows the ticks while open
        await pilot.pause()
        await pilot.press("slash", *"alice", "enter")
        await pilot.pause()
        assert isinstance(pane.last_renderable, Text)
        shown = [ln for ln in pane.last_renderable.plain.splitlines() if ln[:1].isdigit()]
        assert len(shown) == 1 and shown[0].startswith("7320"), shown
        await pilot.press("escape")                      # clears the filter
        await pilot.press("escape")                      # back to the panes
        await pilot.pause()
        assert app.screen is app.screen_stack[0]


@pytest.mark.slow   # the whole app driven (make test-fast keeps the cut check and the zoom key line)
async def test_a_prompt_leaves_the_screen_behind_in_view():
    """issue 23: `P`'s seconds prompt (and `/` before it was inline) blanked the screen."""
    from infertop.tui.screens.prompt import NumberPrompt
    app = demo_app("healthy")
    async with app.run_test(size=(80, 24)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        await app._poll()
        await pilot.pause()
        app.push_screen(NumberPrompt("py-spy record for how many seconds?", 10, 1, 600))
        await pilot.pause()
        shot = app.export_screenshot()
    assert "py-spy&#160;record&#160;for" in shot
    assert "hardware" in shot and "decoding" in shot      # the panes behind are drawn


async def test_the_size_classes_are_there_before_the_first_resize(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """At 80x24 the screen starts with its size classes (-small), so the first resize
    restyles nothing: added then, they restyled every widget before the first frame
    (issue 35, instant start)."""
    from infertop.tui.app import InfertopApp
    seen: list[bool] = []
    real = InfertopApp.on_resize

    def on_resize(self: InfertopApp, event: object) -> None:
        seen.append(self.screen_stack[0].has_class("-small"))
        real(self, event)

    monkeypatch.setattr(InfertopApp, "on_resize", on_resize)
    app = demo_app("healthy")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.screen_stack[0].has_class("-small")
    assert seen and seen[0] is True
