"""Markdown and HTML outputs are inert (issue 22, problem 2).

``doctor --format markdown`` put a model name with a backtick and ``<img src=x
onerror=...>`` raw in a table cell: it left its code span, and rendered as CommonMark the
handler ran.  Here every Markdown writer is rendered by a real CommonMark renderer
(markdown-it-py, with raw HTML on as CommonMark has it, plus GitHub's tables and
strikethrough) and the HTML is parsed by html5lib: no script, no element that loads or
links anything, no event-handler attribute, no link at all (infertop writes none), and
the hostile text still shown as text.  The HTML report goes through the same check.
"""

from __future__ import annotations

import re

import html5lib
import pytest
from markdown_it import MarkdownIt

from helpers.hostile_server import FIXTURES, Route, hostile_server
from infertop.cli.main import main
from infertop.findings import Evidence, Finding, FindingEvent, Severity
from infertop.htmlreport import render_html, render_markdown
from infertop.mdtext import md_code, md_text
from infertop.model import Layer, Reading, Status, make_labels
from infertop.report import render_report
from infertop.runsummary import RunSummary

# Each one broke out of something before, or would have: code spans, raw HTML, entities,
# links, images, autolinks, emphasis, table cells, line-start blocks.
PAYLOADS = [
    "x` <img src=x onerror=alert(1)> `y",
    "``` <script>alert(1)</script>",
    "<a href=javascript:alert(1)>click</a>",
    "[click](javascript:alert(1)) ![i](http://evil.example/x.png)",
    "<http://evil.example/> <mailto:a@evil.example>",
    "&lt;script&gt;alert(1)&lt;/script&gt; &#60;img src=x onerror=alert(1)&#62;",
    "http://evil.example/ www.evil.example a@evil.example",
    "| a | b | <svg onload=alert(1)>",
    "# h1\n<iframe src=//evil.example>\n- item\n1. one",
    "*em* __strong__ ~~del~~ \\",
    "<!-- x --> <?php ?> <![CDATA[ x ]]> <style>*{}</style>",
    '<img src="x" onerror="alert(1)">',
]
EVERYTHING = " ".join(PAYLOADS)

MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])   # html: on (CommonMark)
LOADERS = {"script", "iframe", "frame", "object", "embed", "img", "image", "a", "link",
           "base", "form", "input", "button", "meta", "video", "audio", "source", "style",
           "svg", "math", "use", "foreignobject", "animate", "set"}
URL_ATTRS = {"href", "src", "srcset", "action", "formaction", "data", "background",
             "poster", "xlink:href", "ping", "lowsrc"}


def _local(name: str) -> str:
    return name.rsplit("}", 1)[-1].lower()


def assert_inert_html(page: str, *, allowed_tags: frozenset[str] = frozenset()) -> str:
    """Parse ``page`` as a browser would; fail on anything active.  Returns its text."""
    doc = html5lib.parse(page, namespaceHTMLElements=False)
    for el in doc.iter():
        if not isinstance(el.tag, str):
            continue                                     # comments
        tag = _local(el.tag)
        assert tag not in LOADERS or tag in allowed_tags, f"<{tag}> in output"
        for name, value in el.attrib.items():
            attr = _local(name)
            assert not attr.startswith("on"), f"event handler {attr}={value!r} on <{tag}>"
            assert attr not in URL_ATTRS or value.startswith("#"), f"{attr}={value!r}"
            assert "url(" not in value.lower() and "javascript:" not in value.lower()
    return "".join(doc.itertext())


def assert_inert_markdown(text: str) -> str:
    """Render ``text`` as CommonMark + tables and check the HTML; returns the visible text."""
    return assert_inert_html(MD.render(text))


# ---- the escaping itself -------------------------------------------------------------
@pytest.mark.parametrize("payload", PAYLOADS)
def test_each_payload_renders_as_its_own_text(payload):
    flat = payload.replace("\n", " ")
    for wrap in ("{}", "| {} |\n|---|\n| {} |", "- **X** {}"):
        shown = assert_inert_markdown(wrap.replace("{}", md_text(payload)))
        assert flat.strip() in shown.replace("\n", " "), shown
    code = md_code(payload)
    shown = assert_inert_markdown(f"| k |\n|---|\n| {code} |")
    assert flat.strip() in shown, shown


