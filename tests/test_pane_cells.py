"""The panes' Cells and the caches around them (tui/panes/cells.py, context.py, widget.py).

A value's Cell is kept from tick to tick by what decides it (``PaneContext.value_text``,
``TickMemo``), and paint keeps the lines of the Text painted before that are unchanged
(``split_lines(text, reuse)``).  Each test here fails if a cache hands back what an earlier
tick showed: a new value, status, reason, text, finding tag or theme must show at once.
Cells and ``fast_text`` must give exactly the Text Rich's own calls give.  The last test
drives the live app: after a tick that changes a value, a status or a finding's tag, a theme
change and a resize, every pane shows what a fresh draw of the same frame shows."""

from __future__ import annotations

import dataclasses
import random
from functools import lru_cache

import pytest
from rich.text import Span, Text

from helpers.panes import frames_of
from helpers.snapkit import reading
from helpers.synthetic_source import SyntheticSource
from infertop.evidence_text import CODE_RE
from infertop.findings import Evidence, Finding, Severity
from infertop.model import Layer, Sample, Status
from infertop.pipeline import Pipeline
from infertop.qbound import note
from infertop.themes import roles
from infertop.tui.app import InfertopApp
from infertop.tui.options import AppOptions
from infertop.tui.panes.cells import (
    Cell,
    TickMemo,
    append_cells,
    as_cell,
    fast_text,
    str_cell,
)
from infertop.tui.panes.columns import Columns
from infertop.tui.panes.context import FrameLookups, PaneContext
from infertop.tui.panes.widget import LayerPane, split_lines

STYLES = ["", "bold", "red", "italic dim"]
WORDS = ["87 %", "█████░", "61 °C", "12 µs", "HW-001", "a\rb", "bel\x07", "tab\tx", "日本", "",
         "MEM-003 x", "–"]


def facts(t: Text) -> tuple:
    return (t.plain, t.spans, t.style, t.justify, t.overflow, t.no_wrap, t.end, len(t),
            t.cell_len)


def random_text(rng: random.Random) -> Text:
    t = Text(style=rng.choice(STYLES))
    for _ in range(rng.randint(0, 4)):
        t.append(rng.choice(WORDS), style=rng.choice(STYLES))
    return t


# --- Cells give Rich's Text ---------------------------------------------------------------


@pytest.mark.parametrize("plain", ["", "abc", "a█\nb °C", "x\ry", "\x07\x08\x0b\x0c\r",
                                   "tab\tand\nlines", "日本語 █"])
def test_fast_text_is_the_text_rich_makes(plain):
    spans = [Span(0, 1, "red")]
    got = fast_text(plain, "bold", spans=list(spans), no_wrap=True, end="",
                    overflow="ellipsis", justify="left")
    want = Text(plain, "bold", spans=list(spans), no_wrap=True, end="", overflow="ellipsis",
                justify="left")
    assert facts(got) == facts(want)
    got.append("more")           # a Text like any other: changes as Rich's does
    want.append("more")
    assert facts(got) == facts(want)


def test_cells_append_and_join_as_rich_does():
    rng = random.Random(29)
    for _ in range(500):
        head = random_text(rng)
        pieces: list = []
        want = head.copy()
        for _ in range(rng.randint(0, 4)):
            kind = rng.random()
            if kind < 0.4:
                t = random_text(rng)
                pieces.append(as_cell(t))
                want.append_text(t)
            elif kind < 0.7:
                w = rng.choice(WORDS)
                pieces.append(w)
                want.append(w)
            else:
                w, st = rng.choice(WORDS), rng.choice(STYLES)
                pieces.append((w, st))
                want.append(w, style=st)
        # Cell.plus: the head Cell's style stays over the whole
        assert facts(as_cell(head).plus(*pieces).to_text()) == facts(
            Text(want.plain, want.style, spans=list(want.spans)))
        # append_cells onto a Text
        assert facts(append_cells(head.copy(), *pieces)) == facts(want)


def test_a_cell_is_cleaned_measured_and_coded_as_its_text():
    for w in WORDS:
        c = str_cell(w, "bold")
        t = Text(w, "bold")
        assert (c.plain, c.style, c.cell_len) == (t.plain, t.style, t.cell_len)
        assert c.codes == tuple(CODE_RE.findall(t.plain))


