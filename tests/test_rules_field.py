"""The seeds' own examples and the field's readings, with the jitter real servers have:
they must raise, in the right layer, within 10 s, and stay raised.

* util 95 % with SM active ~30 %, GPM reading 30, 31, 29 % from tick to tick (HW-001);
* a real vLLM KV-cache exhaustion: 16 blocks, usage moving between 0.875 and 1.0 in
  one-block steps, ~2 preemptions a second, 13 requests waiting for 20 s, TTFT p99 ~7 s
  (MEM-001, and DEC-001 named as its symptom).
"""

from __future__ import annotations

import itertools

from helpers.rulekit import Feed, Hist
from infertop.config import SECTIONS, DiagnosisConfig, describe_fields
from infertop.rules.threshold_sources import SOURCES

E0 = "engine=0,model=m"


def test_busy_not_working_with_jittering_gpm_raises_and_holds():
    sm = itertools.cycle([0.30, 0.31, 0.29, 0.33, 0.27])
    util = itertools.cycle([0.95, 0.96, 0.94])
    f = Feed()
    f.run(lambda: {"gpu.util_ratio": {"gpu=0": 0.6}, "gpu.sm_active_ratio": {"gpu=0": 0.55}}, 12)
    onset = f.t
    first = None
    for _ in range(60):
        f.tick({"gpu.util_ratio": {"gpu=0": next(util)}, "gpu.sm_active_ratio": {"gpu=0": next(sm)}})
        if first is None and f.active("HW-001"):
            first = f.t - 1
    assert first is not None and first - onset <= 10
    assert len(f.events("HW-001", "raised")) == 1 and not f.events("HW-001", "cleared")
    fin = f.active("HW-001")[0]
    assert fin.layer.value == "hardware"
    sm_ev = next(e for e in fin.evidence if e.key == "gpu.sm_active_ratio")
    assert isinstance(sm_ev.value, float) and 0.29 <= sm_ev.value <= 0.31
    assert "median over 10 s" in sm_ev.note


class KvExhaustion:
    """Readings as a real vLLM with --num-gpu-blocks-override 16 under long prompts."""

    BLOCKS = itertools.cycle([14, 16, 15, 16, 14, 15, 16, 16, 15, 14])

    def __init__(self):
        self.pre = 3.0
        self.ttft = Hist((0.1, 0.25, 0.5, 1, 2.5, 5, 7.5, 10))
        self.t = 0

    def healthy(self):
        self.ttft.observe(0.08, 3)
        return self._t(0.3, 0, 2)

    def exhausted(self):
        self.t += 1
        self.pre += 2 if self.t % 2 else 2  # ~2 preemptions a second
        self.ttft.observe(7.0, 2)
        return self._t(next(self.BLOCKS) / 16, 13, 3)

    def _t(self, kv, waiting, running):
        return {"kv.usage_ratio": {E0: kv}, "server.requests_waiting": {E0: waiting},
                "server.requests_running": {E0: running},
                "server.preemptions_total": {E0: self.pre},
                "latency.ttft_seconds": {E0: self.ttft.value()}}


def test_real_kv_exhaustion_raises_memory_finding_as_the_cause():
    k = KvExhaustion()
    f = Feed()
    f.run(k.healthy, 15)
    onset = f.t
    first = None
    # 13 requests waiting for 40 s: ~2 preemptions a second, critical once the 60 s
    # window's rate (Prometheus's rate(): docs/rules.md#windows) reaches 1/s
    for _ in range(40):
        f.tick(k.exhausted())
        if first is None and f.active("MEM-001"):
            first = f.t - 1
    assert first is not None and first - onset <= 10, f.diag.events
    mem = f.active("MEM-001")[0]
    assert mem.layer.value == "memory" and mem.severity.value == "crit"
    kv = next(e for e in mem.evidence if e.key == "kv.usage_ratio")
    assert isinstance(kv.value, float) and kv.value >= 0.875 and "median" in kv.note
    dec = f.active("DEC-001")
    assert dec, [x.code for x in f.findings]
    assert "caused by MEM-001 KV-cache pressure" in dec[0].title  # the symptom names its cause
    assert dec[0].caused_by == ("MEM-001",)
    codes = [x.code for x in f.findings]
    assert codes.index("MEM-001") < codes.index("DEC-001")  # the cause leads
    from infertop.report import exit_code
    assert exit_code(f.findings, True) == 2  # the worst of the chain


def test_a_symptom_without_a_cause_names_none():
    k = KvExhaustion()
    f = Feed()
    f.run(k.healthy, 15)
    for _ in range(20):  # slow first tokens, but the KV cache is fine and nothing waits
        k.ttft.observe(7.0, 2)
        f.tick(k._t(0.3, 0, 3))
    dec = f.active("DEC-001")
    assert dec and dec[0].caused_by == () and "caused by" not in dec[0].title


def test_every_threshold_default_has_a_source():
    keys = {f"{sec}.{name}" for sec, cls in SECTIONS.items()
            for name, *_ in describe_fields(cls)}
    missing = sorted(k for k in keys if not SOURCES.get(k))
    assert not missing, missing
    assert not set(SOURCES) - keys, sorted(set(SOURCES) - keys)  # no stale entries
    assert DiagnosisConfig().thresholds.busy_sm_active_max >= 0.3  # seeds' 30 % raises
