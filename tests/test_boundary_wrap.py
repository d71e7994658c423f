"""Wrapping the capture screen's stacks at boundaries (tui/widgets/boundary_wrap.py)."""

from __future__ import annotations

import pytest
from rich.console import Console
from rich.text import Text
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll

from helpers.tui_demo import demo_app, open_capture, screen_lines
from infertop.tui.widgets.boundary_wrap import (
    BREAK_AFTER,
    BoundaryWrapped,
    wrap_line,
    wrap_text,
)

CMD = ("Process 15092 [api_server] $ROOT/vllm/bin/python -m "
       "vllm.entrypoints.openai.api_server --model $ROOT/tiny-llama")
FRAME = "      main (vllm/entrypoints/launchers/api_server/entry.py:232)"


def letters(text: str) -> str:
    return "".join(text.split())


@pytest.mark.parametrize("width", [20, 33, 47, 79])
@pytest.mark.parametrize("text", [CMD, FRAME, "x" * 100, "  a " + "b_" * 40 + " c"])
def test_lines_fit_and_lose_nothing(text, width):
    lines = wrap_line(Text(text), width)
    assert all(ln.cell_len <= width for ln in lines), [ln.plain for ln in lines]
    # every character kept, in order (only spaces at the breaks and the cut marks differ)
    assert letters("".join(ln.plain.rstrip("…") for ln in lines)) == letters(text)
    for ln in lines[:-1]:   # each line ends at a word's end, a separator or the cut mark
        assert ln.plain[-1] in BREAK_AFTER or ln.plain.endswith("…") or \
            any(w.endswith(ln.plain.split()[-1]) for w in text.split()), \
            [x.plain for x in lines]


def test_a_long_name_breaks_after_its_separators_not_inside_a_word():
    lines = [ln.plain for ln in wrap_line(Text(CMD), 33)]
    assert "  vllm.entrypoints.openai." in lines and "  api_server --model" in lines, lines
    frame = [ln.plain for ln in wrap_line(Text(FRAME), 33)]
    assert frame == ["      main", "        (vllm/entrypoints/",
                     "        launchers/api_server/", "        entry.py:232)"]


def test_a_run_without_separators_is_cut_with_a_mark_and_goes_on():
    lines = [ln.plain for ln in wrap_line(Text("x" * 70), 33)]
    assert lines[0] == "x" * 32 + "…" and lines[-1].strip("x ") == ""
    assert sum(ln.count("x") for ln in lines) == 70


def test_styles_are_kept_and_short_lines_are_untouched():
    t = Text(CMD)
    t.stylize("reverse", CMD.index("openai"), CMD.index("openai") + 6)   # a search hit
    hit = [ln for ln in wrap_line(t, 33) if "openai" in ln.plain][0]
    start = hit.plain.index("openai")
    assert any(s.style == "reverse" and s.start == start and s.end == start + 6
               for s in hit.spans)
    assert wrap_line(Text("short"), 33)[0].plain == "short"


def test_the_text_wraps_line_by_line():
    body = Text(CMD + "\n" + FRAME + "\n")
    for width in (33, 60):
        con = Console(width=width, record=True, color_system=None)
        con.print(wrap_text(body, width))
        out = con.export_text().rstrip("\n").split("\n")
        assert all(len(ln.rstrip()) <= width for ln in out)
        assert len(out) == len(wrap_line(Text(CMD), width)) + len(wrap_line(Text(FRAME), width))


class Stacks(App):
    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield BoundaryWrapped(Text(CMD + "\n" + FRAME), id="w")


async def test_the_widget_wraps_to_its_width_and_is_as_tall_as_the_wrapped_lines():
    app = Stacks()
    async with app.run_test(size=(33, 20)) as pilot:
        for width in (33, 60):
            await pilot.resize_terminal(width, 20)
            await pilot.pause()
            w = app.query_one("#w", BoundaryWrapped)
            want = wrap_line(Text(CMD), width) + wrap_line(Text(FRAME), width)
            assert w.size == (width, len(want))   # auto height: every wrapped line
            shown = ["".join(seg.text for seg in w.render_line(y)).rstrip()
                     for y in range(w.size.height)]
            assert shown == [ln.plain for ln in want]
            w.update("plain")                     # a str: drawn as a Static draws it
            await pilot.pause()
            assert w.size.height == 1
            w.update(Text(CMD + "\n" + FRAME))


async def open_dump(app, pilot):
    while app.ticks < 1:
        await pilot.pause(0.01)
    return await open_capture(app, pilot, "p")


@pytest.mark.slow   # a demo app driven key by key
async def test_a_drag_over_the_capture_stacks_copies_the_lines_shown():
    """The capture screen's stacks (`p`) were drawn by a plain Rich renderable, which
    Textual does not select: a drag over them copied nothing.  The copied text must be
    the lines the screen shows."""
    app = demo_app("sch-gil-contention")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_dump(app, pilot)
        stacks = screen.query_one("#capture-stacks")
        region = stacks.content_region
        lines = [ln[region.x:region.right].rstrip()
                 for ln in screen_lines(app)[region.y:region.bottom]]
        first = next(i for i, ln in enumerate(lines) if ln.startswith("Process"))
        assert len(lines[first]) > 10 and lines[first + 1].strip(), lines
        # drag from the start of the "Process" line to the 10th cell two lines down
        start = (region.x - stacks.region.x, region.y - stacks.region.y + first)
        end = (start[0] + 9, start[1] + 2)
        await pilot.mouse_down(stacks, offset=start)
        await pilot.hover(stacks, offset=end)
        await pilot.mouse_up(stacks, offset=end)
        await pilot.pause()
        got = screen.get_selected_text()
        assert got == "\n".join([lines[first], lines[first + 1], lines[first + 2][:10]]), \
            (got, lines[first:first + 3])