def test_a_cell_cannot_be_changed():
    c = Cell.make("87 %", "bold")
    with pytest.raises(AttributeError):
        c.plain = "90 %"      # type: ignore[misc]
    d = c.plus(" HW-001")
    assert c.plain == "87 %" and d.plain == "87 % HW-001" and d.codes == ("HW-001",)


def test_columns_know_a_rows_codes_from_its_cells():
    t = Columns(["GPU", "util"])
    t.add_row("0", Cell.make("91 % HW-001", "red"), Text("x MEM-002"))
    t.add_row("1", "80 %")
    assert t.codes == [("HW-001", "MEM-002"), ()]


# --- value_text's memo: never a stale value ------------------------------------------------


@lru_cache(maxsize=1)
def base_frame():
    return frames_of(SyntheticSource(gpus=1), 2)


def cell(memo: TickMemo, r, styles=None, findings=(), key=None) -> tuple[Cell, set]:
    """One tick: the memo turned, ``r`` drawn through a fresh context of a frame with these
    findings; the Cell and what the context tagged."""
    memo.turn()
    frame = dataclasses.replace(base_frame(), findings=list(findings))
    ctx = FrameLookups(frame, styles or roles({}), values=memo).pane(layer=Layer.HARDWARE)
    return ctx.value_text(r, key=key), ctx.tagged


def fresh(r, styles=None, findings=(), key=None) -> Cell:
    return cell(TickMemo(), r, styles, findings, key)[0]


def util(value, **kw):
    return reading("gpu.util_ratio", value, gpu=0, **kw)


def test_a_new_value_or_status_shows_the_same_tick():
    memo = TickMemo()
    steps = [util(0.5), util(0.5), util(0.6),
             util(0.6, status=Status.STALE), util(0.6),
             util(None, status=Status.ERROR), util(None, status=Status.UNSUPPORTED),
             util(None, status=Status.NODATA), util(0.0), util(-0.0), util(0), util(0.6)]
    seen = []
    for r in steps:
        got, _ = cell(memo, r)
        assert got == fresh(r), r
        seen.append(got.plain)
    assert seen == ["50 %", "50 %", "60 %", "60 %*", "60 %", "err", "n/a", "–", "0 %", "-0 %",
                    "0 %", "60 %"]
    assert cell(memo, util(0.6, status=Status.STALE))[0].style == roles({})["stale"]


def test_unit_reason_and_text_are_part_of_what_is_kept():
    memo = TickMemo()
    r = reading("latency.queue_seconds", 0.3, quantile="0.99")
    bounded = dataclasses.replace(r, reason=note("<", 0.3))
    info = reading("server.setting", 1, text="on", name="cuda_graphs")
    for x in (r, bounded, r, dataclasses.replace(r, unit="ratio"), info,
              dataclasses.replace(info, text="off"), info):
        assert cell(memo, x)[0] == fresh(x)
    assert cell(memo, bounded)[0].plain == "<300 ms" and cell(memo, r)[0].plain == "300 ms"


def finding_on(code: str, sev: Severity = Severity.WARN) -> Finding:
    ev = Evidence("gpu.util_ratio", (("gpu", "0"),), 0.9, 0.5, ">=", "ratio")
    return Finding(code, Layer.HARDWARE, sev, "t", (ev,), "", 0.0, (("gpu", "0"),))


def test_a_finding_tag_shows_and_goes_the_same_tick_and_is_recorded():
    memo = TickMemo()     # one reading, tick after tick: each tick finds the last one's
    r = util(0.9)
    plain, tagged = cell(memo, r)
    assert plain.plain == "90 %" and not tagged
    f = finding_on("HW-901")
    got, tagged = cell(memo, r, findings=[f])
    assert got.plain == "90 % HW-901" and got.codes == ("HW-901",)
    assert tagged == {(f.evidence[0], "HW-901")}      # what untagged() reads: replayed
    got, tagged = cell(memo, r, findings=[f])          # kept: the same, tagged again
    assert got.plain == "90 % HW-901" and tagged == {(f.evidence[0], "HW-901")}
    got, tagged = cell(memo, r, findings=[finding_on("HW-902")])     # same severity
    assert got.plain == "90 % HW-902"
    crit = [finding_on("HW-902", Severity.CRIT)]
    got, tagged = cell(memo, r, findings=crit)
    assert got == fresh(r, findings=crit) != fresh(r, findings=[finding_on("HW-902")])
    got, tagged = cell(memo, r)
    assert got.plain == "90 %" and not tagged
    # the same reading under another key (key=): the tag is that key's
    assert cell(memo, r, findings=[f], key="gpu.sm_active_ratio")[0].plain == "90 %"


