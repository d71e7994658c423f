"""Property: HTML and markdown outputs are inert whatever the server or recording said.
Parsed by a real HTML parser (html5lib) and, for markdown, rendered first by a CommonMark
renderer (markdown-it, which Rich already brings): no script, no element that loads
anything, no event handler, no link that is not one of the report's own anchors."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json

import html5lib
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from helpers.props import NASTY, ListSource, feed, props, snapshot_of, tried
from helpers.synthetic_source import SyntheticSource
from infertop.cli.doctor import doctor_meta
from infertop.cli.main import main
from infertop.pipeline import Pipeline
from infertop.probes.base import sample
from infertop.probes.server.metrics import ServerMetricsProbe
from infertop.report import render_report
from infertop.rules.engine import Diagnoser

# markup that would act if it reached a browser as markup
ACTIVE = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "`<b>`x",
          "` <img src=x onerror=alert(1)> `", "[x](javascript:alert(1))", "<a href=//evil>",
          "<svg onload=alert(1)>", "<iframe src=//evil>", "](http://evil)", "![i](http://evil/i)",
          "<!-- ", "&lt;script&gt;", "\\<script>", "| x |", "\n<script>"]
hostile = st.lists(st.sampled_from(ACTIVE + NASTY[:12]) | st.text(max_size=5), min_size=1,
                   max_size=5).map("".join)
LOADS = {"script", "iframe", "img", "object", "embed", "link", "base", "form",
         "frame", "audio", "video", "source", "image"}


def active_parts(html: str) -> list[str]:
    """Elements and attributes that would run or fetch something."""
    bad = []
    doc = html5lib.parse(html, namespaceHTMLElements=False)
    for el in doc.iter():
        tag = el.tag.rsplit("}", 1)[-1] if isinstance(el.tag, str) else ""
        if tag.lower() in LOADS:
            bad.append(f"<{tag}>")
        for name, value in el.attrib.items():
            name = name.rsplit("}", 1)[-1].lower()
            if name.startswith("on") or (tag == "meta" and name == "http-equiv"):
                bad.append(f"{tag} {name}=")
            if name in ("href", "src", "xlink:href", "action", "formaction") and \
                    not value.startswith("#"):
                bad.append(f"{tag} {name}={value!r}")
    return bad


def markdown_html(md: str) -> str:
    return MarkdownIt("commonmark").render(md)


def page_with(model: str, engine: str) -> str:
    def esc(v: str) -> str:
        return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    lab = f'engine="{esc(engine)}",model_name="{esc(model)}"'
    return (f"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{{lab}}} 40\n"
            f"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{{lab}}} 1\n"
            f"# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{{{lab}}} 0.99\n")


@props(25)
@given(model=hostile, engine=hostile)
def test_doctor_markdown_is_inert(model, engine):
    probe = ServerMetricsProbe("http://127.0.0.1:8000")
    base = SyntheticSource(gpus=1, server=False)
    snaps = []
    for i in range(3):
        snap = asyncio.run(base.next())
        readings, meta = probe._map(page_with(model, engine), {})
        srv = sample(probe.name, readings, meta=meta, now=snap.time)
        snaps.append(snapshot_of(snap.time, i + 1, [*snap.samples.values(), srv]))
    source, pipeline = ListSource(snaps), Pipeline(Diagnoser())
    frame = feed(source, pipeline)
    assert frame is not None
    md = render_report(frame.findings, frame.layers(), "markdown",
                       doctor_meta(source, pipeline, frame, 3.0))
    tried("/metrics page", "doctor markdown inert")
    assert active_parts(markdown_html(md)) == []


_BASE: list[bytes] = []


def recording_with(tmp_path_factory, model: str, reason: str) -> str:
    if not _BASE:
        path = tmp_path_factory.mktemp("rec") / "good.jsonl"
        with contextlib.redirect_stderr(io.StringIO()):
            assert main(["record", "-o", str(path), "--source", "demo:healthy",
                         "--duration", "3"]) == 0
        _BASE.extend(path.read_bytes().splitlines())
    out = [_BASE[0]]
    for line in _BASE[1:]:
        snap = json.loads(line)
        for s in snap["samples"].values():
            for r in s["readings"]:
                if "model" in r.get("labels", {}):
                    r["labels"]["model"] = model
                if r["key"] == "server.requests_finished_total":
                    r["labels"]["reason"] = reason
                if r["key"] == "server.info":
                    r["text"] = model
        out.append(json.dumps(snap).encode())
    path = tmp_path_factory.mktemp("p") / "hostile.jsonl"
    path.write_bytes(b"\n".join(out) + b"\n")
    return str(path)


@props(15)
@given(model=hostile, reason=hostile)
def test_report_html_and_markdown_are_inert(tmp_path_factory, model, reason):
    path = recording_with(tmp_path_factory, model, reason)
    for fmt in ("html", "markdown"):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(["report", path, "--format", fmt, "-o", "-"])
        assert rc == 0, err.getvalue()
        html = out.getvalue() if fmt == "html" else markdown_html(out.getvalue())
        assert active_parts(html) == [], fmt
        tried("recording", f"report {fmt} inert")
