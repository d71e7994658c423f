"""Parallelism rules PAR-001..PAR-007."""

from __future__ import annotations

from typing import Any

from helpers.rulekit import Case, Feed, Hist

GIB = float(1 << 30)


def tp_server(n_gpus: int, tp: int) -> dict:
    """One vLLM server: API process 100, a worker per GPU (pids 201..) holding 20 GiB."""
    info = {"pid=100,ppid=1,name=python,role=api_server,kind=vllm": "vllm serve m"}
    mem = {}
    for g in range(n_gpus):
        info[f"pid={201 + g},ppid=100,name=VLLM::Worker,role=worker,kind=vllm"] = "VLLM::Worker"
        mem[f"gpu={g},pid={201 + g}"] = 20 * GIB
    return {"process.info": info, "process.gpu_mem_bytes": mem,
            "server.setting": {"name=tensor_parallel_size": str(tp)}}


class Straggler(Case):
    code = "PAR-001"
    missing = ("process.gpu_mem_bytes", "server.setting")

    threshold = "thresholds.tp_imbalance"

    def at(self, x):
        return self._t(0.72 - x)  # spread = 0.72 - odd GPU

    def _t(self, odd):
        return {**tp_server(4, 4),
                "gpu.sm_active_ratio": {"gpu=0": 0.7, "gpu=1": 0.7, "gpu=2": odd, "gpu=3": 0.72}}

    def good(self):
        return self._t(0.68)

    def bad(self):
        return self._t(0.4)

    def hi(self):
        return self._t(0.51)   # spread 0.21

    def lo(self):
        return self._t(0.53)   # spread 0.19


CAP = 1.969e9 * 16


class TpOverPcie(Case):
    code = "PAR-002"
    missing = ("gpu.topology",)

    def _t(self, share, path="PHB"):
        d = tp_server(2, 2)
        d.update({"gpu.topology": {"gpu=0,peer=1": path, "gpu=1,peer=0": path},
                  "gpu.pcie_link_gen": {"gpu=0": 4, "gpu=1": 4},
                  "gpu.pcie_link_width": {"gpu=0": 16, "gpu=1": 16},
                  "gpu.pcie_tx_bytes_per_second": {"gpu=0": share * CAP, "gpu=1": share * CAP},
                  "gpu.pcie_rx_bytes_per_second": {"gpu=0": share * CAP, "gpu=1": share * CAP}})
        return d

    def good(self):
        return self._t(0.02)

    def bad(self):
        return self._t(0.6)

    def hi(self):
        return self._t(0.31)

    def lo(self):
        return self._t(0.29)


class DpUnbalanced(Case):
    code = "PAR-003"
    missing = ("server.requests_running",)

    def _t(self, a, b):
        return {"server.requests_running": {"engine=0,model=m": a, "engine=1,model=m": b},
                "server.requests_waiting": {"engine=0,model=m": 0, "engine=1,model=m": 0},
                "kv.usage_ratio": {"engine=0,model=m": 0.4, "engine=1,model=m": 0.35}}

    def good(self):
        return self._t(8, 7)

    def bad(self):
        return self._t(15, 2)

    def hi(self):
        return self._t(6, 2)    # gap 4 and 6 >= 2 x (2 + 1)

    def lo(self):
        return self._t(5, 2)


class TransferDominatesTtft(Case):
    """PAR-004: a decode instance whose TTFT is mostly the KV transfer from its prefill."""
    code = "PAR-004"
    windowed = True
    lag = 62.0
    missing = ("latency.kv_transfer_seconds",)

    def __init__(self):
        self.ttft, self.xfer = Hist(), Hist()

    def _t(self, xfer, ttft=2.0):
        self.ttft.observe(ttft, 20)
        self.xfer.observe(xfer, 20)
        lab = "engine=0,model=m"
        return {"latency.ttft_seconds": {lab: self.ttft.value()},
                "latency.kv_transfer_seconds": {lab: self.xfer.value()}}

    def good(self):
        return self._t(0.04)

    def bad(self):
        return self._t(1.8)

    def hi(self):
        return self._t(2.0)

    def lo(self):
        return self._t(0.9)