def test_a_theme_change_restyles_kept_values():
    memo = TickMemo()
    a = roles({})
    b = roles({"warning": "#123456", "foreground": "#654321", "error": "#abcdef"})
    assert a["warn"] != b["warn"] and a["stale"] != b["stale"]
    stale = util(0.6, status=Status.STALE)
    for styles in (a, a, b, a):     # tick after tick: each finds the last one's
        got = cell(memo, stale, styles)[0]
        assert got.style == styles["stale"] and got == fresh(stale, styles)
    flagged = [finding_on("HW-901")]
    for styles in (a, a, b, a):
        got = cell(memo, util(0.9), styles, flagged)[0]
        assert got == fresh(util(0.9), styles, flagged)
        assert {sp.style for sp in got.spans} == {styles["warn"]}


def test_the_memo_keeps_two_ticks_only():
    memo = TickMemo()
    memo.put("a", 1)
    memo.turn()
    assert memo.get("a") == 1      # last tick's: kept (and carried into this one)
    memo.turn()
    memo.turn()
    assert memo.get("a") is None   # two ticks unused: gone
    assert not memo.now and not memo.before


# --- paint's line reuse --------------------------------------------------------------------


def test_split_lines_reuses_only_equal_lines():
    rng = random.Random(7)
    for _ in range(400):
        lines = [random_text(rng) for _ in range(rng.randint(2, 6))]
        old_text = Text("\n", no_wrap=True, end="").join(lines)
        old = split_lines(old_text)
        # change some lines: text, a span's style only, or nothing
        new_lines = []
        for t in lines:
            roll = rng.random()
            if roll < 0.2:
                t = Text(t.plain + "x", t.style, spans=list(t.spans))
            elif roll < 0.4 and t.plain:
                t = Text(t.plain, t.style, spans=list(t.spans) + [Span(0, 1, "blue")])
            new_lines.append(t)
        style = rng.choice(["", "", "dim"])
        text = Text("\n", style=style, no_wrap=True, end="").join(new_lines)
        text.style = style
        got = split_lines(text, old)
        want = text.split("\n", allow_blank=True)
        assert [facts(g) for g in got] == [facts(w) for w in want]
        for g, o in zip(got, old):
            if g is o:    # kept: equal in every way paint and render_line look at
                assert facts(g) == facts(o)


def test_paint_repaints_a_line_whose_style_alone_changed():
    from infertop.tui.panes.hardware import HardwarePane

    pane = HardwarePane()
    pane._painted_lines = split_lines(Text("a\nb\nc", no_wrap=True))
    new = split_lines(Text("a\nb\nc", no_wrap=True, spans=[Span(2, 3, "red")]),
                      pane._painted_lines)
    assert new[0] is pane._painted_lines[0] and new[2] is pane._painted_lines[2]
    assert new[1] is not pane._painted_lines[1] and new[1].spans == [Span(0, 1, "red")]


def test_pane_context_value_text_without_a_memo_is_fresh_each_frame():
    """FrameLookups made without ``values`` (tests, fleet screens) get a memo of their own."""
    frame = frames_of(SyntheticSource(gpus=1), 2)
    a = FrameLookups(frame, roles({})).pane()
    b = FrameLookups(frame, roles({})).pane()
    assert a.values is not b.values
    ctx = PaneContext(frame, roles({}))
    assert ctx.value_text(util(0.25)).plain == "25 %"


def test_join_lines_is_richs_join():
    from infertop.tui.panes.layout import join_lines

    rng = random.Random(11)
    for _ in range(300):
        lines = [random_text(rng) for _ in range(rng.randint(0, 5))]
        want = Text("\n", no_wrap=True, overflow="ellipsis", end="").join(lines)
        assert facts(join_lines(lines)) == facts(want)


