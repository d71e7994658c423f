"""SGLang 0.5.23's own families on pages captured from the real server
(scripts/realserver/recipe-sglang.sh, CPU engine, tiny-llama): idle, 8 running, a queue
(--max-running-requests 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infertop.dialects import readings_from_exposition

METRICS = Path(__file__).parent / "fixtures" / "metrics"
INST = "127.0.0.1:30011"


def page(name: str):
    return readings_from_exposition((METRICS / f"sglang-0.5.23-{name}.prom").read_text(), INST)


def by(e, key: str) -> dict[str, float]:
    """label values (other than instance/model) -> value, for one key."""
    out = {}
    for r in e.readings:
        if r.key == key:
            rest = ",".join(f"{k}={v}" for k, v in r.labels if k not in ("instance", "model"))
            out[rest] = r.value
    return out


def test_idle_page():
    e = page("idle")
    assert e.dialect == "sglang" and e.family_count == 81
    assert e.meta.model == "tiny-llama"
    assert by(e, "kv.used_tokens") == {"": 0.0}
    assert by(e, "kv.available_tokens") == {"": 8172.0}
    assert by(e, "kv.evictable_tokens") == {"": 20.0}    # the warm-up prompt, cached
    # the pool: used + free + evictable = --max-total-tokens 8192
    assert sum(by(e, k)[""] for k in ("kv.used_tokens", "kv.available_tokens",
                                     "kv.evictable_tokens")) == 8192.0
    assert by(e, "disagg.queue_requests") == {f"queue={q}": 0.0 for q in (
        "prefill_bootstrap", "prefill_inflight", "decode_prealloc", "decode_transfer")}
    assert by(e, "server.requests_retracted") == {"": 0.0}
    assert by(e, "server.requests_paused") == {"": 0.0}
    assert by(e, "server.utilization_ratio") == {"": 0.0}
    assert by(e, "spec.batch_acceptance_ratio") == {"": 0.0}
    assert set(by(e, "latency.stage_seconds")) == {"stage=request_process",
                                                   "stage=prefill_forward"}
    idle = by(e, "server.scheduler_idle_seconds_total")[""]
    cpu = by(e, "server.scheduler_cpu_seconds_total")[""]
    assert idle > 40 and 0 < cpu < idle     # --sleep-on-idle: the scheduler mostly sleeps


def test_busy_page_8_running():
    e = page("busy")
    assert by(e, "server.requests_running") == {"": 8.0}
    assert by(e, "kv.used_tokens") == {"": 754.0}
    assert by(e, "kv.usage_ratio") == {"": pytest.approx(0.09)}
    assert by(e, "kv.batch_prefix_hit_ratio")[""] == pytest.approx(1 / 65)
    # scheduler time moved between the two captures
    assert by(e, "server.scheduler_cpu_seconds_total")[""] > \
        by(page("idle"), "server.scheduler_cpu_seconds_total")[""]


def test_queued_page_6_waiting_behind_max_running_2():
    """--max-running-requests 2 with 8 concurrent clients: 2 running, 6 in the queue; the
    scheduler gauges carry an extra pid label on this page, dropped like tp_rank."""
    e = page("queued")
    assert by(e, "server.requests_running") == {"": 2.0}
    assert by(e, "server.requests_waiting") == {"": 6.0}
    assert by(e, "disagg.queue_requests")["queue=prefill_bootstrap"] == 0.0
    assert by(e, "server.disagg_role") == {"": 1.0}
    assert [r.text for r in e.readings if r.key == "server.disagg_role"] == ["unified"]