# ---- P/D disaggregation (llm-d's alerts): engine 0 prefill, engine 1 decode ---------------
PD_ROLES = {"server.disagg_role": {"engine=0,model=m": "prefill", "engine=1,model=m": "decode"}}


def pd_tick(run=(4, 4), wait=(0, 0), kv=(0.3, 0.5)) -> dict:
    eng = ("engine=0,model=m", "engine=1,model=m")
    return {**PD_ROLES,
            "server.requests_running": dict(zip(eng, run)),
            "server.requests_waiting": dict(zip(eng, wait)),
            "kv.usage_ratio": dict(zip(eng, kv))}


class PdImbalance(Case):
    """PAR-005: prefill engines' mean running > 3x the decode engines' (held 10 min)."""
    code = "PAR-005"
    missing = ("server.disagg_role",)

    def good(self):
        return pd_tick(run=(6, 4))

    def bad(self):
        return pd_tick(run=(24, 2))

    def hi(self):
        return pd_tick(run=(13, 4))   # 3.25

    def lo(self):
        return pd_tick(run=(11, 4))   # 2.75


class PrefillQueue(Case):
    """PAR-006: a prefill engine with more than 100 requests waiting (held 5 min)."""
    code = "PAR-006"
    missing = ("server.disagg_role",)

    def good(self):
        return pd_tick(wait=(10, 0))

    def bad(self):
        return pd_tick(wait=(250, 0))

    def hi(self):
        return pd_tick(wait=(104, 0))

    def lo(self):
        return pd_tick(wait=(96, 0))


class DecodeKvFull(Case):
    """PAR-007: a decode engine's KV cache past 95 % (held 5 min)."""
    code = "PAR-007"
    missing = ("server.disagg_role",)

    def good(self):
        return pd_tick(kv=(0.3, 0.7))

    def bad(self):
        return pd_tick(kv=(0.3, 0.99))

    def hi(self):
        return pd_tick(kv=(0.3, 0.97))

    def lo(self):
        return pd_tick(kv=(0.3, 0.93))


CASES = [Straggler(), TpOverPcie(), DpUnbalanced(), TransferDominatesTtft(), PdImbalance(),
         PrefillQueue(), DecodeKvFull()]


# ---- closer looks ---------------------------------------------------------------------
def test_straggler_names_the_odd_gpu_and_its_throttling():
    c = Straggler()
    f = Feed()
    f.run(lambda: {**c.bad(), "gpu.throttle_reasons": {"gpu=2": 0x40}}, 10)
    got = f.active("PAR-001")[0]
    assert got.subject == (("gpus", "0,1,2,3"),) and "GPU 2" in got.title
    assert "throttled" in got.evidence[0].note


def test_data_parallel_replicas_are_not_one_tp_group():
    """Four GPUs under one server with TP=2: two groups of two; imbalance between the
    groups (a DP matter) is not a straggler."""
    f = Feed()
    d = {**tp_server(4, 2),
         "gpu.sm_active_ratio": {"gpu=0": 0.8, "gpu=1": 0.8, "gpu=2": 0.4, "gpu=3": 0.4}}
    f.run(lambda: d, 10)
    assert not f.active("PAR-001")


def test_tp_size_one_has_no_group():
    f = Feed()
    d = {**tp_server(2, 1), "gpu.sm_active_ratio": {"gpu=0": 0.9, "gpu=1": 0.2}}
    f.run(lambda: d, 10)
    assert not f.active("PAR-001")


def test_nvlink_group_is_fine_however_busy_pcie_is():
    f = Feed()
    f.run(lambda: TpOverPcie()._t(0.9, path="NVLINK"), 10)
    assert not f.active("PAR-002")


