"""Property: any answer a Prometheus (or something posing as one) gives to the fleet's
three questions (targets, DCGM series, server series), in any type, shape, size or with
nulls, goes through the fleet pipeline and every writer (the fleet tables, each node's six
panes at 80x24 and 160x48, ``snapshot --json``, doctor text/JSON/markdown) without an
exception, a raw control byte or a number nobody can read."""

from __future__ import annotations

import asyncio
import json

import httpx
from hypothesis import given
from hypothesis import strategies as st
from rich.text import Text

from helpers.props import (
    LIMITS,
    check_frame_writers,
    check_output,
    props,
    render_panes,
    text,
    tried,
)
from infertop.config import load_config
from infertop.fleet import FleetPipeline, diagnoser_factory
from infertop.probes.prometheus.source import PrometheusSource

SERVER = ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
          "vllm:generation_tokens_total", "vllm:time_to_first_token_seconds_bucket")
DCGM = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_POWER_USAGE")

odd = st.sampled_from([None, [], ["a"], {"a": "b"}, 1, 1.5, True, ""])
plain_value = st.one_of(st.sampled_from(["0", "1", "m", "meta-llama/Llama-3.1-8B"]), odd,
                        st.text(st.characters(codec="ascii", min_codepoint=32,
                                              max_codepoint=126), max_size=30))
label_value = st.one_of(plain_value, text)
INSTANCES = st.sampled_from(["10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.1:9400", "[::1]:8000",
                             "h:1"])
instance = INSTANCES | label_value
sample_value = st.one_of(st.sampled_from(LIMITS).map(str),
                         st.sampled_from(["NaN", "+Inf", "-Inf", "x", "", "1e999"]),
                         st.sampled_from(LIMITS), odd)


@st.composite
def series(draw, names, values) -> dict:
    metric = {"__name__": draw(st.sampled_from(names)), "instance": draw(INSTANCES | values),
              "node": draw(st.sampled_from(["n1", "n2"]) | values)}
    for k in draw(st.lists(st.sampled_from(["engine", "model_name", "gpu", "le", "Hostname",
                                            "x" * 300]), max_size=3, unique=True)):
        metric[k] = draw(values)
    if draw(st.booleans()):   # a label value that is no string (list, dict, null)
        metric[draw(st.sampled_from(["engine", "model_name", "node", "instance"]))] = draw(odd)
    item: dict = {"metric": metric, "value": [1.0, draw(sample_value)]}
    if draw(st.integers(0, 15)) == 0:   # a broken shape now and then
        item = draw(st.sampled_from([{"metric": metric}, {"value": [1, "1"]},
                                     {"metric": [1], "value": "x"}, [], None]))
    return item


@st.composite
def vector(draw, names) -> object:
    # most answers hold no control character: the client cleans every label of an
    # answer that holds one, which would hide what an unclean answer does
    values = draw(st.sampled_from([plain_value, plain_value, label_value]))
    result = draw(st.lists(series(names, values), max_size=6))
    if draw(st.integers(0, 9)) == 0:   # cardinality: one family over many engines
        result += [{"metric": {"__name__": names[0], "instance": "10.0.0.1:8000",
                               "node": "n1", "engine": str(i)}, "value": [1, "1"]}
                   for i in range(draw(st.integers(100, 3000)))]
    doc = {"status": "success", "data": {"resultType": "vector", "result": result}}
    return draw(st.sampled_from([doc] * 30 + [
        {"status": "success", "data": {"resultType": "matrix", "result": result}},
        {"status": "error", "error": "\x1b[31mboom"}, {"status": "success", "data": None},
        {"status": "success"}, [doc], "x"]))


@st.composite
def targets(draw) -> object:
    active = []
    for _ in range(draw(st.integers(0, 5))):
        active.append({"labels": draw(st.one_of(
                           st.fixed_dictionaries({"instance": instance, "job": label_value,
                                                  "node": label_value}), odd)),
                       "health": draw(st.sampled_from(["up", "down", "unknown", None, 1])),
                       "lastError": draw(label_value),
                       "scrapeUrl": draw(label_value),
                       "lastScrape": draw(st.sampled_from(["2026-12-01T11:00:00.5Z",
                                                           "0001-01-01T00:00:00Z", "", None,
                                                           "9999-99-99T99:99:99Z"]) | text),
                       "scrapeInterval": draw(st.sampled_from(["15s", "1m30s", "0s", "", None,
                                                               "1e999s", "-1s"]) | text),
                       "lastScrapeDuration": draw(sample_value)})
    doc = {"status": "success", "data": {"activeTargets": active}}
    return draw(st.sampled_from([doc] * 30 + [{"status": "success", "data": []},
                                             {"status": "success", "data": {"activeTargets": 5}}]))


