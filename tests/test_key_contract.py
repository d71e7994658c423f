"""The key declaration drives behaviour (issue 34 item 3): a counter's spec names its rate
or says why it has none, and every key a probe declares reaches ``snapshot --json`` when it
is read (with its rate, for a counter that has one).  A new key is one declaration in
infertop/keys.py; these tests fail when it would be silently dropped."""

from __future__ import annotations

import math

from infertop.cli.snapshot import snapshot_json
from infertop.derive import RATES
from infertop.keys import SPECS
from infertop.model import Kind, Reading, Sample, Snapshot
from infertop.pipeline import Pipeline
from infertop.probes.registry import probe_specs
from infertop.rules.engine import Diagnoser


def test_every_counter_names_its_rate_or_why_it_has_none():
    # (a rate-less counter must also say what shows it: shown_as, checked below)
    bad = [k for k, s in SPECS.items() if s.kind is Kind.COUNTER and not s.derived
           and bool(s.rate) == bool(s.no_rate)]
    assert bad == [], "give each counter rate=KEY or no_rate='why' in infertop/keys.py"
    assert not [k for k, s in SPECS.items() if s.kind is not Kind.COUNTER
                and (s.rate or s.no_rate)]
    # derive computes exactly the declared rates, each a derived key
    assert {k: s.rate for k, s in SPECS.items() if s.rate} == RATES
    assert all(SPECS[r].derived for r in RATES.values())


def _reading(key: str, t: int) -> Reading:
    spec = SPECS[key]
    labels = (("gpu", "0"), ("instance", "127.0.0.1:8000"))
    if spec.kind is Kind.HISTOGRAM:
        n = float(10 * (t + 1))
        return Reading(key, n, spec.unit, labels, kind=Kind.HISTOGRAM,
                       buckets=((0.5, n / 2), (math.inf, n)), hist_sum=n / 3)
    if spec.kind is Kind.INFO:
        return Reading(key, 1.0, spec.unit, labels, kind=Kind.INFO, text="x")
    value = float(100 * (t + 1)) if spec.kind is Kind.COUNTER else 0.5
    return Reading(key, value, spec.unit, labels, kind=spec.kind)


def test_every_declared_probe_key_reaches_snapshot_json():
    keys = sorted({k for s in probe_specs() for k in s.keys})
    pipe = Pipeline(Diagnoser())
    frame = None
    for t in range(3):
        snap = Snapshot(1000.0 + t, {"toy": Sample("toy", 1000.0 + t,
                                                   tuple(_reading(k, t) for k in keys))})
        frame = pipe.feed(snap)
    assert frame is not None
    out = snapshot_json(frame)
    seen = {r["key"] for layer in out["layers"].values() for r in layer["readings"]}

    def views(k: str) -> tuple[str, ...]:
        # raw cumulative values stay in History: a counter is seen as its rate, a
        # histogram as its own quantiles, either as the derived keys it declares
        s = SPECS[k]
        return (k, *((s.rate,) if s.rate else ()), *s.shown_as)

    missing = [k for k in keys if not any(v in seen for v in views(k))]
    assert missing == [], ("declared, read, and absent from snapshot --json: give it a "
                           "layer, a rate= or the shown_as= views it reaches the user as")
    # and every declared view really is there (a declaration that drives nothing fails)
    assert [(k, v) for k in keys for v in views(k)[1:] if v not in seen] == []


def test_reading_of_takes_kind_and_unit_from_the_key():
    r = Reading.of("server.prompt_tokens_total", 5.0, {"instance": "a"})
    assert (r.kind, r.unit, r.labels) == (Kind.COUNTER, "tokens", (("instance", "a"),))
    h = Reading.of("latency.ttft_seconds", 3.0)
    assert (h.kind, h.unit) == (Kind.HISTOGRAM, "s")
    from infertop.model import Status
    assert Reading.of("gpu.temp_celsius", 70.0, status=Status.ERROR).value is None
    assert Reading.of("gpu.temp_celsius", 70.0, status=Status.STALE).value == 70.0


def test_the_demo_emits_every_reading_with_its_keys_kind_and_unit():
    from infertop import testing
    from infertop.probes.sources.demo import DemoSource
    specs = {s.name: s for s in probe_specs()}
    for name in ("healthy", "hw-gpu-lost"):
        src = DemoSource(name)
        for _ in range(3):
            snap = src.next_sync()
            assert snap is not None
            for source, sample in snap.samples.items():
                testing.check_samples(specs[source.split(":")[0]], [sample])
