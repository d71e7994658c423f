"""Columns._draw builds a table's Text as one string and one span list (tui/panes/base.py):
it must give exactly the Text that appending each cell with Rich does (the oracle below,
the code it replaced), styles, spans, wide characters, cut cells and flagged rows included."""

from __future__ import annotations

import random

import pytest
from rich.text import Text

from infertop.tui.panes.base import Columns

STYLES = ["", "bold", "red", "bold #ff8800", "italic dim"]
WORDS = ["GPU", "0", "87 %", "60.0 GiB", "tx 1.9 GiB/s", "VLLM::EngineCore", "日本語",
         "KV cache", "█████░", "▁▂▃▄▅▆▇█", "", "a-very-long-command-line --with flags",
         "HW-004", "MEM-001"]


def oracle(cols: Columns, order: list[int], width: int) -> Text:
    """The old way: a Text per row built by Text.append_text, joined by append_text."""
    rows = [cols.rows[i] for i in order]
    head = 1 if cols.headers else 0
    if cols.headers:
        rows.insert(0, [Text(h, style=cols.header_style) for h in cols.headers])
    ncol = max((len(r) for r in rows), default=0)
    widths = [min(cols.max_width, max((r[i].cell_len for r in rows if i < len(r)), default=0))
              for i in range(ncol)]
    from infertop.tui.panes.base import CODE_RE, _keep_codes
    for r, row in zip(order, rows[head:]):
        if cols.codes[r]:
            for i, cell in enumerate(row):
                if CODE_RE.search(cell.plain) and i < len(widths) - 1:
                    widths[i] = max(widths[i], cell.cell_len)
    out = Text(no_wrap=True, overflow="ellipsis", end="")
    codes = [()] * head + [cols.codes[r] for r in order]
    for n, row in enumerate(rows):
        if n:
            out.append("\n")
        line = Columns._row_text(row, widths, " " * cols.gap)
        if width and codes[n] and line.cell_len > width:
            line = _keep_codes(line, codes[n], width)
        out.append_text(line)
    return out


def random_cell(rng: random.Random) -> Text:
    words = rng.sample(WORDS, rng.randint(1, 3))
    t = Text(style=rng.choice(STYLES))
    for w in words:
        t.append(w + " ", style=rng.choice(STYLES))
    return t


@pytest.mark.parametrize("seed", range(40))
def test_draw_is_the_text_rich_appending_makes(seed):
    rng = random.Random(seed)
    cols = Columns(["GPU", "util", "memory", "what"][:rng.randint(1, 4)] if rng.random() < .7
                   else None, header_style=rng.choice(STYLES), max_width=rng.randint(4, 30))
    for _ in range(rng.randint(0, 12)):
        cols.add_row(*(random_cell(rng) for _ in range(rng.randint(1, 5))))
    order = list(range(len(cols.rows)))
    rng.shuffle(order)
    width = rng.choice([0, 20, 40, 80])
    got = cols._draw(order, None, width)
    want = oracle(cols, order, width)
    assert got.plain == want.plain
    assert got == want          # same text, same spans (Text compares both)
    assert got.no_wrap and got.end == ""


def test_a_flagged_row_wider_than_the_pane_keeps_its_code_in_view():
    cols = Columns(["what", "value"])
    cols.add_row(Text("x" * 60), Text("91 % MEM-001", style="red"))
    text = cols._draw([0], None, 40)
    line = text.plain.split("\n")[1]
    assert "MEM-001" in line and len(line) <= 40
