"""LayerPane.paint splits a pane's Text into its lines with split_lines (tui/panes/widget.py),
a faster twin of Rich's ``Text.split("\\n", allow_blank=True)``: the lines must be the same
(plain text, spans in order, style and the attributes Rich gives them), for any Text."""

from __future__ import annotations

import random

from rich.text import Span, Text

from infertop.tui.panes.widget import split_lines


def random_text(rng: random.Random) -> Text:
    parts = ["".join(rng.choice("ab c█…1") for _ in range(rng.randint(0, 30)))
             for _ in range(rng.randint(0, 12))]
    plain = "\n".join(parts) + rng.choice(["", "\n", "\n\n"])
    spans = []
    for _ in range(rng.randint(0, 40)):
        a = rng.randint(0, len(plain))   # (Rich fails on a span past the end)
        spans.append(Span(a, rng.randint(a, len(plain)), rng.choice(["bold", "red", "i #f00"])))
    return Text(plain, spans=spans, style=rng.choice(["", "dim"]), no_wrap=rng.random() < .5,
                overflow=rng.choice(["ellipsis", "fold"]), end=rng.choice(["", "\n"]))


def facts(lines) -> list[tuple]:
    return [(t.plain, t.spans, t.style, t.justify, t.overflow, t.no_wrap, t.end) for t in lines]


def test_split_lines_gives_richs_lines():
    rng = random.Random(23)
    for _ in range(2000):
        text = random_text(rng)
        assert facts(split_lines(text)) == facts(text.split("\n", allow_blank=True)), \
            (text.plain, text.spans)


def test_a_span_across_lines_is_cut_at_each_line():
    text = Text("ab\ncd\nef", spans=[Span(1, 7, "bold")])
    assert [(t.plain, t.spans) for t in split_lines(text)] == \
        [("ab", [Span(1, 2, "bold")]), ("cd", [Span(0, 2, "bold")]), ("ef", [Span(0, 1, "bold")])]