@st.composite
def rules_answer(draw) -> object:
    """/api/v1/rules: infertop's alerting group (loaded or not) with active alerts whose
    labels, annotations, state, value and time are anything."""
    alerts = []
    for _ in range(draw(st.integers(0, 4))):
        labels = draw(st.one_of(st.fixed_dictionaries(
            {"alertname": st.sampled_from(["MEM-001", "DEC-001", "HW-005"]) | label_value,
             "severity": st.sampled_from(["warn", "crit", "notice"]) | label_value,
             "layer": st.sampled_from(["memory", "decoding", "nope"]) | label_value,
             "node": st.sampled_from(["n1", "n2"]) | label_value,
             "instance": instance}), odd))
        alerts.append({"labels": labels,
                       "annotations": draw(st.one_of(st.fixed_dictionaries(
                           {"title": label_value, "value": label_value,
                            "remedy": label_value}), odd)),
                       "state": draw(st.sampled_from(["firing", "pending", "inactive"]) | odd),
                       "value": draw(sample_value),
                       "activeAt": draw(st.sampled_from(["2026-12-01T11:00:00Z", "", None])
                                        | text)})
    group = {"name": draw(st.sampled_from(["infertop-findings"] * 3 + ["other"])),
             "rules": [{"name": "r", "alerts": alerts}, draw(odd)]}
    doc = {"status": "success", "data": {"groups": [group]}}
    return draw(st.sampled_from([doc] * 10 + [{"status": "success", "data": {"groups": 5}},
                                             {"status": "error", "error": "\x1b[2Jno"}]))


def transport(answers: dict[str, object]) -> httpx.MockTransport:
    def handle(req: httpx.Request) -> httpx.Response:
        which = "targets" if req.url.path.endswith("/targets") else \
            "rules" if req.url.path.endswith("/rules") else \
            "dcgm" if "DCGM" in req.content.decode() else "server"
        if which == "rules" and "rules" not in answers:
            return httpx.Response(404, content=b"404 page not found")
        body = answers[which]
        if isinstance(body, bytes):
            return httpx.Response(200, content=body)
        return httpx.Response(200, content=json.dumps(body).encode())
    return httpx.MockTransport(handle)


def fleet_cells(frame) -> str:
    """The fleet screen's two tables as the cells fill_tables puts in them."""
    from infertop.tui.screens.fleet import (
        _down_or_worst,
        _gpu_cells,
        _num,
        _pct,
        _secs,
        engine_rows,
        gpu_rows,
    )
    out = []
    for r in gpu_rows(frame):
        cells = [r.node, *_gpu_cells(r, 8), _pct(r.mem_ratio), _num(r.temp_max, "{:.0f}C"),
                 _num(r.power, "{:.0f}W"), _num(r.age, "{:.1f}s"), _down_or_worst(r, {})]
        out.append(" ".join(c.plain if isinstance(c, Text) else str(c) for c in cells))
    for e in engine_rows(frame):
        v = e.values
        out.append(" ".join([e.node, e.server, e.model, _secs(v["ttft_p99"]),
                             _secs(v["itl_p50"]), _pct(v["kv"]), _num(v["running"]),
                             _num(v["waiting"]), _num(v["tok_s"]), _pct(v["errors"])]))
    return "\n".join(out)


@props(40)
@given(t=targets(), dcgm=vector(DCGM), server=vector(SERVER),
       raw=st.sampled_from([None] * 9 + [b"", b"{" * 100_000, b"<html>", b"\xff\xfe"]),
       rules=st.none() | rules_answer())
def test_any_prometheus_answer_goes_through_every_writer(t, dcgm, server, raw, rules):
    """The rules API's alerts (the exported rules loaded) join as findings from Prometheus
    and switch the source to aggregates: those answers go through every writer too."""
    answers = {"targets": t, "dcgm": dcgm, "server": raw if raw is not None else server}
    if rules is not None:
        answers["rules"] = rules
    src = PrometheusSource("http://prom:9090", timeout=2.0, refresh=0.0,
                           transport=transport(answers))
    pipe = FleetPipeline(diagnoser_factory(load_config(None)))

    async def go():
        await src.start()
        frame = None
        for _ in range(2):
            frame = pipe.feed(await src.next())
        await src.stop()
        return frame
    frame = asyncio.run(go())
    tried("Prometheus answer", "fleet pipeline")
    if src.rules.loaded:   # the alerts read as findings: the writers below see them
        tried("Prometheus alerts", "fleet pipeline, tables, panes, JSON, doctor")
    check_output(fleet_cells(frame), "fleet tables")
    tried("Prometheus answer", "fleet tables")
    for node, nf in list(frame.nodes.items())[:2]:
        for where, out in render_panes(nf):
            check_output(out, f"node {node} {where}")
    check_frame_writers(frame, pipe, src, "Prometheus answer")
