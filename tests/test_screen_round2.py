"""The screen's remaining defects (issue 35, item 3): each test failed before its fix."""

from __future__ import annotations

import functools
import re

import pytest

from helpers.panes import frames_of, pane_text
from infertop.cli.main import build_parser, make_pipeline
from infertop.pipeline import Frame
from infertop.probes.sources.demo import DemoSource


@functools.cache
def demo_frame(name: str, ticks: int) -> Frame:
    return frames_of(DemoSource(name), ticks, make_pipeline(build_parser().parse_args([])))


def test_short_decoding_pane_keeps_ttft_beside_a_flagged_row_of_another_table():
    # 80x24: the decoding pane has 5 lines; DEC-004 flags the errors row of the second
    # table, and the latency table (header + TTFT needs 2 lines) used to lose all its rows
    frame = demo_frame("dec-error-restart", 35)
    text = pane_text("decoding", frame, width=38, height=5, wide=False)
    assert "DEC-004" in text, text
    assert any(ln.split()[:1] == ["TTFT"] for ln in text.splitlines()), text


def test_short_memory_pane_keeps_the_kv_cache_row():
    # 80x24 with 8 GPUs and a demo's two-line banner: the memory pane has 3 lines; host
    # RAM took one, "+N more" one, and the fair share gave the tables none (a table with a
    # header gets no single line), so the KV-pressure demo showed no KV cache at all
    frame = frames_of(DemoSource("mem-kv-pressure", gpus=8), 12,
                      make_pipeline(build_parser().parse_args([])))
    text = pane_text("memory", frame, width=38, height=3, wide=False)
    lines = text.splitlines()
    assert len(lines) == 3 and lines[0].split()[:2] == ["KV", "cache"], text
    assert "more (press 3 to zoom)" in lines[-1], text


def test_o_scrolled_right_keeps_the_columns_that_fit():
    # `o` at 80 columns, Right twice: user and role scroll out of view; the drop order
    # (RSS, SM, user, GPU) named the columns of the unscrolled table, so the scrolled one
    # lost GPU, SM and RSS although they fit (only PID, GPU mem and CPU were left)
    from infertop.tui.panes.columns import Columns
    from infertop.tui.screens.processes import HEADERS
    from infertop.tui.zoom_table import TableView
    t = Columns(HEADERS, max_width=60)
    t.cut, t.drop = (2, 8), (7, 5, 1, 3)
    t.add_row("41234", "root", "engine core", "0,1", "60.1 GiB", "80 %", "95 %",
              "12.3 GiB", "python -m vllm.entrypoints.openai.api_server --model x")
    header = t.window_text(TableView(col_offset=2), 10, width=78).plain.splitlines()[0]
    for name in ("PID", "GPU", "GPU mem", "SM", "CPU", "RSS"):
        assert name in [h.strip() for h in header.split("  ")], header
    assert "user" not in header and "role" not in header, header


@pytest.mark.slow   # the fleet screen driven through the whole app
async def test_fleet_engines_at_80_columns_cut_no_number_and_tab_stays_in_the_tables():
    import re

    from textual.widgets import Input

    from helpers.fleet_source import DemoFleetSource
    from helpers.tui_demo import screen_lines
    from infertop.fleet import FleetPipeline, diagnoser_factory
    from infertop.tui.modes import app_for_source
    from infertop.tui.options import AppOptions
    from infertop.tui.screens.fleet import FleetTable
    app = app_for_source(DemoFleetSource(4, {2: ("dec-ttft-burst", 35)}),
                         pipeline=FleetPipeline(diagnoser_factory()), interval=1.0,
                         options=AppOptions(manual_ticks=True))
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(12):
            await app._poll()
        await pilot.pause()
        engines = app.query_one("#fleet-engines", FleetTable)
        for _ in range(3):    # every position of the scrolled table: "4037" never "403…"
            lines = screen_lines(app)
            head = next(i for i, ln in enumerate(lines) if "node " in ln and "run" in ln)
            rows = [ln.rstrip() for ln in lines[head + 1:head + 5]]
            assert not any(re.search(r"\d…$", ln) for ln in rows), rows
            engines.focus()
            await pilot.press("right")
            await pilot.pause()
        for _ in range(3):   # Tab moves between the tables, never into the filter box
            await pilot.press("tab")
            await pilot.pause()
            assert isinstance(app.focused, FleetTable), app.focused
        await pilot.press("slash")      # `/` still opens the filter
        await pilot.pause()
        assert isinstance(app.focused, Input)