def test_plain_values_stay_readable():
    assert md_text("vllm.example.com:8000 meta-llama/Llama-3.1-8B 0.97 ratio") == \
        "vllm.example.com:8000 meta-llama/Llama-3.1-8B 0.97 ratio"
    assert md_code("kv.usage_ratio{engine=0}") == "`kv.usage_ratio{engine=0}`"
    assert md_code("a`b") == "a\\`b"          # cannot hold a backtick: plain text instead


# ---- doctor --format markdown ------------------------------------------------------------
def _hostile_doctor_markdown() -> str:
    subject = make_labels(model=EVERYTHING, engine="0")
    f = Finding("MEM-001", Layer.MEMORY, Severity.WARN, EVERYTHING,
                (Evidence("kv.usage_ratio", subject, 0.97, 0.9, ">=", "ratio", EVERYTHING),),
                EVERYTHING, 1_800_000_000.0, subject)
    readings = {"memory": [Reading("kv.usage_ratio", 0.97, "ratio", subject)],
                "decoding": [Reading("latency.ttft_seconds", None, "s", subject,
                                     Status.ERROR, EVERYTHING)]}
    meta = {"source": EVERYTHING, "duration": 3.0, "ticks": 3, "now": 1_800_000_010.0,
            "unreachable": {EVERYTHING: EVERYTHING},
            "unchecked": {"HW-001": [EVERYTHING]},
            "episodes": [{"code": EVERYTHING, "severity": EVERYTHING, "since": 0.5, "raised": 1.0,
                          "cleared": None, "active": True, "summary": EVERYTHING}]}
    return render_report([f], readings, "markdown", meta)


def test_doctor_markdown_is_inert_with_hostile_text_everywhere():
    text = _hostile_doctor_markdown()
    shown = assert_inert_markdown(text)
    assert "onerror=alert(1)" in shown and "javascript:alert(1)" in shown   # shown, as text


def test_doctor_markdown_from_a_hostile_server_is_inert(capsys):
    """The issue's case end to end: the model name on /metrics is the payload."""
    name = "x` <img src=x onerror=alert(1)> `y [c](javascript:alert(1))"
    page = (FIXTURES / "vllm-0.32-busy.prom").read_text().replace("tiny-llama", name)
    with hostile_server({"/metrics": Route(page.encode())}) as url:
        # seconds, not tenths: a loaded test machine must still read the page
        main(["doctor", "--format", "markdown", "--url", url, "--no-gpu", "--duration", "2",
              "--interval", "0.5"])
    out, _ = capsys.readouterr()
    assert "onerror" in out
    shown = assert_inert_markdown(out)
    assert "<img src=x onerror=alert(1)>" in shown


# ---- report --format markdown and html --------------------------------------------------
def _hostile_run() -> RunSummary:
    run = RunSummary(ticks=3, start=1000.0, end=1002.0)
    subject = make_labels(gpu=EVERYTHING)
    run.series[("gpu.util_ratio", subject)] = [(1000.0, 0.5), (1001.0, 0.9), (1002.0, 0.95)]
    run.units["gpu.util_ratio"] = "ratio"
    run.events = [FindingEvent(1001.0, "HW-001", subject, "raised", Severity.WARN,
                               EVERYTHING)]
    run.findings[("HW-001", subject)] = Finding(
        "HW-001", Layer.HARDWARE, Severity.WARN, EVERYTHING,
        (Evidence("gpu.util_ratio", subject, 0.95, 0.9, ">=", "ratio", EVERYTHING),),
        EVERYTHING, 1000.0, subject)
    run.settings = {EVERYTHING: EVERYTHING}
    run.unchecked = {"HW-002": [EVERYTHING]}
    run.meta = {"host": EVERYTHING}
    return run


def test_report_markdown_is_inert():
    text = render_markdown(_hostile_run(), title=EVERYTHING, version=EVERYTHING)
    shown = assert_inert_markdown(text)
    assert "onerror=alert(1)" in shown and "<script>alert(1)</script>" in shown


def test_report_html_is_inert():
    page = render_html(_hostile_run(), title=EVERYTHING, version=EVERYTHING)
    # the report's own charts are inline SVG (no links, no handlers): allowed as elements,
    # their attributes still checked
    shown = assert_inert_html(page, allowed_tags=frozenset({"svg", "style", "meta"}))
    assert "<img src=x onerror=alert(1)>" in shown
    assert not re.search(r"<(script|img|iframe|a)\b", page, re.I)
