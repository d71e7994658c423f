"""Every server family of issue 25 (keys.FAMILY_VIEWS) reaches every place a user reads:
the doctor report (text and JSON), the HTML and Markdown reports of a recording, and
compare; and the P/D pair's own compare (two recordings of par-pd-slow-transfer).

The runs: the real vLLM 0.32 and SGLang 0.5.23 pages (tests/fixtures/metrics, captured
from the servers) with their counters and histograms growing tick by tick, the demo P/D
pair (NIXL families, the TTFT split, the roles) and KV-event counters as the ZMQ
subscriber emits them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from helpers.snapkit import must
from infertop.compare import compare, render_json, render_text
from infertop.dialects import readings_from_exposition
from infertop.htmlreport import md as md_escape
from infertop.htmlreport import render_html, render_markdown
from infertop.keys import FAMILY_VIEWS, SPECS
from infertop.model import Kind, Reading, Sample, Snapshot, make_labels
from infertop.pipeline import Pipeline
from infertop.probes.sources.demo import DemoSource
from infertop.report import KEY_READINGS, render_report
from infertop.rules.engine import Diagnoser
from infertop.runsummary import summarize
from infertop.settings_shown import shown_layers

FIX = Path(__file__).parent / "fixtures" / "metrics"
VIEWS = sorted({k for keys in FAMILY_VIEWS.values() for k in keys})
TICKS = 40


def _grow(r: Reading, i: int, rate: float) -> Reading:
    """A counter or histogram ``i`` ticks later, ``rate`` events a tick (at least one)."""
    if r.kind is Kind.COUNTER and r.value is not None:
        return replace(r, value=r.value + i * max(1.0, rate * (r.value or 1.0) / 100))
    if r.kind is Kind.HISTOGRAM and r.buckets:
        d = i * max(1.0, rate)
        first = next((b for b, _ in r.buckets if b > 0), 1.0)
        return replace(r, buckets=tuple((b, c + d) for b, c in r.buckets),
                       value=(r.value or 0.0) + d, hist_sum=(r.hist_sum or 0.0) + d * first / 2)
    return r


def _kv_events(i: int, rate: float) -> list[Reading]:
    lab = make_labels(instance="fx-vllm", engine="0", medium="GPU")
    stream = make_labels(instance="fx-vllm", stream="tcp://127.0.0.1:5557")

    def r(key, v, labels=lab):
        return Reading(key, float(v), SPECS[key].unit, labels, kind=SPECS[key].kind)
    return [r("kv.event_blocks_stored_total", 40 * i * rate),
            r("kv.event_blocks_evicted_total", 30 * i * rate),
            r("kv.event_blocks_restored_total", 10 * i * rate),
            r("kv.event_resident_blocks", 1000 + 10 * i * rate),
            r("kv.event_batches_total", 5 * i, stream),
            r("kv.event_batches_dropped_total", i // 10 * rate, stream)]


def run_snapshots(rate: float, transfer_phase: bool, ticks: int = TICKS):
    """Snapshots of the whole set: demo pair + fixture pages + KV events; without
    ``transfer_phase`` the RDMA baseline (the scenario's first 30 s)."""
    pages = {name: readings_from_exposition((FIX / f"{page}.prom").read_text(), name).readings
             for name, page in (("fx-vllm", "vllm-0.32-busy"),
                                ("fx-sglang", "sglang-0.5.23-busy"))}
    src = DemoSource("par-pd-slow-transfer", dialect="vllm", loop=False)
    if transfer_phase:
        for _ in range(35):       # into the TCP fallback
            src.next_sync()
    for i in range(ticks):
        snap = must(src.next_sync(), "a demo tick")
        samples = dict(snap.samples)
        for name, rs in pages.items():
            samples[f"server:{name}"] = Sample(f"server:{name}", snap.time,
                                               tuple(_grow(r, i, rate) for r in rs))
        samples["kvevents:fx"] = Sample("kvevents:fx", snap.time, tuple(_kv_events(i, rate)))
        yield Snapshot(time=snap.time, samples=samples, tick=snap.tick,
                       capabilities=snap.capabilities)


@pytest.fixture(scope="module")
def runs():
    before = summarize(run_snapshots(1.0, False, 29), Diagnoser(), meta={"file": "before"})
    after = summarize(run_snapshots(3.0, True), Diagnoser(), meta={"file": "after"})
    return before, after


@pytest.fixture(scope="module")
def last_frame():
    pipe = Pipeline(Diagnoser(), window=60.0)
    frame = None
    for snap in run_snapshots(1.0, True):
        frame = pipe.feed(snap)
    return frame


def test_every_family_view_is_a_declared_key_and_a_report_key_reading():
    report_keys = {k for keys in KEY_READINGS.values() for k in keys}
    for key in VIEWS:
        assert key in SPECS, key
        assert key in report_keys, f"{key} is in no layer of report.KEY_READINGS"


def test_the_doctor_report_shows_every_family_view(last_frame):
    layers = shown_layers(last_frame)
    text = render_report(last_frame.findings, layers, "text", {"any_source_ok": True})
    js = json.loads(render_report(last_frame.findings, layers, "json",
                                  {"any_source_ok": True}))
    in_json = {r["key"] for layer in js["layers"].values() for r in layer["readings"]} \
        if isinstance(js.get("layers"), dict) else set(json.dumps(js).split('"'))
    for key in VIEWS:
        assert key in text, f"{key} missing from the doctor report"
        assert key in in_json, f"{key} missing from the report's JSON"


def test_recording_reports_and_compare_carry_every_family_view(runs):
    before, after = runs
    c = compare(before, after)
    compared = set(json.loads(render_json(c))["compared_keys"])
    html = render_html(after, title="t", version="v", comparison=c)
    md = render_markdown(after, title="t", version="v", comparison=c)
    for key in VIEWS:
        if key == "server.disagg_role":
            continue   # a fact, not a number: the settings table's "P/D roles read"
        assert any(sid[0] == key for sid in after.series), f"{key} not in the summary"
        assert key in compared, f"{key} was not compared"
        assert key in html, f"{key} missing from the HTML report"
        assert md_escape(key) in md, f"{key} missing from the Markdown report"
    assert after.settings["P/D roles read"] == "decode, prefill"


def test_compare_of_the_pair_before_and_after_the_transfer_slows(runs):
    """RDMA against the TCP fallback: the transfer and the decode side's TTFT moved, the
    prefill instance's TTFT did not (its own series: the role keeps the two apart), and
    PAR-004 with DEC-001 caused by it appeared."""
    before, after = runs
    c = compare(before, after)
    moved = {(m.key, dict(m.labels).get("part"), dict(m.labels).get("role"),
              dict(m.labels).get("quantile")) for m in c.moved}
    assert ("pd.ttft_split_seconds", "transfer", "decode", None) in moved
    assert ("latency.ttft_seconds", None, "decode", "0.99") in moved
    assert ("latency.ttft_seconds", None, "prefill", "0.99") not in moved
    codes = [f["code"] for f in c.appeared]
    assert codes.index("PAR-004") < codes.index("DEC-001")
    text = render_text(c)
    assert "pd.ttft_split_seconds{" in text and "role=decode" in text