def _tokens(text: str) -> set[str]:
    """Words as the source has them; a line may break at a space or after a comma."""
    return {t for t in re.split(r"[\s,]+", text) if t}


def _printed(renderable, width: int) -> str:
    import io

    from rich.console import Console
    con = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    con.print(renderable)
    return con.export_text()


def test_help_catalogue_breaks_no_word_at_80_columns():
    # `?` at 80x24 draws its dialog about 68 cells wide: "synchronisati|on"
    from helpers.tui_demo import demo_app
    from infertop.rules.engine import Diagnoser
    from infertop.tui.screens.help import catalogue_table
    app = demo_app("healthy")
    source = set()
    assert isinstance(app.pipeline.diagnoser, Diagnoser)
    for spec in app.pipeline.diagnoser.catalogue():
        source |= _tokens(f"{spec.code} {spec.layer.value}: {spec.detects} {spec.remedy} "
                          + " ".join(f"{k}={v}" for k, v in spec.thresholds.items()))
    source |= {"thresholds", "remedy"}
    shown = _tokens(_printed(catalogue_table(app), 68))
    assert "synchronisation" in shown
    assert shown <= source, sorted(shown - source)[:10]


def test_findings_screen_breaks_no_word_at_80_columns():
    # `f`: a series' labels ("{engine=0,instance=demo,model=meta-llama/...}") were one
    # token folded mid-value ("model=me|ta-llama")
    from infertop.themes import roles
    from infertop.tui.screens.findings import findings_renderable
    findings = demo_frame("mem-kv-pressure", 40).findings
    assert findings
    source = {"evidence", "remedy", "cause", "explained", "by", "since", "raised", "T"}
    for f in findings:
        source |= _tokens(" ".join([f.code, f.severity.value.upper(), f.title, f.remedy or "",
                                    *f.caused_by, *(e.describe() for e in f.evidence)]))
    shown = _tokens(_printed(findings_renderable(findings, roles({}), lambda t: "T"), 68))
    assert shown <= source, sorted(shown - source)[:10]


def test_compact_hardware_keeps_the_temperature_beside_a_throttle_finding():
    # 80x24, HW-003 on the throttle column: that column was kept for its code in place
    # of the temperature, and cut ("0 H100 sw_thermal,hw_thermal HW-…")
    frame = demo_frame("hw-throttling", 60)
    assert any(f.code == "HW-003" for f in frame.findings)
    text = pane_text("hardware", frame, width=38, height=5, wide=False)
    row = next(ln for ln in text.splitlines() if ln.startswith("0 "))
    assert "HW-003" in row and "°C" in row and "GiB" in row, text
    assert "…" not in row, text


async def test_keys_typed_ahead_into_the_record_prompt_are_kept():
    # P, "1", "5", Enter in one burst (over SSH): the keys reached the prompt screen
    # before its box had the focus and were lost (the app's "5" binding, Enter took 30)
    from textual import events
    from textual.app import App
    from textual.binding import Binding

    from infertop.tui.screens.prompt import NumberPrompt

    class Host(App):
        BINDINGS = [Binding("5", "bell", "zoom")]

    app = Host()
    async with app.run_test() as pilot:
        got: list = []
        app.push_screen(NumberPrompt("seconds?", 30, 1, 600), got.append)
        for key, char in (("1", "1"), ("5", "5"), ("enter", "\r")):
            app.post_message(events.Key(key, char))
        for _ in range(50):
            if got:
                break
            await pilot.pause(0.02)
        assert got == [15.0]
        # and typed once the box has the focus, as before: over the default
        app.push_screen(NumberPrompt("seconds?", 30, 1, 600), got.append)
        await pilot.pause()
        await pilot.press("7", "enter")
        await pilot.pause()
        assert got == [15.0, 7.0]


