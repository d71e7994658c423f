"""Stale values keep their bound marker (issue 32 item 5): a TTFT p99 that only the
lowest bucket bound limits reads "<10 ms" live; while the server is down its last good
value is shown stale as "<10 ms*", not as a made-up point value "10 ms*"."""

from __future__ import annotations

from helpers.rulekit import SERVER, Feed, Hist
from helpers.rulekit import tick as make_tick
from infertop.model import Status
from infertop.units import fmt_reading

E0 = "engine=0,instance=local,model=m"


def test_a_stale_bounded_quantile_keeps_its_bound():
    f = Feed()
    h = Hist()
    for _ in range(10):
        h.observe(0.004, 5)    # every first token under the lowest bound (10 ms)
        f.tick({"latency.ttft_seconds": {E0: h.value()}, "server.requests_running": {E0: 3}})
    frame = f.pipe.feed(make_tick(f.t, {}, {SERVER: Status.ERROR}))
    p99 = [r for r in frame.by_key("latency.ttft_seconds") if r.label("quantile") == "0.99"]
    assert p99 and p99[0].status is Status.STALE
    assert fmt_reading(p99[0]) == "<10 ms*"
    assert "connection refused" in p99[0].reason      # still says why it is stale
