"""Prometheus API answers decoded into typed structures (issue 36 item 2): the cleaning race
of case 1 (concurrent answers of mixed sizes and cleanliness through one client) and rules
answers of the wrong shape (case 7)."""

from __future__ import annotations

import asyncio
import json
import re

import httpx
import pytest

from infertop.probes.prometheus.aggregates import RulesCheck, alerting_groups
from infertop.probes.prometheus.client import PrometheusClient, PrometheusError
from infertop.probes.prometheus.source import node_of

RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f\x80-\x9f\u202a-\u202e\u2066-\u2069]")
ESC = "\x1b]0;pwned\x07\x1b[2J"


def vector_body(n: int, node: str) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"__name__": "up", "instance": f"h{i}:1", "node": node}, "value": [1, "1"]}
        for i in range(n)]}}).encode()


async def test_concurrent_answers_of_mixed_size_and_cleanliness_are_all_cleaned():
    """Case 1: whether an answer held a control character was kept in the client
    (``self.last.dirty``) and read after an await; a big dirty answer (parsed in a thread)
    lost its cleaning when a small clean one finished meanwhile.  Whatever the interleaving,
    no label value a query returns holds a control character."""
    big = vector_body(6000, "evil" + ESC)         # > 256 kB: decoded off the loop
    small = vector_body(3, "fine")

    async def handle(req: httpx.Request) -> httpx.Response:
        which = req.content.decode()
        if "small" in which:      # spread over the big answers' decoding: interleavings
            await asyncio.sleep(0.002 * int(which.rsplit("small", 1)[1].split("&")[0]))
        return httpx.Response(200, content=big if "big" in which else small)

    client = PrometheusClient("prom:9090", transport=httpx.MockTransport(handle))
    try:
        for _ in range(5):
            answers = await asyncio.gather(client.query("big"),
                                           *(client.query(f"small{i}") for i in range(30)),
                                           client.query("big"))
            for answer in answers:
                for labels, _ in answer:
                    assert not any(RAW.search(v) for v in labels.values()), labels
            assert answers[0][0][0]["node"].startswith("evil\u241b]0;pwned")
    finally:
        await client.close()


def rules_answer(groups) -> dict:
    return {"status": "success", "data": {"groups": groups}}


ALERT = {"labels": {"alertname": "MEM-001", "node": "n1", "instance": "n1:8000"},
         "state": "firing", "value": "1", "activeAt": "2026-12-01T10:00:00Z",
         "annotations": {"title": "t"}}


@pytest.mark.parametrize("groups", [
    [{"name": "infertop-findings", "rules": 5}],
    [{"name": "infertop-findings", "rules": [{"alerts": 5}]}],
    [{"name": "infertop-findings", "rules": [{"alerts": {"a": 1}}]}],
    [{"name": 7, "rules": []}],
    5, "x", None,
])
def test_rules_answers_of_the_wrong_shape_are_one_line_not_a_crash(groups):
    """Case 7: ``"rules": 5`` or ``"alerts": 5`` crashed snapshot, doctor and the fleet
    screen (a TypeError with locals)."""
    loaded, alerts = alerting_groups({"groups": groups}, "infertop-findings", node_of)
    assert (loaded, alerts) == (False, [])

    async def run():
        client = PrometheusClient("prom:9090", transport=httpx.MockTransport(
            lambda req: httpx.Response(200, json=rules_answer(groups))))
        check = RulesCheck(node_of)
        try:
            return check, await check.check(client, 0.0)
        finally:
            await client.close()
    check, (loaded, alerts) = asyncio.run(run())
    assert (loaded, alerts) == (False, [])
    assert "\n" not in check.why and "rules" in check.why and len(check.why) < 300


def test_a_good_rules_answer_still_gives_its_alerts():
    loaded, alerts = alerting_groups({"groups": [{"name": "infertop-findings", "rules": [
        {"name": "x", "alerts": [ALERT, 7, {"state": "firing"}]}]}]}, "infertop-findings",
        node_of)
    assert loaded and [a["labels"]["alertname"] for a in alerts] == ["MEM-001"]


@pytest.mark.parametrize("body", [
    b'{"status": 5, "data": {}}', b'[1, 2]', b'{"status": "success", "data": '
    b'{"resultType": "vector", "result": 5}}', b'{"data": 1}',
    b'{"status": "success", "data": {"resultType": "matrix", "result": []}}',
])
async def test_envelopes_and_vectors_of_the_wrong_shape_are_one_line(body):
    client = PrometheusClient("prom:9090", transport=httpx.MockTransport(
        lambda req: httpx.Response(200, content=body)))
    try:
        with pytest.raises(PrometheusError) as e:
            await client.query("up")
    finally:
        await client.close()
    assert "\n" not in str(e.value)


async def test_one_bad_series_is_skipped_the_rest_kept():
    body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"instance": ["a"]}, "value": [1, "1"]},
        {"metric": {"instance": "h:1"}, "value": [1, "nope"]},
        {"metric": {"instance": "h:2"}, "value": [1, "2"]},
        {"metric": {"instance": "h:3"}, "value": [1, "+Inf"]}]}}).encode()
    client = PrometheusClient("prom:9090", transport=httpx.MockTransport(
        lambda req: httpx.Response(200, content=body)))
    try:
        got = await client.query("up")
    finally:
        await client.close()
    assert [(lab["instance"], v) for lab, v in got] == [("h:2", 2.0), ("h:3", float("inf"))]