@pytest.mark.slow   # the demo app driven through its capture screens
async def test_one_esc_closes_a_capture_opened_over_another():
    # p, then p again on the capture screen: a second screen was stacked on the
    # first and Esc had to be pressed twice to see the panes again
    from helpers.tui_demo import demo_app, open_capture
    from infertop.tui.screens.capture import CaptureScreen
    app = demo_app("healthy")
    async with app.run_test(size=(100, 30)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        await open_capture(app, pilot, "p")
        await open_capture(app, pilot, "p")
        assert sum(isinstance(s, CaptureScreen) for s in app.screen_stack) == 1
        await pilot.press("escape")
        await pilot.pause()
        assert len(app.screen_stack) == 1, app.screen_stack


def test_capture_files_name_the_server_the_header_names():
    # the process probe's kind "unknown" (a launcher it does not know) won over the
    # metrics' dialect: captures named "..._unknown_..." under a vLLM the header named
    from types import SimpleNamespace as NS

    from infertop.tui.captures import CaptureController

    def controller(kind, dialect):
        snap = NS(process_meta=lambda: NS(server=NS(kind=kind) if kind else None),
                  server_meta=lambda: NS(dialect=dialect) if dialect else None)
        app = NS(frame=NS(snapshot=snap))
        return CaptureController(app)  # type: ignore[arg-type]  # an app stand-in

    assert controller("unknown", "vllm").server_name() == "vllm"
    assert controller("python", None).server_name() == "server"
    assert controller("sglang", "unknown").server_name() == "sglang"
    assert controller(None, None).server_name() == "server"


def test_n_restart_advice_runs_in_the_servers_own_directory(tmp_path):
    # `n` showed the server's argv ("./serve.sh --model models/llama") as if it could
    # run anywhere: relative to the server's cwd, pasted in another directory it fails
    import subprocess
    import sys
    from types import SimpleNamespace as NS

    from infertop.probes.capture.nsys import restart_under_nsys_command
    from infertop.tui.captures import CaptureController
    where = tmp_path / "my models"
    where.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], cwd=where)
    try:
        info = NS(label=lambda k: str(proc.pid) if k == "pid" else "")
        app = NS(frame=NS(by_key=lambda key: [info] if key == "process.info" else []))
        cwd = CaptureController(app).root_cwd()  # type: ignore[arg-type]  # an app stand-in
    finally:
        proc.kill()
        proc.wait()
    assert cwd == str(where)
    line = restart_under_nsys_command(["./serve.sh", "--model", "models/llama"], "vllm", cwd)
    assert line.startswith(f"cd '{where}' && ") and line.endswith("./serve.sh --model models/llama")
    assert not restart_under_nsys_command(["./serve.sh"], None, "/tmp/a\x1b[2Jb").startswith("cd")


def test_header_does_not_tick_process_when_no_server_process_was_found():
    from types import SimpleNamespace as NS

    from helpers.snapkit import reading, snap
    from infertop.history import History
    from infertop.meta import ProcessMeta
    from infertop.model import Sample, Status
    from infertop.tui.app import InfertopApp
    host = reading("host.cpu_ratio", 0.2)

    def header(meta: ProcessMeta) -> str:
        s = snap(1.0, Sample("process", 1.0, (host,), Status.OK, "", meta=meta))
        me = NS(size=NS(width=100), host="gpu-box", interval=1.0, role_styles={})
        # me: an app stand-in with what the header reads
        frame = Frame(s, [], History())
        return InfertopApp._header_text(me, frame).plain  # type: ignore[arg-type]

    lost = header(ProcessMeta(server=None, reason="no vLLM, SGLang, ... process found"))
    assert "✓process" not in lost and "–process" in lost, lost
    from infertop.meta import ServerInfo
    found = header(ProcessMeta(server=ServerInfo(4242, "vllm", "vllm", "", 8000)))
    assert "✓process" in found, found


