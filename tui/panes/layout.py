"""Stacking a pane's parts into its height and width: what gives way first when it is short."""

from __future__ import annotations

from typing import Any

from rich.text import Span, Text

from infertop.evidence_text import short_evidence
from infertop.findings import Evidence, Finding

from ..zoom_table import row_text
from .cells import fast_text
from .columns import Columns, cut_cell, more_line
from .context import PaneContext


class Expendable:
    """A part of a pane that gives its rows away first when the pane is short
    (legends, trend tables, hints)."""

    def __init__(self, part: Text | Columns | None) -> None:
        self.part = part


def fit_lines(text: Text, width: int) -> Text:
    """A free-form part of a pane (a line of readings, a note) in ``width`` columns: a
    line too long loses whole fields from its end (fields are two spaces apart: "run 19
    wait 222  queue p99 2.1 min"), then is cut between words, never inside a number."""
    if text.cell_len <= width and "\n" not in text.plain:
        return text
    lines = text.split("\n", allow_blank=True)
    if all(line.cell_len <= width for line in lines):
        return text
    out = []
    for line in lines:
        if line.cell_len > width:
            plain = line.plain
            cut = plain.rfind("  ", 0, width)
            if cut <= 0:
                cut = plain.rfind(" ", 0, width - 1)
                line = line[:cut].copy() if cut > 0 else cut_cell(line, width)
                if cut > 0:
                    line.append(" …")
            else:
                line = line[:cut]
            line.rstrip()
        out.append(line)
    return Text("\n", no_wrap=True, overflow="ellipsis", end="").join(out)


def _lines(part: Text | Columns | None) -> int:
    if part is None:     # an Expendable with nothing in it (fit leaves those out)
        return 0
    return part.lines() if isinstance(part, Columns) else part.plain.count("\n") + 1


def subject_lines(ctx: PaneContext, missing: list[tuple[Evidence, Finding]]) -> Text | None:
    """One line per finding subject that no row of the pane tagged: the reading behind a
    finding is on screen even when the pane has no column for it at this size."""
    if not missing:
        return None
    out = Text(no_wrap=True, overflow="ellipsis", end="")
    for n, (ev, f) in enumerate(missing):
        if n:
            out.append("\n")
        sev = f.severity.value
        text = short_evidence(ev)
        if ctx.width and len(f.code) + 1 + len(text) > ctx.width:   # 80x24: the value
            text = short_evidence(ev, compare=False)     # stays, its threshold goes
        out.append(f.code, style=ctx.styles.get(sev, ""))
        out.append(" " + text, style=ctx.styles.get(sev, ""))
    return out


def fit(ctx: PaneContext, *parts: Text | Columns | Expendable | None) -> Text:
    """Stack parts into the pane's height.  When they do not fit, optional parts go
    first, then tables give up rows (flagged rows last), sharing the room fairly; a table
    with no row left is not drawn at all (a header alone says nothing), and one last line
    says how many rows the whole pane hides ("+N more (press K to zoom)").  A finding's
    row is never the one cut while others remain."""
    # Text, Columns or Expendable(part) until the optional parts are settled below
    items: list[Any] = [p for p in parts if p is not None and not (isinstance(p, Columns) and not p)
             and not (isinstance(p, Expendable) and (p.part is None or
                                                   (isinstance(p.part, Columns) and not p.part)))]
    height = ctx.height or 10**9
    hint = f"press {ctx.zoom_key} to zoom" if ctx.zoom_key else ""
    rank = ctx.severity_of

    def total(xs: list[Any]) -> int:
        return sum(_lines(x.part if isinstance(x, Expendable) else x) for x in xs)

    lost = None
    if ctx.layer is not None:     # a finding's reading the pane has no column for
        lost = subject_lines(ctx, ctx.untagged(ctx.layer))
        if lost is not None:
            items.insert(0, lost)
    while total(items) > height and any(isinstance(x, Expendable) for x in items):
        last = max(i for i, x in enumerate(items) if isinstance(x, Expendable))
        items.pop(last)
    items = [x.part if isinstance(x, Expendable) else x for x in items]
    tables = [i for i, x in enumerate(items) if isinstance(x, Columns)]
    # a table's own lines: header and rows (its "+N more" goes into the pane's one line)
    need = {i: items[i].lines() - (1 if items[i].more else 0) for i in tables}
    target = _view_target(ctx, items, tables, need)   # a zoomed pane's scrolling table
    fixed = sum(_lines(x) for x in items if not isinstance(x, Columns))
    limits: dict[int, int] = {}
    if fixed + sum(need.values()) + any(items[i].more for i in tables) > height:
        room = max(0, height - fixed - 1)     # one line for the pane's "+N more"
        # first what must show: a table's flagged rows with its header
        for i in tables:
            nflag = sum(1 for c in items[i].codes if c)
            head = 1 if items[i].headers else 0
            limits[i] = min(need[i], head + nflag) if nflag else 0
        if target is not None:    # it scrolls: its header, a row and its position line
            limits[target] = min(need[target], 3)
        room -= sum(limits.values())
        # then water-filling, small tables whole; a header needs a row under it (the
        # scrolling table last: it takes what is left)
        order = sorted(tables, key=lambda i: (i == target, need[i]))
        for n, i in enumerate(order):
            share = max(0, room) // (len(order) - n)
            give = min(need[i] - limits[i], share)
            head = 1 if items[i].headers else 0
            if limits[i] == 0 and give <= head:
                give = 0
            limits[i] += give
            room -= give
        _give_pinned_rows(items, tables, need, limits, max(0, room))
    if ctx.view is not None and ctx.width:    # zoomed: columns widen to the terminal
        for i in tables:                        # (fit_columns narrows what cannot fit)
            items[i].max_width = max(items[i].max_width, ctx.width - 10)
    lines: list[Text] = []
    hidden = 0
    texts: list[int] = []     # the free-form parts' places in lines (not a finding's)
    for n, p in enumerate(items):
        if n == target:
            lines.append(p.window_text(ctx.view, limits.get(n, need[n]), rank, ctx.width,
                                       ctx.styles))
        elif isinstance(p, Columns):
            if limits.get(n, 1) <= 0:
                hidden += len(p.rows) + p.more
                continue
            t = p.to_text(limits.get(n), rank, hint, ctx.width, say_more=False)
            hidden += p.hidden
            if t.plain:
                lines.append(t)
        else:
            if p is not lost:
                texts.append(len(lines))
            lines.append(fit_lines(p, ctx.width) if ctx.width else p)
    hidden += _cut_overflow(lines, texts, height, hidden)
    if hidden:
        lines.append(more_line(hidden, hint))
    return join_lines(lines)


