"""The Prometheus client and source against hostile answers (httpx.MockTransport) and a
closed port: one-line errors, bounded sizes, cleaned text, no tracebacks."""

from __future__ import annotations

import socket
from typing import Any

import httpx
import pytest

from infertop.model import Status
from infertop.probes.prometheus.client import (
    PrometheusClient,
    PrometheusError,
    _duration,
    _rfc3339,
    clean_text,
    normalize_base,
)
from infertop.probes.prometheus.source import PrometheusSource, build_samples, node_of

# Prometheus's /api/v1/targets answer (JSON): the tests edit copies of it
TARGETS: dict[str, Any] = {"status": "success", "data": {"activeTargets": [
    {"labels": {"instance": "10.0.0.1:8000", "job": "server", "node": "n1"},
     "scrapeUrl": "http://10.0.0.1:8000/metrics", "lastError": "", "health": "up",
     "lastScrape": "2026-12-01T11:00:00.5Z", "scrapeInterval": "15s"},
    {"labels": {"instance": "10.0.0.1:9400", "job": "dcgm", "node": "n1"},
     "scrapeUrl": "http://10.0.0.1:9400/metrics", "lastError": "", "health": "up",
     "lastScrape": "2026-12-01T11:00:01Z", "scrapeInterval": "15s"},
    {"labels": {"instance": "10.0.0.2:8000", "job": "server"},
     "scrapeUrl": "http://10.0.0.2:8000/metrics",
     "lastError": "connection refused\x1b[31m\x07", "health": "down",
     "lastScrape": "2026-12-01T11:00:00+01:00", "scrapeInterval": "1m30s"},
]}}


def vector(*series):
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": m, "value": [1.0, str(v)]} for m, v in series]}}


def transport(answers):
    def handle(req: httpx.Request) -> httpx.Response:
        path = req.url.path
        if path.endswith("/targets"):
            return answers["targets"](req)
        body = req.content.decode()
        which = "dcgm" if "DCGM" in body else "server"
        return answers[which](req)
    return httpx.MockTransport(handle)


def ok(doc):
    return lambda req: httpx.Response(200, json=doc)


async def test_targets_and_queries_become_node_samples():
    answers = {
        "targets": ok(TARGETS),
        "dcgm": ok(vector(({"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0", "node": "n1",
                            "instance": "10.0.0.1:9400", "Hostname": "h1"}, 55))),
        "server": ok(vector(({"__name__": "vllm:num_requests_running", "node": "n1",
                              "instance": "10.0.0.1:8000", "model_name": "m", "engine": "0"},
                             3))),
    }
    src = PrometheusSource("http://prom:9090", transport=transport(answers))
    await src.start()
    snap = await src.next()
    await src.stop()
    assert src.refresh_interval == 7.5          # half the shortest scrape interval
    names = sorted(snap.samples)
    assert "nvml@n1" in names and "server:10.0.0.1:8000@n1" in names
    # the down target has no node label: its node is its host; its reason is cleaned
    dead = snap.samples["server:10.0.0.2:8000@10.0.0.2"]
    assert dead.status is Status.ERROR
    assert "\x1b" not in dead.reason and "\x07" not in dead.reason
    assert "connection refused" in dead.reason
    util = snap.samples["nvml@n1"].find("gpu.util_ratio")[0]
    assert util.value == pytest.approx(0.55)
    running = snap.samples["server:10.0.0.1:8000@n1"].find("server.requests_running")[0]
    assert running.value == 3 and running.label("engine") == "0"
    up = {r.label("instance"): r.value for s in snap.samples.values()
          for r in s.readings if r.key == "node.up"}
    assert up == {"10.0.0.1:8000": 1.0, "10.0.0.1:9400": 1.0, "10.0.0.2:8000": 0.0}


@pytest.mark.parametrize("answer,expect", [
    (lambda r: httpx.Response(200, text="<html>login</html>"), "did not answer JSON"),
    (lambda r: httpx.Response(200, json=[1, 2]), "not a Prometheus API answer"),
    (lambda r: httpx.Response(400, json={"status": "error", "errorType": "bad_data",
                                         "error": "parse error\x1b[2J at char 3"}),
     "Prometheus refused"),
    (lambda r: httpx.Response(200, json={"status": "success", "data": {"x": 1}}),
     "no activeTargets"),
    (lambda r: httpx.Response(302, headers={"location": "http://evil/"}), "redirects"),
    (lambda r: httpx.Response(200, content=b"x" * 5000), "larger than"),
])
async def test_garbage_answers_are_one_line_errors(answer, expect):
    client = PrometheusClient("prom:9090", max_bytes=4096,
                              transport=httpx.MockTransport(answer))
    with pytest.raises(PrometheusError) as e:
        await client.targets()
    await client.close()
    msg = str(e.value)
    assert expect in msg and "\n" not in msg and "\x1b" not in msg


async def test_a_query_answer_that_is_not_a_vector_is_refused():
    doc = {"status": "success", "data": {"resultType": "matrix", "result": []}}
    client = PrometheusClient("prom:9090", transport=httpx.MockTransport(ok(doc)))
    with pytest.raises(PrometheusError, match="not a vector"):
        await client.query("up")
    await client.close()


