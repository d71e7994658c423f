"""Pins for the parallelism rules where a mutation run found none (issue 31 item 8).

PAR-001's util fallback, per-GPU evidence and throttle bits; PAR-002's worst pair; PAR-003
counting the queue; PAR-004's split evidence, rounded threshold and an all-zero split;
PAR-005 with both sides idle.
"""

from __future__ import annotations

from typing import Any

from test_rules_parallelism import Straggler, TpOverPcie, pd_tick, tp_server

from helpers.rulekit import Feed, Hist
from infertop.config import config_from_dict
from infertop.rules import parallelism


def _straggler(data: dict[str, Any]) -> Any:
    f = Feed()
    f.run(lambda: data, 10)
    (got,) = f.active("PAR-001")
    return got


def test_without_sm_activity_the_straggler_is_judged_on_util() -> None:
    got = _straggler({**tp_server(4, 4), "gpu.util_ratio": {"gpu=0": 0.7, "gpu=1": 0.7,
                                                             "gpu=2": 0.4, "gpu=3": 0.72}})
    assert got.title == "GPU 2 out of step with its TP group (0,1,2,3)"
    assert {e.key for e in got.evidence} == {"gpu.util_ratio"}


def test_the_straggler_lists_each_gpus_median() -> None:
    got = _straggler(Straggler().bad())
    head, *each = got.evidence
    assert abs(head.value - 0.32) < 1e-9
    assert [(dict(e.labels)["gpu"], e.value) for e in each] == \
        [("0", 0.7), ("1", 0.7), ("2", 0.4), ("3", 0.72)]
    assert all(e.note == "median over 10 s" for e in each)


def test_the_gpu_idle_bit_alone_is_not_throttling() -> None:
    """Throttle reason 0x1 is 'GPU idle': not a throttle worth naming on the odd GPU."""
    got = _straggler({**Straggler().bad(), "gpu.throttle_reasons": {"gpu=2": 0x1}})
    assert "throttled" not in got.evidence[0].note
    got = _straggler({**Straggler().bad(), "gpu.throttle_reasons": {"gpu=2": 0x3}})
    assert "throttled" in got.evidence[0].note


def test_tp_over_pcie_names_the_pair_that_talks_over_pcie() -> None:
    f = Feed()
    f.run(lambda: TpOverPcie()._t(0.95), 10)
    (got,) = f.active("PAR-002")
    topo = got.evidence[0]
    assert (topo.key, topo.labels, topo.value) == ("gpu.topology",
                                                   (("gpu", "0"), ("peer", "1")), "PHB")


def test_waiting_requests_count_in_a_data_parallel_engines_load() -> None:
    """Two engines running 5 each, one with 10 waiting: 15 against 5 is imbalance."""
    data = {"server.requests_running": {"engine=0,model=m": 5, "engine=1,model=m": 5},
            "server.requests_waiting": {"engine=0,model=m": 10, "engine=1,model=m": 0}}
    f = Feed()
    f.run(lambda: data, 10)
    (got,) = f.active("PAR-003")
    assert got.evidence[0].value == 15 and "against 5" in got.evidence[0].note


def _pd_pair(xfer_s: float, decode_ttft_s: float, prefill_ttft_s: float,
             config: Any = None, ticks: int = 20) -> Feed:
    """A prefill instance p and a decode instance d, both read: each tick 20 first tokens
    on each side and 20 transfers into d."""
    p, d = "instance=p:8000,engine=0,model=m", "instance=d:8000,engine=0,model=m"
    pt, dt, xf = Hist(), Hist(), Hist()

    def tick() -> dict[str, Any]:
        pt.observe(prefill_ttft_s, 20)
        dt.observe(decode_ttft_s, 20)
        xf.observe(xfer_s, 20)
        return {"server.disagg_role": {p: "prefill", d: "decode"},
                "latency.ttft_seconds": {p: pt.value(), d: dt.value()},
                "latency.kv_transfer_seconds": {d: xf.value()}}
    f = Feed(config)
    f.run(tick, ticks)
    return f


def test_with_the_prefill_instance_read_its_part_is_evidence() -> None:
    (got,) = _pd_pair(0.9, 1.0, 0.2).active("PAR-004")
    parts = [dict(e.labels).get("part") for e in got.evidence
             if e.key == "pd.ttft_split_seconds"]
    assert parts == ["transfer", "decode", "prefill"]
    assert "prefill instance + transfer + decode instance" in got.evidence[0].note


def test_the_share_threshold_is_rounded_to_a_microsecond() -> None:
    odd = config_from_dict({"thresholds": {"kv_transfer_ttft_share": 0.12345678}})
    (got,) = _pd_pair(0.9, 1.0, 0.2, odd).active("PAR-004")
    split = [e.value for e in got.evidence if e.key == "pd.ttft_split_seconds"]
    assert all(isinstance(v, float) for v in split)
    exact = 0.12345678 * sum(v for v in split if isinstance(v, float))
    assert got.evidence[0].threshold == round(exact, 6) != exact


def test_an_all_zero_split_is_not_judged() -> None:
    """Zero-second transfers and first tokens (a split of 0 s): no share to judge, no
    division by zero (Feed asserts no rule error)."""
    f = _pd_pair(0.0, 0.0, 0.0)
    assert not f.active("PAR-004")


def test_both_pd_sides_idle_is_no_imbalance() -> None:
    """Prefill and decode both running nothing for longer than PAR-005's hold: 0 / 0 is
    not +Inf (only a busy prefill against an idle decode is)."""
    f = Feed(dt=10.0)
    f.run(lambda: pd_tick(run=(0, 0)), 70)
    assert not f.active("PAR-005")
    f.run(lambda: pd_tick(run=(6, 0)), 70)
    assert f.active("PAR-005")


def test_a_decode_side_running_one_request_is_a_plain_ratio() -> None:
    """Prefill 2, decode 1: a ratio of 2, under the 3x limit (not the +Inf of an idle
    decode side)."""
    f = Feed(dt=10.0)
    f.run(lambda: pd_tick(run=(2, 1)), 70)
    assert not f.active("PAR-005")


def test_the_busiest_prefill_engine_is_the_evidence() -> None:
    roles = {"engine=0,model=m": "prefill", "engine=1,model=m": "decode",
             "engine=2,model=m": "prefill"}
    data = {"server.disagg_role": roles,
            "server.requests_running": {"engine=0,model=m": 12, "engine=1,model=m": 2,
                                        "engine=2,model=m": 24}}
    f = Feed(dt=10.0)
    f.run(lambda: data, 70)
    (got,) = f.active("PAR-005")
    assert dict(got.evidence[0].labels)["engine"] == "2"
    assert got.evidence[0].value == 9.0 and got.title == "prefill side 9.0x busier than decode"


def test_the_rules_are_the_seven_of_the_layer() -> None:
    assert [r.code for r in parallelism.RULES] == [f"PAR-00{i}" for i in range(1, 8)]
