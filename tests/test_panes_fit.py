"""Flagged first, labelled, never hidden without a sign (issue 11, item 1).

Frames come from the demo scenarios that reproduced each complaint, drawn through the
pane's own ``render_frame`` at the sizes a pane has at 80x24 (36x4) and 160x48."""

from __future__ import annotations

import functools

from helpers.panes import frames_of, pane_text
from helpers.snapkit import reading, sample, snap
from infertop.cli.main import build_parser, make_pipeline
from infertop.findings import Evidence, Finding, Severity
from infertop.model import Layer
from infertop.pipeline import Frame, Pipeline
from infertop.probes.sources.demo import DemoSource
from infertop.tui.app import strip_text
from infertop.tui.panes.columns import Columns


@functools.cache
def demo_frame(name: str, ticks: int) -> Frame:
    return frames_of(DemoSource(name), ticks, make_pipeline(build_parser().parse_args([])))


def lines_with(text: str, needle: str) -> list[str]:
    return [ln for ln in text.splitlines() if needle in ln]


def test_tp_straggler_tags_only_the_straggler_and_draws_it_first():
    frame = demo_frame("par-tp-straggler", 70)
    assert any(f.code == "PAR-001" for f in frame.findings)
    for layer in ("hardware", "kernels", "parallelism"):
        text = pane_text(layer, frame, width=150, height=40)
        tagged = lines_with(text, "PAR-001")
        assert len(tagged) == 1, (layer, text)
        assert tagged[0].split()[0] == "2"            # GPU 2, the odd one out
        rows = [ln.split()[0] for ln in text.splitlines()[1:5]]
        assert rows[0] == "2" and sorted(rows) == ["0", "1", "2", "3"], (layer, rows)


def test_small_pane_keeps_the_flagged_row_and_says_how_many_are_hidden():
    frame = demo_frame("par-tp-straggler", 70)
    for layer, key in (("hardware", "1"), ("parallelism", "5")):
        text = pane_text(layer, frame, width=36, height=4, wide=False)
        assert len(text.rstrip("\n").splitlines()) <= 4
        assert "PAR-001" in text and lines_with(text, "PAR-001")[0].split()[0] == "2"
        shown = [ln for ln in text.splitlines() if ln[:1].isdigit()]
        more = lines_with(text, f"more (press {key} to zoom)")
        # one count for the whole pane: the GPUs not shown and any other table's rows
        assert len(more) == 1 and int(more[0].split()[0].lstrip("+")) >= 4 - len(shown), text
        assert text.rstrip("\n").splitlines()[-1] == more[0]


def test_a_cut_pane_says_one_more_line_and_draws_no_table_without_rows():
    from infertop.themes import roles
    from infertop.tui.panes.context import PaneContext
    from infertop.tui.panes.layout import fit
    a, b, c = Columns(["k", "v"]), Columns(["x", "y"]), Columns()
    for i in range(5):
        a.add_row(f"a{i}", "1")
        b.add_row(f"b{i}", "2")
    c.add_row("c0", "3")
    c.more = 7                          # rows the pane knew of but never built
    from infertop.history import History
    ctx = PaneContext(Frame(snap(1.0), [], History()), roles({}), height=6, width=40)
    ctx.zoom_key = "9"
    out = fit(ctx, a, b, c).plain.splitlines()
    assert len(out) <= 6, out
    mores = [ln for ln in out if "more" in ln]
    assert mores == [out[-1]] and out[-1].endswith("(press 9 to zoom)"), out
    shown = sum(1 for ln in out if ln[:1] in "abc" and ln[1:2].isdigit())
    assert int(out[-1].split()[0].lstrip("+")) == 11 + 7 - shown, out
    # a header is never drawn without a row under it
    for n, ln in enumerate(out):
        if ln.split()[:2] in (["k", "v"], ["x", "y"]):
            assert n + 1 < len(out) and out[n + 1][:1] in "ab", out


