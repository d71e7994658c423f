"""Columns._draw builds a table's Text as one string and one span list (tui/panes/columns.py):
it must give exactly the Text that appending each cell with Rich does (the oracle below,
the code it replaced), styles, spans, wide characters, cut cells and flagged rows included."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from rich.text import Text

from infertop.tui.panes.cells import Cell
from infertop.tui.panes.columns import Columns

STYLES = ["", "bold", "red", "bold #ff8800", "italic dim"]
WORDS = ["GPU", "0", "87 %", "60.0 GiB", "tx 1.9 GiB/s", "VLLM::EngineCore", "日本語",
         "KV cache", "█████░", "▁▂▃▄▅▆▇█", "", "a-very-long-command-line --with flags",
         "HW-004", "MEM-001"]


def oracle(cols: Columns, order: list[int], width: int) -> Text:
    """The old way: a Text per row built by Text.append_text, joined by append_text."""
    # the header row as Texts, the others as Cells: Columns._row_text takes either
    rows: list[Sequence[Cell | Text]] = [cols.rows[i] for i in order]
    head = 1 if cols.headers else 0
    if cols.headers:
        rows.insert(0, [Text(h, style=cols.header_style) for h in cols.headers])
    ncol = max((len(r) for r in rows), default=0)
    widths = [min(cols.max_width, max((r[i].cell_len for r in rows if i < len(r)), default=0))
              for i in range(ncol)]
    from infertop.evidence_text import CODE_RE
    from infertop.tui.panes.columns import _keep_codes
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
    natural = oracle(cols, order, 0).plain.split("\n")
    if width and max(len(line) for line in natural) > width:
        width = 0   # a table wider than the pane is fitted (tests below), not cut
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


def cut_number(line: str) -> bool:
    """A digit right before the cut mark: a value shown in part ("58.5…", "249…")."""
    return any(ch.isdigit() and nxt == "…" for ch, nxt in zip(line, line[1:]))


def test_a_narrow_pane_drops_whole_columns_instead_of_cutting_values():
    """issue 23: at 80x24 the decoding pane showed "TTFT 58.51 s 1.3 min …" with p99 cut;
    the columns that do not fit go whole (in the pane's order), the label shrinks first."""
    cols = Columns(["latency", "p50", "p90", "p99", "p99 (trend)"], drop=(4, 2, 1))
    cols.add_row(Text("TTFT e1 :8001"), Text("19.2 s"), Text("1.3 min"),
                 Text("58.51 s DEC-001", style="red"), Text("▁▂▃▄▅▆▇█▇▆▅▄"))
    cols.add_row(Text("ITL"), Text("12 ms"), Text("14 ms"), Text("15 ms"), Text("▁▁▁"))
    for width in (24, 28, 36, 44, 80):
        text = cols._draw([0, 1], None, width)
        lines = text.plain.split("\n")
        assert all(len(line) <= width for line in lines), (width, lines)
        assert not any(cut_number(line) for line in lines), (width, lines)
        assert "58.51 s DEC-001" in lines[1]       # the flagged p99 stays whole
        assert "15 ms" in lines[2]
    narrow = cols._draw([0, 1], None, 28).plain
    assert "p99 (trend)" not in narrow and "p90" not in narrow    # dropped in that order
    wide = cols._draw([0, 1], None, 80).plain
    assert "1.3 min" in wide and "TTFT e1 :8001" in wide          # all fits: nothing goes


def test_a_label_is_never_cut_inside_a_number():
    cols = Columns(["GPU", "util"])
    cols.add_row(Text("GPU 1234567"), Text("87 %"))
    cols.add_row(Text("GPU 2"), Text("12 %"))
    text = cols._draw([0, 1], None, 12).plain
    assert not any(cut_number(line) for line in text.split("\n")), text
    assert "87 %" in text and "12 %" in text
