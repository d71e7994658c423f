"""Wrapping the capture screen's stacks at boundaries (tui/widgets/boundary_wrap.py)."""

from __future__ import annotations

import pytest
from rich.console import Console
from rich.text import Text

from infertop.tui.widgets.boundary_wrap import BREAK_AFTER, BoundaryWrapped, wrap_line

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


def test_the_renderable_wraps_to_the_width_it_is_drawn_at():
    body = Text(CMD + "\n" + FRAME + "\n")
    for width in (33, 60):
        con = Console(width=width, record=True, color_system=None)
        con.print(BoundaryWrapped(body))
        out = con.export_text().rstrip("\n").split("\n")
        assert all(len(ln.rstrip()) <= width for ln in out)
        assert len(out) == len(wrap_line(Text(CMD), width)) + len(wrap_line(Text(FRAME), width))