def test_tp_over_pcie_explains_pcie_saturation():
    f = Feed()
    f.run(lambda: TpOverPcie()._t(0.95), 10)
    assert f.active("PAR-002") and not f.active("HW-004")


def test_dp_kv_imbalance_counts_too():
    f = Feed()
    d = DpUnbalanced()._t(8, 7)
    d["kv.usage_ratio"] = {"engine=0,model=m": 0.95, "engine=1,model=m": 0.3}
    f.run(lambda: d, 10)
    got = f.active("PAR-003")[0]
    assert got.evidence[0].key == "kv.usage_ratio" and "engine 0" in got.title


def test_transfer_finding_explains_the_ttft_symptom():
    """PAR-004 names itself as DEC-001's cause (cause before symptom)."""
    from infertop.config import SLO, DiagnosisConfig
    f = Feed(DiagnosisConfig(slo=SLO(ttft_p99_seconds=0.5)))
    case = TransferDominatesTtft()
    f.run(case.bad, 30)
    [ttft] = f.active("DEC-001")
    assert "caused by PAR-004" in ttft.title and ttft.caused_by == ("PAR-004",)


def test_ttft_symptom_caused_by_the_transfer_points_its_remedy_at_the_transfer():
    """DEC-001's own remedy guesses queue or prefill from the queue time; with PAR-004 as
    its cause it names the transfer, not chunked prefill (the generic prefill remedy)."""
    from infertop.config import SLO, DiagnosisConfig
    from infertop.rules.decoding import PREFILL_REMEDY, QUEUE_REMEDY
    f = Feed(DiagnosisConfig(slo=SLO(ttft_p99_seconds=0.5)))
    case = TransferDominatesTtft()
    f.run(case.bad, 30)
    [ttft] = f.active("DEC-001")
    assert "KV transfer" in ttft.remedy and "PAR-004" in ttft.remedy
    assert ttft.remedy not in (PREFILL_REMEDY, QUEUE_REMEDY)
    assert "enable chunked prefill and prefix caching" not in ttft.remedy


def test_pd_rules_hold_as_long_as_llm_d_alerts():
    """llm-d's `for:` clauses: 10 min for the imbalance, 5 min for the queue and the KV."""
    for code, make, hold in (("PAR-005", PdImbalance().bad, 600),
                             ("PAR-006", PrefillQueue().bad, 300),
                             ("PAR-007", DecodeKvFull().bad, 300)):
        f = Feed()
        f.run(make, hold - 5)
        assert not f.active(code), code
        f.run(make, 10)
        assert f.active(code), code
        f.run(lambda: pd_tick(), 15)    # healthy again: clears after clear_after (10 s)
        assert not f.active(code), code


def test_decode_kv_full_is_critical_and_names_the_decode_engine():
    f = Feed()
    f.run(DecodeKvFull().bad, 305)
    (got,) = f.active("PAR-007")
    assert got.severity.value == "crit"
    assert dict(got.evidence[0].labels)["engine"] == "1"


def test_unified_engines_are_not_a_pd_pair():
    """The same numbers on engines without a P/D role (or kv_both) raise nothing."""
    for role in ("unified", "both"):
        data = pd_tick(run=(24, 2), wait=(250, 0), kv=(0.3, 0.99))
        data["server.disagg_role"] = {"engine=0,model=m": role, "engine=1,model=m": role}
        f = Feed()

        def same(d: dict[str, Any] = data) -> dict[str, Any]:
            return d
        f.run(same, 605)
        assert not [x for x in f.findings if x.code in ("PAR-005", "PAR-006", "PAR-007")]


def test_vllm_role_from_its_command_line_setting():
    """A vLLM prefill instance knows its role only from --kv-transfer-config (setting)."""
    data = {"server.setting": {"name=disagg_role": "prefill"},
            "server.requests_running": {"model=m": 8}, "server.requests_waiting": {"model=m": 140}}
    f = Feed()
    f.run(lambda: data, 305)
    (got,) = f.active("PAR-006")
    assert "140 requests queued for prefill" in got.title