def test_pcie_rx_behind_hw004_is_on_screen_at_every_size():
    frame = demo_frame("hw-busy-not-working", 60)
    assert any(f.code == "HW-004" for f in frame.findings)
    narrow = pane_text("hardware", frame, width=36, height=4, wide=False)
    assert "HW-004" in narrow and "pcie rx" in narrow      # no PCIe column at this size
    wide = pane_text("hardware", frame, width=156, height=40)
    row = lines_with(wide, "HW-004")
    assert len(row) == 1 and "…" not in row[0].split("HW-004")[0][-3:]  # the tag is whole
    par = pane_text("parallelism", frame, width=76, height=12, wide=False)
    assert lines_with(par, "rx ")                          # the direction that is saturated


def test_flagged_code_survives_a_row_wider_than_the_pane():
    t = Columns(["a", "b", "c"])
    t.add_row("x" * 20, "y" * 20, "z 1 s DEC-001")
    t.add_row("ok", "ok", "ok")
    out = t.to_text(width=30).plain.splitlines()
    assert out[1].startswith("xxx") and out[1].endswith("DEC-001") and len(out[1]) <= 31


def two_engine_frame() -> Frame:
    """Engine 1 fails 81 % of requests (DEC-004 about it); engine 0 is fine."""
    def lab(e):
        return dict(instance="127.0.0.1:8000", engine=e, model="m")
    rs = [reading("server.info", 1, text="vllm", **lab(e)) for e in (0, 1)]
    rs += [reading("server.requests_running", 3, **lab(e)) for e in (0, 1)]
    rs += [reading("server.error_ratio", v, **lab(e)) for e, v in ((0, 0.0), (1, 0.81))]
    rs += [reading("kv.prefix_cache_hit_ratio", v, **lab(e)) for e, v in ((0, 0.3), (1, 0.5))]
    s = snap(100.0, sample("server:127.0.0.1:8000", 100.0, rs))
    pipe = Pipeline()
    frame = pipe.feed(s)
    ev = Evidence("server.error_ratio", tuple(sorted((k, str(v)) for k, v in lab(1).items())),
                  0.81, 0.05, ">=", "ratio")
    frame.findings = [Finding("DEC-004", Layer.DECODING, Severity.CRIT, "errors", (ev,), "fix",
                              90.0, ev.labels)]
    return frame


def test_repeated_rows_say_which_engine_and_the_failing_one_comes_first():
    frame = two_engine_frame()
    dec = pane_text("decoding", frame, width=36, height=2, wide=False)
    assert dec.splitlines()[0].startswith("errors e1") and "DEC-004" in dec.splitlines()[0]
    full = pane_text("decoding", frame, width=76, height=20, wide=False)
    assert lines_with(full, "errors e0") and lines_with(full, "errors e1")
    mem = pane_text("memory", frame, width=76, height=20, wide=False)
    assert lines_with(mem, "prefix hits e0") and lines_with(mem, "prefix hits e1")


def test_short_scheduling_pane_keeps_the_engine_core_not_the_api_server():
    frame = demo_frame("par-dp-unbalanced", 30)     # api server, helper, two engine cores
    text = pane_text("scheduling", frame, width=36, height=4, wide=False)
    assert "VLLM::EngineC" in text and "api_serv" not in text and "helper" not in text
    assert "+3 more (press 4 to zoom)" in text, text


def finding(code: str, title: str, sev=Severity.WARN) -> Finding:
    return Finding(code, Layer.HARDWARE, sev, title, (), "", 0.0)


def test_findings_strip_cuts_whole_findings_and_counts_the_rest():
    # the engine's order (a cause first, worst first): the strip keeps it
    fs = [finding("DEC-001", "TTFT p99 249 ms over the 200 ms SLO", Severity.CRIT),
          finding("PAR-001", "GPU 2 out of step with its TP group (0,1,2,3)"),
          finding("HW-004", "GPU 0: PCIe saturated")]
    one = strip_text(fs, {}, 70, 1).plain
    assert len(one) <= 70 and one.startswith("DEC-001 TTFT")
    for f in fs:   # every finding is there, at least as its code, or counted
        assert f.code in one or "more (f)" in one
    tiny = strip_text(fs, {}, 20, 1).plain
    assert len(tiny) <= 20 and tiny.startswith("DEC-001") and tiny.endswith("+2 more (f)")