def test_snapshot_says_a_dead_servers_reason_once():
    # its line, then "server unreachable (...)" and "no source could be read (...)" each
    # repeated "connection refused at ... — is the server running?"
    from helpers.faulty_server import closed_port
    from helpers.inproc import run_main
    port = closed_port()
    r = run_main("snapshot", "--json", "--no-gpu", "--pid", "4194303",
                 "--url", f"http://127.0.0.1:{port}", "--window", "0.5")
    assert r.returncode == 3, r
    assert r.stderr.count("connection refused") == 1, r.stderr
    name = f"server:127.0.0.1:{port}"
    assert f"server unreachable ({name})" in r.stderr and "no source could be read" in r.stderr


def test_doctor_on_a_dead_url_stops_early_and_says_why():
    # every server refused from the first tick: doctor polled the whole --duration
    from helpers.faulty_server import closed_port
    from helpers.inproc import run_main
    r = run_main("doctor", "--url", f"http://127.0.0.1:{closed_port()}", "--no-gpu",
                 "--duration", "30")
    assert r.returncode == 3, r
    assert "stopped before the 30 s asked for: every server unreachable" in r.stdout, r.stdout
    ticks = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("ticks:"))
    assert int(ticks.split(":")[1]) <= 4, ticks


@pytest.mark.parametrize("cmd", [["doctor", "--duration", "30"],
                                 ["snapshot", "--json", "--window", "30"]])
def test_a_dead_prometheus_is_one_line_on_stderr_and_nothing_on_stdout(cmd):
    # README: "Prometheus down or not Prometheus: one line on stderr, exit 3"; doctor
    # printed a 28-line report on stdout after the whole duration (22 s)
    from helpers.faulty_server import closed_port
    from helpers.inproc import run_main
    r = run_main(*cmd, "--prometheus", f"http://127.0.0.1:{closed_port()}")
    assert r.returncode == 3, r
    assert r.stdout == "", r.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "cannot connect to Prometheus" in lines[0], r.stderr