# --- the live app: its memo and kept lines across ticks ------------------------------------


def line_facts(lines) -> list[tuple]:
    return [(t.plain, t.spans, t.style) for t in lines]


class TempMoves(SyntheticSource):
    """The synthetic box with GPU 0's temperature (value, status) set by the test."""

    temp: tuple[float | None, Status] = (61.0, Status.OK)

    async def next(self):
        snap = await super().next()
        nvml = snap.samples["nvml"]
        value, status = self.temp
        rs = tuple(dataclasses.replace(r, value=value, status=status)
                   if r.key == "gpu.temp_celsius" and r.label("gpu") == "0" else r
                   for r in nvml.readings)
        samples = dict(snap.samples, nvml=Sample("nvml", nvml.time, rs, nvml.status,
                                                 nvml.reason, nvml.meta))
        return dataclasses.replace(snap, samples=samples)


def assert_fresh(app: InfertopApp) -> str:
    """Every shown pane's painted Text and lines are a fresh draw's; the hardware pane's
    text."""
    assert app.frame is not None
    lookups = FrameLookups(app.frame, app.role_styles, summaries=app.summaries,
                           trends=app._trends)          # a memo of its own: made anew
    for pane in app.panes:
        if not pane.display:
            continue
        size = pane.size
        want = pane._draw_own(lookups, pane.is_zoomed(), pane.table_view, size.width >= 110,
                              max(1, size.height), max(1, size.width))
        got = pane.last_renderable
        assert got == want, pane.pane_layer
        assert isinstance(want, Text), pane.pane_layer     # every pane draws a Text
        assert line_facts(pane._painted_lines) == line_facts(split_lines(want)), pane.pane_layer
    hw = app.query_one("#pane-hardware", LayerPane).last_renderable
    assert isinstance(hw, Text)
    return hw.plain


def temp_finding() -> Finding:
    ev = Evidence("gpu.temp_celsius", (("gpu", "0"),), 90.0, 85.0, ">=", "celsius")
    return Finding("HW-977", Layer.HARDWARE, Severity.CRIT, "hot", (ev,), "", 0.0,
                   (("gpu", "0"),))


@pytest.mark.slow     # the whole app, driven tick by tick
async def test_values_statuses_tags_themes_and_sizes_show_the_same_tick():
    src = TempMoves(gpus=2)
    app = InfertopApp(src, pipeline=Pipeline(), options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(160, 48)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        for _ in range(3):
            await app._poll()
        await pilot.pause()
        assert "61 °C" in assert_fresh(app)
        src.temp = (62.0, Status.OK)              # a value
        await app._poll()
        assert "62 °C" in assert_fresh(app)
        src.temp = (62.0, Status.STALE)           # a status, the same value
        await app._poll()
        assert "62 °C*" in assert_fresh(app)
        src.temp = (62.0, Status.OK)
        await app._poll()
        assert "62 °C*" not in assert_fresh(app)
        frame = app.frame                         # a finding about it, then none
        assert frame is not None
        app._apply(dataclasses.replace(frame, findings=[*frame.findings, temp_finding()]))
        assert "62 °C HW-977" in assert_fresh(app)
        crit_before = app.role_styles["crit"]
        app.theme = "textual-light" if app.theme != "textual-light" else "nord"
        await pilot.pause()                       # the theme: the same frame redrawn
        assert app.role_styles["crit"] != crit_before
        hw = app.query_one("#pane-hardware", LayerPane)
        assert hw._painted_lines is not None
        line = next(t for t in hw._painted_lines if "HW-977" in t.plain)
        assert {sp.style for sp in line.spans if "HW-977" in line.plain[sp.start:sp.end]} \
            == {app.role_styles["crit"]}
        assert "62 °C HW-977" in assert_fresh(app)
        app._apply(frame)
        assert "HW-977" not in assert_fresh(app)
        await pilot.resize_terminal(100, 30)      # a resize: drawn at the new sizes
        await pilot.pause()
        await app._poll()
        await pilot.pause()
        assert_fresh(app)
        src.temp = (63.0, Status.OK)
        await app._poll()
        assert "63 °C" in assert_fresh(app)