async def test_prometheus_down_is_an_error_sample_not_an_exception():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]   # closed again when the block ends: nothing listens
    src = PrometheusSource(f"127.0.0.1:{port}", timeout=2.0)
    await src.start()
    snap = await src.next()
    await src.stop()
    assert list(snap.samples) == ["prometheus"]
    sample = snap.samples["prometheus"]
    assert sample.status is Status.ERROR and "cannot connect to Prometheus" in sample.reason


def test_parsers_and_names():
    assert normalize_base("9090") == "http://127.0.0.1:9090"
    assert normalize_base("https://p.example/prom/api/v1/") == "https://p.example/prom"
    with pytest.raises(ValueError):
        normalize_base("ftp://x")
    assert _duration("1m30s") == 90 and _duration("500ms") == 0.5 and _duration("x") is None
    assert _rfc3339("2026-12-01T11:00:00+01:00") == _rfc3339("2026-12-01T10:00:00Z")
    assert _rfc3339("0001-01-01T00:00:00Z") is None     # never scraped
    # escapes made visible (textclean), newlines folded: one line
    assert clean_text("a\x1b[31mb\nc" + "x" * 500, 20).startswith("a\u241b[31mb c")
    assert len(clean_text("y" * 500, 20)) == 20
    assert node_of({"instance": "[::1]:9400"}) == "::1"
    assert node_of({"instance": "h:1", "node": "n9"}) == "n9"


def test_a_healthy_target_with_no_gpu_or_server_data_is_not_a_node():
    from infertop.probes.prometheus.client import Target
    t = Target("127.0.0.1:9090", "prometheus", {"instance": "127.0.0.1:9090",
                                                "job": "prometheus"}, True, None, 15.0)
    assert build_samples([t], [], [], now=0.0) == {}


async def test_control_characters_in_series_labels_are_cleaned():
    doc = vector(({"__name__": "vllm:num_requests_running", "instance": "h:1",
                   "node": "evil\x1b]0;pwned\x07", "model_name": "m\u202eodel"}, 1))
    client = PrometheusClient("prom:9090", transport=httpx.MockTransport(ok(doc)))
    (labels, value), = await client.query("x")
    await client.close()
    assert labels["node"] == "evil\u241b]0;pwned\u2407"          # ␛ and ␇, visible
    assert labels["model_name"] == "m\\u202eodel"               # the override spelled out
    clean = vector(({"__name__": "up", "instance": "h:1"}, 1))
    client = PrometheusClient("prom:9090", transport=httpx.MockTransport(ok(clean)))
    await client.query("up")
    assert client.last.dirty is False      # the fast path: nothing to clean
    await client.close()


async def test_del_and_c1_characters_in_raw_utf8_are_cleaned_too():
    body = ('{"status":"success","data":{"resultType":"vector","result":[{"metric":'
            '{"__name__":"up","instance":"h:1","node":"a\u007fb\u0085c"},"value":[1,"1"]}]}}')
    client = PrometheusClient("prom:9090", transport=httpx.MockTransport(
        lambda r: httpx.Response(200, content=body.encode("utf-8"))))
    (labels, _), = await client.query("up")
    await client.close()
    assert labels["node"] == "a\u2421b\\x85c"                     # ␡ and C1 NEL spelled out


async def test_only_targets_scraped_since_the_last_fetch_are_asked_again():
    """Prometheus's values change once per scrape: the second fetch asks for the one
    target scraped since (by instance), and keeps the other's series from before."""
    import copy
    targets = copy.deepcopy(TARGETS)
    targets["data"]["activeTargets"] = targets["data"]["activeTargets"][:2]
    for i, t in enumerate(targets["data"]["activeTargets"]):
        t["lastScrape"] = "2026-01-01T00:00:0%dZ" % i
        t["lastScrapeDuration"] = 0.01
    asked = []
    util = {"v": 55}

    def handle(req: httpx.Request) -> httpx.Response:
        if req.url.path.endswith("/targets"):
            return httpx.Response(200, json=targets)
        if req.url.path.endswith("/rules"):   # no exported rules: infertop judges
            return httpx.Response(200, json={"status": "success", "data": {"groups": []}})
        q = dict(httpx.QueryParams(req.content.decode()))["query"]
        asked.append(q)
        if "DCGM" in q:
            return httpx.Response(200, json=vector(
                ({"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0", "node": "n1",
                  "instance": "10.0.0.1:9400"}, util["v"])))
        if "instance=~" in q:   # only the dcgm target changed: no server series asked
            return httpx.Response(200, json=vector())
        return httpx.Response(200, json=vector(
            ({"__name__": "vllm:num_requests_running", "node": "n1",
              "instance": "10.0.0.1:8000"}, 3)))
    src = PrometheusSource("prom:9090", transport=httpx.MockTransport(handle), refresh=1e-9)
    await src.start()
    first = await src.next()
    assert src.asked == 2 and not any("instance=~" in q for q in asked)
    # the dcgm target was scraped again (new value); the server target was not
    targets["data"]["activeTargets"][1]["lastScrape"] = "2026-01-01T00:00:05Z"
    util["v"] = 80
    asked.clear()
    second = await src.next()
    await src.stop()
    assert src.asked == 1
    assert all('instance=~"10\\\\.0\\\\.0\\\\.1:9400"' in q for q in asked), asked
    assert second.samples["nvml@n1"].find("gpu.util_ratio")[0].value == pytest.approx(0.80)
    # the server's series were kept: the very same Sample as before (nothing to re-map)
    assert second.samples["server:10.0.0.1:8000@n1"] is first.samples["server:10.0.0.1:8000@n1"]