@pytest.mark.slow   # the demo app driven through a capture screen
async def test_bars_keep_the_full_width_after_a_capture_and_a_scenario_switch():
    # the capture screen's ProgressBar brings Textual's own `Bar { width: 32 }`, which
    # matched infertop's Bar widgets at the next restyle (a scenario switch): header,
    # strip, banner and status stayed 32 columns wide through every resize
    from helpers.tui_demo import demo_app, open_capture
    app = demo_app("healthy")
    async with app.run_test(size=(80, 24)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        await open_capture(app, pilot, "p")
        await pilot.press("greater_than_sign")
        await app._poll()
        await pilot.press("escape")
        await app._poll()
        await pilot.resize_terminal(120, 40)
        await app._poll()
        await pilot.pause()
        main = app.screen_stack[0]
        for sel in ("#header", "#banner", "#status"):
            assert main.query_one(sel).region.width == 120, (sel, main.query_one(sel).region)


def test_compare_aligns_its_columns_and_fails_on_a_regression_when_asked():
    from pathlib import Path

    from helpers.inproc import run_main
    rec = Path(__file__).parent / "corpus"
    before, after = str(rec / "vllm-healthy-steady.jsonl.gz"), str(rec / "vllm-queue-cap.jsonl.gz")
    r = run_main("compare", before, after)
    assert r.returncode == 0, r
    moved = r.stdout.split("READINGS THAT MOVED", 1)[1].splitlines()[1:]
    arrows = {ln.index(" -> ") for ln in moved if " -> " in ln}
    assert len(arrows) == 1, "\n".join(moved)       # one column for "->" on every row
    r = run_main("compare", before, after, "--fail-on-regression")
    assert r.returncode == 1, r
    assert r.stderr.count("\n") == 1 and "regression(s)" in r.stderr and "ttft" in r.stdout
    assert run_main("compare", before, before, "--fail-on-regression").returncode == 0


def test_report_charts_quantities_only_with_room_for_their_labels_and_causes_first():
    # HTML report: the throttle bitmask and a yes/no reading drawn as line charts, the
    # y labels cut (".05 bitmask", "…tokens/s"); Markdown's evidence listed DEC-001 above
    # its cause MEM-001
    from infertop.findings import Evidence, Finding, Layer, Severity
    from infertop.htmlreport import render_html, render_markdown, svg_chart
    from infertop.model import make_labels
    from infertop.runsummary import RunSummary
    run = RunSummary(ticks=3, start=1000.0, end=1002.0)
    g0 = make_labels(gpu="0")
    for key, unit, vals in (("gpu.throttle_reasons", "bitmask", (0.0, 4.0, 68.0)),
                            ("gpu.lost", "", (0.0, 0.0, 1.0)),
                            ("gpu.util_ratio", "ratio", (0.5, 0.7, 0.9))):
        run.series[(key, g0)] = [(1000.0 + i, v) for i, v in enumerate(vals)]
        run.units[key] = unit
    kv = make_labels(engine="0")
    run.findings[("MEM-001", kv)] = Finding(
        "MEM-001", Layer.MEMORY, Severity.CRIT, "KV-cache pressure",
        (Evidence("kv.usage_ratio", kv, 0.97, 0.85, ">=", "ratio"),), "r", 1000.0, kv)
    run.findings[("DEC-001", kv)] = Finding(
        "DEC-001", Layer.DECODING, Severity.CRIT, "TTFT p99 over the SLO", (), "r", 1000.0,
        kv, caused_by=("MEM-001",))
    page = render_html(run, title="t", version="t")
    charts = re.findall(r'aria-label="([^"]+) over the recording"', page)
    assert "gpu.util_ratio" in charts
    assert "gpu.throttle_reasons" not in charts and "gpu.lost" not in charts, charts
    assert "<code>gpu.throttle_reasons{gpu=0}</code>" in page    # tabled, not lost
    md = render_markdown(run, title="t", version="t")
    ev = md[md.index("## Evidence and remedies"):]
    assert ev.index("**MEM-001") < ev.index("**DEC-001")
    tokens = ("throughput.generation_tokens_per_second", g0)
    run.series[tokens] = [(1000.0, 1200.0), (1002.0, 1500.0)]
    run.units[tokens[0]] = "tokens/s"
    svg = svg_chart(run, tokens[0], [tokens], [])
    label = re.search(r'<text x="([\d.]+)"[^>]*text-anchor="end"[^>]*>([^<]*tokens/s)<', svg)
    assert label and float(label.group(1)) >= 6.2 * len(label.group(2)), svg[:400]


def test_compare_and_report_baseline_state_the_window_of_their_medians():
    # compare (10 s windows) and report --baseline (the config's 60 s) gave different TTFT
    # p99s for the same two recordings, neither saying over what window
    from pathlib import Path

    from helpers.inproc import run_main
    rec = Path(__file__).parent / "corpus"
    before, after = str(rec / "vllm-healthy-steady.jsonl.gz"), str(rec / "vllm-queue-cap.jsonl.gz")
    r = run_main("compare", before, after)
    assert r.stdout.count("rates and quantiles over 10 s windows") == 2, r.stdout[:400]
    r = run_main("report", after, "--baseline", before, "--format", "markdown")
    assert "rates and quantiles over 60 s windows" in r.stdout, r.stdout[-800:]