def test_findings_strip_shows_the_first_findings_value_and_shrinks_its_title_first():
    """issue 23: at 80x24 the strip showed only codes ("MEM-001  DEC-001")."""
    kv = Finding("MEM-001", Layer.MEMORY, Severity.CRIT, "KV cache nearly full: requests "
                 "wait for blocks and get preempted",
                 (Evidence("kv.usage_ratio", (("engine", "0"),), 0.98, 0.95, ">=", "ratio"),),
                 "", 0.0)
    ttft = finding("DEC-001", "TTFT p99 over the SLO", Severity.CRIT)
    for width in (78, 60, 44):
        line = strip_text([kv, ttft], {}, width, 1).plain
        assert len(line) <= width, line
        assert line.startswith("MEM-001 KV" if width > 44 else "MEM-001")
        assert "98 % >= 95 %" in line and ("+1 more (f)" in line or "DEC-001" in line), line
        assert "…" not in line or line.index("…") < line.index("98 %")   # title cut, not value
    short = strip_text([kv, ttft], {}, 44, 1).plain
    assert "e0 KV usage 98 % >= 95 %" in short and "DEC-001" in short, short


def test_cuda_graphs_default_is_not_claimed_without_a_gpu():
    def frame(gpus: int) -> Frame:
        rs = [reading("server.info", 1, text="vllm", instance="x", engine=0),
              reading("server.setting", 1, text="on (default)", name="cuda_graphs")]
        if gpus:
            rs.append(reading("gpu.util_ratio", 0.5, gpu=0))
        return Pipeline().feed(snap(1.0, sample("process", 1.0, rs)))
    assert "n/a (no GPU seen)" in pane_text("kernels", frame(0), width=76, height=20)
    assert "on (default)" in pane_text("kernels", frame(1), width=76, height=20)


def test_a_finding_reading_without_a_column_names_what_it_is():
    from infertop.evidence_text import short_evidence
    ev = Evidence("kv.usage_ratio", (("engine", "0"),), 0.0, 0.7, "<=", "ratio")
    assert short_evidence(ev).startswith("e0 KV usage 0 %")      # not a bare "usage"
    ev = Evidence("gpu.pcie_rx_bytes_per_second", (("gpu", "0"),), 5e10, 4.6e10, ">=", "B/s")
    assert short_evidence(ev).startswith("GPU 0 pcie rx ")


def test_the_queue_line_counts_every_engine_not_just_one_or_several():
    from helpers.big_source import BigSource
    frame = frames_of(BigSource(gpus=2, engines=16), 3)
    text = pane_text("scheduling", frame, width=76, height=20, wide=False)
    assert "(16 engines)" in text, text


def test_findings_strip_puts_a_cause_before_its_worse_symptom():
    """Issue 21: the strip re-sorted by severity and showed a critical DEC-001 before its
    warning cause MEM-001; it keeps the Diagnoser's order (cause, then its symptoms)."""
    from infertop.rules.engine import Diagnoser
    d = Diagnoser()
    mem = Finding("MEM-001", Layer.MEMORY, Severity.WARN, "KV-cache pressure", (), "", 0.0)
    dec = Finding("DEC-001", Layer.DECODING, Severity.CRIT, "TTFT p99 2 s over the SLO", (),
                  "", 0.0)
    active = d._chain([dec, mem])          # what evaluate() hands the screen
    assert [f.code for f in active] == ["MEM-001", "DEC-001"]
    text = strip_text(active, {}, 120, 1).plain
    assert text.index("MEM-001") < text.index("DEC-001")
