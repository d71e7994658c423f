"""Property (issue 36, item 4: the concurrency dimension): concurrent answers of mixed
sizes and cleanliness through ONE Prometheus client, released in any order, never give a
label with a raw control byte, whatever the interleaving.

Case 1 of the issue: the client kept "this answer holds a control character" in a shared
``self.last.dirty`` and read it after an ``await``; an answer of 256 KB or more is parsed
in a thread, so a small clean answer finishing meanwhile reset the flag and the big dirty
answer's labels skipped cleaning (the flag now travels with its own answer: the client's
``_answer`` returns it beside the data).  The answers here are released by a drawn schedule (an
asyncio.Event each, set in the drawn order with loop turns between), so the interleavings
are the drawn ones, not the machine's timing."""

from __future__ import annotations

import asyncio
import json
import re

import httpx
from hypothesis import given
from hypothesis import strategies as st

from helpers.props import props, tried
from infertop.probes.prometheus.client import PrometheusClient

BIG = 300_000        # past the client's 256 KB thread threshold
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
PAYLOADS = ["\x1b[2J\x1b[H", "\x1b]0;owned\x07", "a\x9bb", "\u202eevil", "\x07\x08"]


@st.composite
def answer(draw) -> tuple[int, str]:
    """(series in a vector answer, the text of its last model label): a control
    character or "clean"; ~120 bytes a series, so the biggest is past BIG."""
    payload = draw(st.sampled_from(PAYLOADS + ["clean"] * 2))
    return draw(st.sampled_from([1, 3, BIG // 120])), payload


def body_of(n: int, payload: str) -> bytes:
    result = [{"metric": {"__name__": "vllm:num_requests_running", "instance": f"h{i}:8000",
                          "model_name": payload if i == n - 1 else f"m{i}"},
               "value": [1.0, "1"]} for i in range(n)]
    return json.dumps({"status": "success", "data": {"resultType": "vector",
                                                     "result": result}}).encode()


@props(30)
@given(answers=st.lists(answer(), min_size=2, max_size=5),
       order=st.randoms(use_true_random=False), turns=st.integers(0, 20))
def test_no_label_of_any_interleaving_holds_a_control_byte(answers, order, turns):
    bodies = [body_of(n, payload) for n, payload in answers]
    released = [asyncio.Event() for _ in answers]
    # the points where a client can be overtaken: an answer arriving, and a big answer's
    # parse in a thread finishing (asyncio.to_thread, gated here); both in a drawn order
    gates: dict[str, asyncio.Event] = {}
    finished = [0]
    real_to_thread = asyncio.to_thread

    async def gated_to_thread(fn, *args, **kw):
        got = await real_to_thread(fn, *args, **kw)
        key = f"thread{finished[0] % len(answers)}"   # the n-th parse to finish
        finished[0] += 1
        gate = gates.setdefault(key, asyncio.Event())
        await gate.wait()
        return got

    async def handle(req: httpx.Request) -> httpx.Response:
        i = int(json_query(req))
        await released[i].wait()
        return httpx.Response(200, content=bodies[i])

    async def go():
        client = PrometheusClient("http://prom:9090", transport=httpx.MockTransport(handle))
        try:
            tasks = [asyncio.ensure_future(client.query(str(i))) for i in range(len(answers))]
            schedule = [("answer", i) for i in range(len(answers))] + \
                [("thread", i) for i in range(len(answers))]
            order.shuffle(schedule)
            for kind, i in schedule:        # release in the drawn order, with loop turns
                if kind == "answer":        # (and the threads' parses) between them
                    released[i].set()
                else:
                    gates.setdefault(f"thread{i}", asyncio.Event()).set()
                for _ in range(turns):
                    await asyncio.sleep(0)
                await asyncio.sleep(0.001 * (turns % 3))
            return await asyncio.gather(*tasks)
        finally:
            await client.close()

    from unittest import mock
    with mock.patch.object(asyncio, "to_thread", gated_to_thread):
        results = asyncio.run(go())
    tried("concurrent Prometheus answers", "client labels")
    for got in results:
        for labels, _ in got:
            for k, v in labels.items():
                assert not CONTROL.search(k + v), (k, v)


def json_query(req: httpx.Request) -> str:
    """The query form's ``query`` value: the answer's index."""
    from urllib.parse import parse_qs
    return parse_qs(req.content.decode())["query"][0]
