"""``infertop report``: one self-contained HTML file (or Markdown) of a recording.

Checked three ways: html5lib's strict WHATWG parser (any parse error fails), a scan for
anything that would fetch (script, src, href, url(), @import), and headless Chromium
(Debian's ``chromium``) drawing it: the screenshot must show the charts' lines and the
findings' shading in their colours.  The recording is the real vLLM 0.32 one with
``--max-num-seqs 2`` (DEC-001 and SCH-004 raised), the baseline the default run.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import html5lib
import pytest

from helpers.png import count_colour, read_png
from infertop.cli.main import main
from infertop.findings import Evidence, Finding, FindingEvent, Severity
from infertop.htmlreport import (
    LINE_COLOURS,
    SEVERITY_COLOUR,
    md,
    render_html,
    render_markdown,
)
from infertop.model import Layer, make_labels
from infertop.runsummary import RunSummary

REC = Path(__file__).parent / "corpus"   # the real vLLM recordings of the corpus
BEFORE = REC / "vllm-healthy-steady.jsonl.gz"
AFTER = REC / "vllm-queue-cap.jsonl.gz"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def strict_parse(text: str) -> None:
    parser = html5lib.HTMLParser(strict=True)
    parser.parse(text)          # raises ParseError on the first error
    assert parser.errors == []


def assert_self_contained(text: str, urls_in_text: bool = False) -> None:
    """Nothing that loads: no script, src, href, url(), @import; and (unless the page
    quotes URLs as text) no URL but the SVG namespace, which is a name, not a fetch."""
    low = text.lower()
    for needle in ("<script", " src=", " href=", "url(", "@import", "<link", "<iframe",
                   "<img", "<object", "<embed"):
        assert needle not in low, needle
    if not urls_in_text:
        assert set(re.findall(r"https?://[^\s\"'<>]+", text)) <= {"http://www.w3.org/2000/svg"}


@pytest.fixture(scope="module")
def report_html(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("report") / "report.html"
    assert main(["report", str(AFTER), "-o", str(out), "--baseline", str(BEFORE)]) == 0
    return out.read_text(encoding="utf-8")


def test_report_is_valid_html_and_fetches_nothing(report_html):
    strict_parse(report_html)
    assert_self_contained(report_html)
    for section in ("findings", "layers", "evidence", "settings", "unchecked", "compare"):
        assert f'<section id="{section}">' in report_html
    assert report_html.count("<svg") >= 8           # the timeline and the layer charts
    assert report_html.count('class="shade"') >= 4  # findings shaded on their layer's charts


def test_report_content_from_the_real_recording(report_html):
    # the findings with raise times, their evidence and remedies
    assert "DEC-001" in report_html and "SCH-004" in report_html
    assert "still active at the end" in report_html
    assert 'class="remedy"' in report_html
    # charts of the key readings (no GPU in this recording: hardware says so)
    assert "server.requests_waiting{engine=0,model=tiny-llama}" in report_html
    assert "no readings of this layer in the recording" in report_html
    # settings, and the comparison with the default run
    assert "<td>max_num_seqs</td><td>2</td>" in report_html
    assert "<td>max_num_seqs</td><td>(not set)</td><td>2</td>" in report_html
    assert "latency.queue_seconds" in report_html


def hostile_run() -> RunSummary:
    evil = '<script>alert("x")</script>\x1b[31m [click](http://evil.example/)'
    run = RunSummary(ticks=3, start=1000.0, end=1002.0)
    sid = ("gpu.util_ratio", make_labels(gpu=evil))
    run.series[sid] = [(1000.0, 0.5), (1001.0, 0.9), (1002.0, 0.95)]
    run.units["gpu.util_ratio"] = "ratio"
    subject = make_labels(gpu=evil)
    run.events = [FindingEvent(1001.0, "HW-001", subject, "raised", Severity.WARN, evil)]
    run.findings[("HW-001", subject)] = Finding(
        "HW-001", Layer.HARDWARE, Severity.WARN, evil,
        (Evidence("gpu.util_ratio", subject, 0.95, 0.9, ">=", "ratio", evil),), evil, 1000.0,
        subject)
    run.settings = {evil: evil}
    run.meta = {"host": evil}
    return run


def test_hostile_text_is_escaped_in_html_and_markdown():
    page = render_html(hostile_run(), title="<b>x</b>", version="t")
    strict_parse(page)
    assert_self_contained(page, urls_in_text=True)   # the hostile text quotes a URL
    assert "<script" not in page and "\x1b" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    text = render_markdown(hostile_run(), title="<b>x</b>", version="t")
    assert not re.search(r"(?<!\\)<script", text) and "\x1b" not in text
    assert "\\<script\\>" in text                  # CommonMark shows it as text
    assert "\\[click\\]\\(http\\://evil.example/\\)" in text   # no live link in a chat
    assert md("a|b\nc") == "a\\|b c"


def test_markdown_report(capsys):
    assert main(["report", str(AFTER), "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# infertop report: vllm-queue-cap.jsonl.gz")
    assert "| DEC-001 | crit |" in out
    assert "| max\\_num\\_seqs | 2 |" in out
    assert "## Key readings" in out and "server.requests\\_waiting" in out


def test_unwritable_output_is_one_line_exit_2(tmp_path, capsys):
    assert main(["report", str(AFTER), "-o", str(tmp_path / "no" / "such" / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot write" in err


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    """``#rrggbb`` as its three channels."""
    return int(hex_colour[1:3], 16), int(hex_colour[3:5], 16), int(hex_colour[5:7], 16)


