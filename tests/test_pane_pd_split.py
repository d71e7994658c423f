"""The parallelism pane's P/D pair and its TTFT split (pd.ttft_split_seconds): each part
named, a part not measured said so with its reason (no silent zero), a p99 that is only a
bucket bound shown as one."""

from __future__ import annotations

from helpers.panes import frames_of, pane_text
from helpers.rulekit import Hist, tick
from infertop.pipeline import Pipeline
from infertop.probes.sources.demo import DemoSource
from infertop.rules.engine import Diagnoser


def test_the_pair_and_its_ttft_split_in_the_pane():
    frame = frames_of(DemoSource("par-pd-slow-transfer", loop=False), 70,
                      Pipeline(Diagnoser(), window=60.0))
    text = pane_text("parallelism", frame, width=140, height=40)
    assert "P/D prefill :demo-prefill  →  decode :demo" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("TTFT split :demo"))
    for part in ("prefill ", "transfer ", "decode ", " = "):
        assert part in line, line
    assert "not measured" not in line
    assert "p99 prefill" in text and "decode: a difference of means, no p99" in text
    # the prefill instance observes no transfer: no empty "KV transfer p99 –" line for it
    assert "KV transfer :demo-prefill" not in text


def test_a_decode_instance_alone_says_the_prefill_side_is_not_measured():
    """Only the decode instance read (no --url for its prefill): the prefill part is 'not
    measured' with the reason, the total too; the transfer p99 in NIXL-like buckets whose
    last finite bound it passes is shown as a bound ('>500 ms')."""
    xfer, ttft = Hist((0.001, 0.01, 0.1, 0.5)), Hist((0.1, 0.25, 0.5, 1.0, 2.5))
    lab = "instance=d:8000,engine=0,model=m"
    pipe = Pipeline(Diagnoser(), window=60.0)
    for i in range(20):
        xfer.observe(0.9, 20)
        ttft.observe(1.0, 20)
        frame = pipe.feed(tick(1_000_000.0 + i, {
            "latency.ttft_seconds": {lab: ttft.value()},
            "latency.kv_transfer_seconds": {lab: xfer.value()},
            "server.requests_running": {lab: 4.0}}))
    split = {r.label("part"): r for r in frame.derived if r.key == "pd.ttft_split_seconds"}
    assert not split["prefill"].ok and split["prefill"].value is None
    assert "no prefill instance in view" in split["prefill"].reason
    assert not split["total"].ok and "prefill part is not" in split["total"].reason
    text = pane_text("parallelism", frame, width=160, height=40)
    line = next(ln for ln in text.splitlines() if ln.startswith("TTFT split :8000"))
    assert "prefill not measured" in line and "transfer 900 ms" in line
    assert "no prefill instance in view" in text
    assert "KV transfer p99 >500 ms" in text
