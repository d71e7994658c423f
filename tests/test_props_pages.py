"""Property: any /metrics page a server can send, read by the scrape's own mapping
(promtext -> dialects), goes through every writer (the six panes at 80x24 and 160x48,
``snapshot --json``, doctor text/JSON/markdown) without an exception, a raw control byte
or a number nobody can read.  Pages: values at the float limits, NaN/Inf, huge and odd
label values (escapes, markup, 20,000 characters), many series, junk lines."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from helpers.props import (
    ListSource,
    check_frame_writers,
    feed,
    floats,
    props,
    snapshot_of,
    text,
    tried,
)
from helpers.synthetic_source import SyntheticSource
from infertop.model import Status
from infertop.pipeline import Pipeline
from infertop.probes.base import sample
from infertop.probes.server.metrics import ServerMetricsProbe
from infertop.promtext import ParseError
from infertop.rules.engine import Diagnoser

GAUGES = ("vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc",
          "vllm:num_preemptions")
COUNTERS = ("vllm:prompt_tokens_total", "vllm:generation_tokens_total",
            "vllm:request_success_total")
HIST = "vllm:time_to_first_token_seconds"


def esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def num(v: float) -> str:
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v)


labelsets = st.lists(st.tuples(text, text), min_size=1, max_size=4)   # (engine, model)


@st.composite
def page(draw) -> str:
    lines: list[str] = []
    series = draw(labelsets)
    extra = draw(st.sampled_from(["", "finished_reason", "le_bogus"]))
    for name in draw(st.lists(st.sampled_from(GAUGES + COUNTERS), min_size=1, unique=True)):
        kind = "counter" if name.endswith("_total") else "gauge"
        lines += [f"# HELP {name} {esc(draw(text)).replace(chr(10), ' ')}", f"# TYPE {name} {kind}"]
        for engine, model in series:
            lab = f'engine="{esc(engine)}",model_name="{esc(model)}"'
            if extra and name.endswith("success_total"):
                lab += f',{extra}="{esc(draw(text))}"'
            lines.append(f"{name}{{{lab}}} {num(draw(floats))}")
    if draw(st.booleans()):
        lines += [f"# TYPE {HIST} histogram"]
        for engine, model in series[:2]:
            lab = f'engine="{esc(engine)}",model_name="{esc(model)}"'
            for le in ("0.1", "1.0", "+Inf"):
                lines.append(f'{HIST}_bucket{{{lab},le="{le}"}} {num(draw(floats))}')
            lines.append(f"{HIST}_sum{{{lab}}} {num(draw(floats))}")
            lines.append(f"{HIST}_count{{{lab}}} {num(draw(floats))}")
    if draw(st.integers(0, 9)) == 0:   # now and then a line that is no exposition at all
        lines.insert(draw(st.integers(0, len(lines))), draw(text).replace("\n", " "))
    body = "\n".join(lines) + "\n"
    # what the scrape hands the parser: bytes off the wire decoded with errors="replace"
    return body.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def server_sample(probe: ServerMetricsProbe, body: str, t: float):
    try:
        readings, meta = probe._map(body, {})
    except ParseError as e:   # the scrape turns this into an error sample
        return sample(probe.name, [], status=Status.ERROR, reason=str(e), now=t)
    return sample(probe.name, readings, meta=meta, now=t)


@props(60)
@given(pages=st.lists(page(), min_size=2, max_size=3))
def test_any_page_goes_through_every_writer(pages):
    import asyncio
    probe = ServerMetricsProbe("http://127.0.0.1:8000")
    base = SyntheticSource(gpus=1, server=False)
    snaps = []
    for i, body in enumerate(pages):
        snap = asyncio.run(base.next())
        samples = [*snap.samples.values(), server_sample(probe, body, snap.time)]
        snaps.append(snapshot_of(snap.time, i + 1, samples))
    source = ListSource(snaps)
    pipeline = Pipeline(Diagnoser())
    frame = feed(source, pipeline)
    assert frame is not None
    tried("/metrics page", "pipeline+rules")
    check_frame_writers(frame, pipeline, source, "/metrics page")