def _blend(hex_colour: str, alpha: float, under: tuple[int, int, int] = (0xFA, 0xFA, 0xFA)
           ) -> tuple[int, int, int]:
    r, g, b = (round(alpha * c + (1 - alpha) * u) for c, u in zip(_rgb(hex_colour), under))
    return r, g, b


@pytest.mark.integration   # renders the page in a real headless Chromium
@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium missing: "
                    "apt-get install -y chromium (Debian)")
def test_report_renders_in_headless_chromium(report_html, tmp_path):
    assert CHROMIUM is not None   # the skipif above
    page = tmp_path / "report.html"
    page.write_text(report_html, encoding="utf-8")
    shot = tmp_path / "report.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                    "--hide-scrollbars", "--disable-dev-shm-usage", f"--screenshot={shot}",
                    "--window-size=800,2200", page.as_uri()],
                   capture_output=True, timeout=180, check=True)
    print(f"screenshot: {shot}")
    png = read_png(shot.read_bytes())
    assert png[:2] == (800, 2200)
    # the first chart's line, the crit finding's timeline bar, the warn finding's shading
    assert count_colour(png, _rgb(LINE_COLOURS[0])) > 300
    crit = SEVERITY_COLOUR["crit"]
    assert count_colour(png, _rgb(crit), 10) > 1000
    assert count_colour(png, _blend(SEVERITY_COLOUR["warn"], 0.13), 4) > 10_000


def test_report_timeline_says_the_worst_severity_and_puts_the_cause_first():
    """Issue 21: the timeline said MEM-001 warn while its evidence said crit, and listed
    DEC-001 before its cause MEM-001."""
    run = RunSummary(ticks=30, start=1000.0, end=1030.0)
    kv = make_labels(engine="0")
    run.events = [
        FindingEvent(1004.0, "DEC-001", kv, "raised", Severity.CRIT, "ttft", 1000.0),
        FindingEvent(1009.0, "MEM-001", kv, "raised", Severity.WARN, "kv", 1006.0),
        FindingEvent(1015.0, "MEM-001", kv, "escalated", Severity.CRIT, "kv crit", 1006.0)]
    run.findings[("MEM-001", kv)] = Finding(
        "MEM-001", Layer.MEMORY, Severity.CRIT, "KV-cache pressure",
        (Evidence("kv.usage_ratio", kv, 0.97, 0.85, ">=", "ratio"),), "r", 1006.0, kv,
        raised=1009.0)
    run.findings[("DEC-001", kv)] = Finding(
        "DEC-001", Layer.DECODING, Severity.CRIT, "TTFT p99 2 s over the SLO", (), "r",
        1000.0, kv, caused_by=("MEM-001",), raised=1004.0)
    text = render_markdown(run, title="t", version="t")
    rows = [x for x in text.splitlines() if x.startswith("| MEM-001") or
            x.startswith("| DEC-001")]
    assert rows[0].startswith("| MEM-001 | crit |") and rows[1].startswith("| DEC-001 | crit |")
    assert "since 1970-01-01 00:16:46 UTC, raised 00:16:49" in rows[0]
    page = render_html(run, title="t", version="t")
    ev = page[page.index('id="evidence"'):]
    assert ev.index("MEM-001") < ev.index("DEC-001")
    assert 'severity <span class="sev crit">crit</span>, since' in ev