def _cut_overflow(lines: list[Text], texts: list[int], height: int, hidden: int) -> int:
    """Lines past the pane's height, taken off its free-form parts from the bottom up (a
    long note, then the lines above it; never a table's rows or a finding's line) so the
    "+N more" line is on screen and counts them: the widget cut them off unannounced (the
    memory pane's container note at 80x24 showed a line and stopped).  Returns how many
    lines were taken; ``lines`` is changed in place."""
    used = sum(line.plain.count("\n") + 1 for line in lines)
    if used + (1 if hidden else 0) <= height:
        return 0
    need = used + 1 - height          # the "+N more" line included
    taken = 0
    for n in reversed(texts):
        if need <= 0:
            break
        rows = lines[n].split("\n", allow_blank=True)
        take = min(len(rows), need)
        lines[n] = Text("\n", no_wrap=True, overflow="ellipsis", end="").join(
            rows[:len(rows) - take])
        taken += take
        need -= take
    lines[:] = [line for n, line in enumerate(lines) if not (n in texts and not line.plain)]
    return taken


def _give_pinned_rows(items: list, tables: list[int], need: dict[int, int],
                      limits: dict[int, int], room: int = 0) -> None:
    """A table's pinned rows (decoding's TTFT) shown with its header, its lines taken
    from the table with the most lines beyond its own flagged and pinned rows (a table
    left with a header alone gives that too), after the lines the fair share left over
    (``room``: a table with a header is given none for one line, which a headerless
    table's pinned row can use).  After the fair share, so a pinned row changes nothing
    where the table had room for it anyway."""
    def floor(j: int) -> int:      # what a table keeps: header and must-show rows, or 0
        must = items[j].must_show()
        return min(need[j], (1 if items[j].headers else 0) + must) if must else 0

    for i in tables:
        if not items[i].pinned:
            continue
        want = floor(i)
        while limits[i] < want and room > 0:   # lines the fair share left unused first
            limits[i] += 1
            room -= 1
        while limits[i] < want:
            donors = [j for j in tables if j != i and limits[j] > floor(j)]
            if not donors:
                break
            j = max(donors, key=lambda k: limits[k] - floor(k))
            limits[j] -= 1
            limits[i] += 1
            if items[j].headers and limits[j] == 1 and floor(j) == 0:
                limits[j] = 0            # a header with no row under it says nothing
                limits[i] = min(want, limits[i] + 1)


def join_lines(lines: list[Text]) -> Text:
    """``Text("\\n", no_wrap=True, overflow="ellipsis", end="").join(lines)``: the same
    Text, as one string and one list of spans (fast_text: the lines hold no control code
    to strip), in about half the time of Rich's join."""
    parts: list[str] = []
    spans: list[Span] = []
    pos = 0
    for n, line in enumerate(lines):
        if n:
            parts.append("\n")
            pos += 1
        plain = line.plain
        end = pos + len(plain)
        if line.style:
            spans.append(Span(pos, end, line.style))
        for s, e, st in line.spans:
            spans.append(Span(pos + s, pos + e, st))
        parts.append(plain)
        pos = end
    return fast_text("".join(parts), spans=spans, no_wrap=True, overflow="ellipsis", end="")


def _view_target(ctx: PaneContext, items: list, tables: list[int],
                 need: dict[int, int]) -> int | None:
    """The table a zoomed pane's keys act on (``t`` cycles through the tables with a
    header), and the lines it wants: the rows its filter keeps plus its position line."""
    view = ctx.view
    if view is None:
        return None
    # the pane's main table first (memory: the process list), then the others in order
    sortable = sorted((i for i in tables if items[i].headers), key=lambda i: not items[i].main)
    view.tables = len(sortable)
    if not sortable:
        return None
    target = sortable[view.table % len(sortable)]
    t = items[target]
    q = view.query.strip().lower()
    n = sum(1 for r in t.rows if q in row_text(r)) if q else len(t.rows)
    need[target] = 1 + max(1, n) + 1
    view.last_rows = t.rows     # `s` looks at them to start a numeric column largest first
    return target