def test_idle_decode_side_reads_as_imbalance():
    """PromQL's x/0 is +Inf: llm-d's ratio fires for a busy prefill and an idle decode."""
    f = Feed()
    f.run(lambda: pd_tick(run=(6, 0)), 605)
    (got,) = f.active("PAR-005")
    assert "decode side idle" in got.title


# ---- PAR-004 across histograms whose buckets differ (NIXL's against vLLM's TTFT) --------
def _xfer_vs_ttft(xfer_bounds, xfer_s, ttft_bounds, ttft_s, ticks=20):
    """A decode instance: each tick 20 transfers of ``xfer_s`` in a histogram with
    ``xfer_bounds`` and 20 first tokens of ``ttft_s`` (which include the transfer)."""
    from helpers.rulekit import Feed
    xfer, ttft = Hist(xfer_bounds), Hist(ttft_bounds)
    lab = "instance=d:8000,engine=0,model=m"

    def tick():
        xfer.observe(xfer_s, 20)
        ttft.observe(ttft_s, 20)
        return {"latency.ttft_seconds": {lab: ttft.value()},
                "latency.kv_transfer_seconds": {lab: xfer.value()}}
    f = Feed()
    f.run(tick, ticks)
    return f


def test_transfer_share_is_judged_on_means_not_on_p99s_of_different_buckets():
    """A 50 ms transfer in a coarse NIXL-like histogram (1 ms, 1 s, +Inf) interpolates to a
    ~1 s "p99"; against a 0.3 s TTFT p99 from fine buckets the old p99 comparison called
    the transfer 3x the TTFT.  Its real share is 50 ms of 300 ms (17 %): no PAR-004."""
    f = _xfer_vs_ttft((0.001, 1.0), 0.05, (0.1, 0.2, 0.3, 0.4, 0.5, 1.0), 0.3)
    assert not f.active("PAR-004")
    got = {}
    for r in f.pipe.history.find("pd.ttft_split_seconds"):
        got[r.label("part")] = r.last()
    assert abs(got["transfer"] - 0.05) < 1e-9 and abs(got["decode"] - 0.25) < 1e-9


def test_transfer_that_dominates_raises_whatever_the_buckets_and_marks_bounds():
    """0.9 s transfers of a 1.0 s TTFT: 90 % of it; the transfer's p99 sits in NIXL-like
    buckets whose last finite bound is 0.5 s (p99 only known as >0.5 s): the finding
    raises on the means and its p99 evidence says it is a bound."""
    f = _xfer_vs_ttft((0.001, 0.01, 0.1, 0.5), 0.9, (0.1, 0.25, 0.5, 1.0, 2.5), 1.0)
    [got] = f.active("PAR-004")
    assert got.title == "KV transfer is 90% of mean TTFT"
    xfer_p99 = [e for e in got.evidence if e.key == "latency.kv_transfer_seconds"]
    assert xfer_p99 and xfer_p99[0].bound == ">" and xfer_p99[0].threshold is None
    head = got.evidence[0]
    assert head.key == "pd.ttft_split_seconds" and dict(head.labels)["part"] == "transfer"
    assert "prefill side is not measured" in head.note


def test_the_local_command_line_role_is_not_given_to_a_remote_instance():
    """Two instances in view, only the local one's role known from its command line: the
    remote one (its page carries no role) is not counted on the local one's side."""
    data = {"server.setting": {"name=disagg_role": "prefill"},
            "server.requests_running": {"instance=a:8000,model=m": 8,
                                        "instance=b:8000,model=m": 8},
            "server.requests_waiting": {"instance=a:8000,model=m": 140,
                                        "instance=b:8000,model=m": 140}}
    f = Feed()
    f.run(lambda: data, 305)
    assert f.active("PAR-006") == []
