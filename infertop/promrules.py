"""The rule catalogue as Prometheus recording and alerting rules (``infertop rules export``).

Teams with hundreds of nodes already run Prometheus and alert from it; shipping every
node's series to one infertop process does not scale.  This module writes the same
diagnosis as PromQL, so it runs where the data lives:

* **recording rules** (group ``infertop-quantities``) turn each dialect's raw families
  (``infertop.dialects``: the same tables the screen maps) into one series per quantity
  (``infertop:kv_usage:ratio``), and compute the windowed quantities exactly as
  ``infertop.derive`` does: rates and ``histogram_quantile`` over ``diagnosis.window``,
  medians and shares of ticks over ``diagnosis.judge_window``;
* **alerting rules** (group ``infertop-findings``), one per finding code and severity:
  ``alertname`` is the code, labels ``severity`` (warn/crit) and ``layer``, the server's
  own labels (``instance``, ``job``, ``model_name``, ``engine``, a ``node`` target label)
  kept; annotations say the title, the value against its threshold, the remedy and the
  threshold's source (``rules/threshold_sources.py``).

Timing mirrors the engine (``rules/engine.py``): ``for:`` is the rule's ``raise_after``,
``keep_firing_for:`` its ``clear_after``, and the hysteresis margin (``hold_margin``) is
the alert's own ``ALERTS`` series: while it fires, the relaxed thresholds hold it.

Every threshold comes from the ``DiagnosisConfig`` passed in, the one the screen uses.
Rules whose inputs Prometheus does not have (threads, the GIL, py-spy, process lists)
are listed in ``NOT_EXPORTED`` with the reason, and written as comments in the file.

The output is YAML written by hand: every string is a JSON string (a valid YAML
double-quoted scalar), so no YAML library is needed and nothing a label or remedy holds
can break the document.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from .config import DiagnosisConfig
from .dialects import DIALECTS, FamilyMap
from .findings import Severity
from .keys import SPECS
from .model import Kind
from .promql import number as _num  # a threshold: 12 significant digits
from .promql import re_literal
from .rules.engine import Diagnoser
from .rules.threshold_sources import SOURCES

# the two rule groups of the export (the fleet source finds the alerting one by name in
# /api/v1/rules: probes/prometheus/aggregates.py)
RECORDING_GROUP = "infertop-quantities"
ALERTING_GROUP = "infertop-findings"

# DCGM field names (dcgm-exporter metric name = field name; docs/metrics.md#dcgm)
DCGM_UTIL = "DCGM_FI_DEV_GPU_UTIL"                  # percent
DCGM_SM_ACTIVE = "DCGM_FI_PROF_SM_ACTIVE"           # ratio, opt-in profiling field
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"                # MiB
DCGM_FB_FREE = "DCGM_FI_DEV_FB_FREE"
DCGM_FB_RESERVED = "DCGM_FI_DEV_FB_RESERVED"
DCGM_XID = "DCGM_FI_DEV_XID_ERRORS"                 # gauge: the last Xid
# the last Xid per GPU without dcgm-exporter's err_code/err_msg labels (a new Xid code is
# a new series of the raw gauge; this one changes value instead)
XID_VALUE = "infertop:gpu_xid_last:value"
DCGM_ECC_DBE = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"      # uncorrectable (double-bit) ECC, volatile
DCGM_GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"              # C
DCGM_MEM_TEMP = "DCGM_FI_DEV_MEMORY_TEMP"           # C (HBM)
DCGM_UNC_REMAP = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
DCGM_CORR_REMAP = "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"
DCGM_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
# the clocks-event (throttle) bitmask: renamed in DCGM 3.x; not in the default CSV
DCGM_CLOCK_REASONS = ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")

# Rules that are not exported, and why (also printed in the file and docs/alerts.md)
NOT_EXPORTED: dict[str, str] = {
    "HW-002": "needs the server's dtype setting (read from its command line, not /metrics)",
    "HW-004": "needs the PCIe link generation and width (not dcgm-exporter defaults), so "
              "the link's capacity is unknown to Prometheus",
    "KRN-001": "needs per-thread CPU of the engine's launch thread (/proc, not Prometheus)",
    "KRN-002": "a log-log fit of TTFT over prompt length across 12 windows: infertop computes "
               "it from History; PromQL has no regression over windows",
    "KRN-003": "needs the model's weight bytes (read from the server's files/settings)",
    "MEM-004": "needs per-process GPU memory and command lines (NVML process list, /proc)",
    "SCH-001": "needs per-thread CPU and the GIL (py-spy, /proc), not in Prometheus",
    "SCH-003": "needs per-thread CPU of every process (/proc)",
    "SCH-004": "needs the host's CPU busy share (node_exporter is not one of infertop's "
               "inputs; its node_cpu_seconds_total would serve)",
    "PAR-001": "needs which GPUs form a tensor-parallel group (NVML process lists or the "
               "server's tensor_parallel_size setting)",
    "PAR-002": "needs the GPU topology (NVML) and TP group membership",
    "PAR-005": "needs each engine's P/D role: vLLM's comes from its command line "
               "(--kv-transfer-config kv_role), SGLang's engine_type label is aggregated away; "
               "llm-d's own alert selects pods by name, which infertop cannot know",
    "PAR-006": "needs each engine's P/D role (command line or a dropped label, as PAR-005)",
    "PAR-007": "needs each engine's P/D role (command line or a dropped label, as PAR-005)",
    "PAR-003": "compares data-parallel engines of one server; exported as-is it would need "
               "per-engine KV and load joins that differ per dialect (not in this version)",
    "FLT-001": "cross-node comparison judged by the fleet screen (peers by model); not "
               "exported in this version",
    "FLT-002": "cross-node rule of the fleet screen (node.up is infertop's own reading)",
    "FLT-003": "cross-node rule of the fleet screen (node.up is infertop's own reading)",
    # rules other branches add (main): listed here so a merge keeps every code explained
    "MEM-005": "needs vLLM's KV-cache events (the --kv-events ZMQ stream), not /metrics",
    "PAR-004": "judged against the client's mean TTFT: the prefill instance's mean TTFT "
               "plus the decode instance's (which includes the transfer); which prefill "
               "instance feeds which decode instance is not on /metrics (vLLM's kv_role "
               "is on its command line, SGLang's engine_type label is aggregated away, "
               "and SGLang may count the transfer on the sending side), so PromQL could "
               "only compare the transfer with the decode instance's own TTFT: a larger "
               "share than the screen's, firing where the screen does not",
}

SEVERITY_LABEL = {Severity.WARN: "warn", Severity.CRIT: "crit", Severity.NOTICE: "notice"}


# ---- raw series per dialect --------------------------------------------------------------------
@dataclass(frozen=True)
class RawSeries:
    """One dialect's series for a reading key, as Prometheus stores it."""

    dialect: str
    name: str                           # the sample name on the wire (``_total``, ``_bucket``)
    select: tuple[tuple[str, str], ...]
    agg: str                            # "sum" or "max" over the dropped labels
    drop: tuple[str, ...]

    def selector(self, extra: str = "") -> str:
        parts = [f'{k}="{v}"' for k, v in self.select]
        if extra:
            parts.append(extra)
        return self.name + ("{" + ",".join(parts) + "}" if parts else "")


def sample_name(dialect: str, family: str, kind: Kind, part: str = "") -> str:
    """The name a family's samples have on the wire (and so in Prometheus)."""
    if part:
        return f"{family}_{part}"
    if kind is Kind.HISTOGRAM:
        return f"{family}_bucket"
    d = DIALECTS.get(dialect)
    bare = d is not None and (d.bare_counters or family.startswith(d.bare_counter_prefixes))
    if kind is Kind.COUNTER and not bare:
        return f"{family}_total"
    return family


def _drop_labels(dialect: str) -> tuple[str, ...]:
    """Labels of the dialect's series that are not a server's identity (aggregated away:
    each kind's ``Dialect.drop_labels``)."""
    d = DIALECTS.get(dialect)
    return d.drop_labels if d is not None else ()


def raw_series(key: str) -> list[RawSeries]:
    """Every dialect's series for ``key``, primary names before legacy ones (``or`` keeps
    the left side where both exist, as the dialect table's ``unless`` does)."""
    kind = SPECS[key].kind
    out: list[RawSeries] = []
    for d in DIALECTS.values():
        for m in d.rules:
            if m.key != key or len(m.families) != 1 or m.keep or m.const:
                continue
            out.append(_raw(d.name, m, kind))
    return out


def _raw(dialect: str, m: FamilyMap, kind: Kind) -> RawSeries:
    agg = m.agg or ("max" if kind is Kind.GAUGE else "sum")
    own = _drop_labels(dialect)
    drop = own + tuple(k for k, _ in m.select if k not in own)
    return RawSeries(dialect, sample_name(dialect, m.families[0], kind, m.part), m.select,
                     agg, drop)


def _agg(r: RawSeries, inner: str) -> str:
    """``inner`` aggregated over the labels that are not the server's identity."""
    if not r.drop:
        return inner
    return f"{r.agg} without ({', '.join(r.drop)}) ({inner})"


def union(key: str, inner: Callable[[RawSeries], str]) -> str:
    """``inner`` of every dialect's series for ``key``, joined with ``or``."""
    parts = [_agg(r, inner(r)) for r in raw_series(key)]
    return "\n  or ".join(parts)


def union_hist(key: str, window: str) -> str:
    """Bucket rates of every dialect's histogram for ``key`` (``le`` kept)."""
    parts = []
    for r in raw_series(key):
        inner = f"rate({r.selector()}[{window}])"
        parts.append(f"sum without ({', '.join(r.drop)}) ({inner})" if r.drop else inner)
    return "\n  or ".join(parts)


def union_count(key: str, window: str) -> str:
    """Observations over the window of every dialect's histogram for ``key``."""
    parts = []
    for r in raw_series(key):
        name = r.name[:-len("_bucket")] + "_count"
        sel = RawSeries(r.dialect, name, r.select, "sum", r.drop).selector()
        inner = f"increase({sel}[{window}])"
        parts.append(f"sum without ({', '.join(r.drop)}) ({inner})" if r.drop else inner)
    return "\n  or ".join(parts)


# ---- the rules file ------------------------------------------------------------------------
@dataclass
class Recording:
    record: str
    expr: str


@dataclass
class Alert:
    code: str
    severity: Severity
    expr: str
    value_text: str        # what $value is, and its threshold, for the annotation
    for_s: float
    keep_s: float
    sources: tuple[str, ...] = ()
    title: str = ""
    remedy: str = ""
    layer: str = ""
    hold_s: float | None = None     # the rule holds the condition itself: for: this
    labels: tuple[tuple[str, str], ...] = ()   # extra labels (the Xid class's action)


def prom_duration(seconds: float) -> str:
    """A Prometheus duration (``90s``; ``0s`` for zero)."""
    ms = round(seconds * 1000)
    if ms % 1000 == 0:
        return f"{ms // 1000}s"
    return f"{ms}ms"


@dataclass
class _T:
    """Thresholds as the engine's ``Context.past`` sees them: strict, or relaxed by the
    hold margin towards healthy (the alert is firing: a Schmitt trigger)."""

    cfg: DiagnosisConfig
    relaxed: bool = False
    used: list[str] = field(default_factory=list)

    def __call__(self, qualified: str, op: str, relax: bool = True) -> str:
        """The threshold's value; ``relax=False`` where the rule compares it without
        ``Context.past`` (no hold margin there either)."""
        if qualified not in self.used:
            self.used.append(qualified)
        v = float(self.cfg.value(qualified))
        if self.relaxed and relax:
            m = self.cfg.diagnosis.hold_margin
            v = v * (1 - m) if op in (">=", ">") else v * (1 + m)
        return _num(v)


def _recordings(cfg: DiagnosisConfig) -> list[Recording]:
    w = prom_duration(cfg.diagnosis.window)
    j = prom_duration(cfg.diagnosis.judge_window)
    t = cfg.thresholds
    ew = prom_duration(t.error_event_window)
    rw = prom_duration(t.restart_window)
    ws, js = w, j
    half = prom_duration(cfg.diagnosis.judge_window / 2)

    def judged(stat: str, series: str) -> str:
        """``stat`` (a format with ``{}`` for the range) of ``series`` over the judge
        window; as Context.median/share, none until the series reaches back half the
        window (a server back from an outage is not judged on its first scrapes)."""
        return stat.format(f"{series}[{j}]") + f" and {series} offset {half}"

    recs = [
        Recording("infertop:kv_usage:ratio", union("kv.usage_ratio", lambda r: r.selector())),
        Recording("infertop:requests_waiting:count",
                  union("server.requests_waiting", lambda r: r.selector())),
        Recording("infertop:requests_running:count",
                  union("server.requests_running", lambda r: r.selector())),
        Recording(f"infertop:kv_usage:median{js}",
                  judged("quantile_over_time(0.5, {})", "infertop:kv_usage:ratio")),
        Recording("infertop:kv_full:bool",
                  f"infertop:kv_usage:ratio >= bool {_num(t.kv_pressure_ratio)}"),
        Recording(f"infertop:kv_full:share{js}",
                  judged("avg_over_time({})", "infertop:kv_full:bool")),
        Recording("infertop:queued:bool",
                  f"infertop:requests_waiting:count >= bool {_num(t.queue_waiting_min)}"),
        Recording(f"infertop:queued:share{js}",
                  judged("avg_over_time({})", "infertop:queued:bool")),
        # SCH-005: deferred requests (vLLM reason="deferred") and the queue's median
        Recording("infertop:requests_deferred:count",
                  union("server.requests_deferred", lambda r: r.selector())),
        Recording(f"infertop:waiting:median{js}",
                  judged("quantile_over_time(0.5, {})", "infertop:requests_waiting:count")),
        Recording(f"infertop:deferred:median{js}",
                  judged("quantile_over_time(0.5, {})", "infertop:requests_deferred:count")),
        Recording(f"infertop:preemptions:rate{ws}",
                  union("server.preemptions_total", lambda r: f"rate({r.selector()}[{w}])")),
        # MEM-001: SGLang counts no preemptions; its retraction gauge is the signal
        Recording("infertop:requests_retracted:count",
                  union("server.requests_retracted", lambda r: r.selector())),
        Recording(f"infertop:retracted:max{js}",
                  judged("max_over_time({})", "infertop:requests_retracted:count")),
        Recording(f"infertop:running:max{js}",
                  f"max_over_time(infertop:requests_running:count[{j}])"),
        # SCH-002 from the page: the batch at its window maximum on half the ticks (the
        # median reaches the max) while requests wait for capacity (vLLM reason=capacity)
        Recording(f"infertop:running:median{js}",
                  judged("quantile_over_time(0.5, {})", "infertop:requests_running:count")),
        Recording("infertop:requests_waiting_capacity:count",
                  union("server.requests_waiting_capacity", lambda r: r.selector())),
        Recording("infertop:capacity_queued:bool",
                  "infertop:requests_waiting_capacity:count >= bool 1"),
        Recording(f"infertop:capacity_queued:share{js}",
                  judged("avg_over_time({})", "infertop:capacity_queued:bool")),
        Recording(f"infertop:waiting:max{js}",
                  f"max_over_time(infertop:requests_waiting:count[{j}])"),
    ]
    for short, key in (("ttft_seconds", "latency.ttft_seconds"),
                       ("itl_seconds", "latency.itl_seconds")):
        buckets = f"infertop:{short}_bucket:rate{ws}"
        recs.append(Recording(buckets, union_hist(key, w)))
        for q, name in ((0.99, "p99"), (0.5, "p50")):
            recs.append(Recording(f"infertop:{short}:{name}_{ws}",
                                  f"histogram_quantile({q}, {buckets})"))
        recs.append(Recording(f"infertop:{short}:observations{ws}", union_count(key, w)))
    # speculative decoding: accepted / proposed draft tokens over the window
    recs += [
        Recording(f"infertop:spec_draft_tokens:increase{ws}",
                  union("spec.draft_tokens_total", lambda r: f"increase({r.selector()}[{w}])")),
        Recording(f"infertop:spec_accepted_tokens:increase{ws}",
                  union("spec.accepted_tokens_total",
                        lambda r: f"increase({r.selector()}[{w}])")),
        Recording(f"infertop:spec_acceptance:ratio{ws}",
                  f"infertop:spec_accepted_tokens:increase{ws} / "
                  f"infertop:spec_draft_tokens:increase{ws} > -1"),
    ]
    # finished requests and those that ended in an error reason (thresholds.error_reasons:
    # free text from the config, escaped as RE2 literals)
    errs = "|".join(re_literal(r) for r in t.error_reasons)
    recs += [
        Recording(f"infertop:requests_finished:increase{ws}", _finished(w, "")),
        Recording(f"infertop:requests_failed:increase{ws}", _finished(w, errs)),
        Recording(f"infertop:error:ratio{ws}",
                  f"infertop:requests_failed:increase{ws} / "
                  f"infertop:requests_finished:increase{ws} > -1"),
    ]
    # requests refused at admission (DEC-007, as derive's _rejections): refused over the
    # window per server and model (vLLM counts them without an engine label), against the
    # refused plus the finished requests of every engine of that server and model
    recs += [
        Recording(f"infertop:requests_rejected:increase{ws}", _rejected(w)),
        Recording(f"infertop:requests_ended:increase{ws}",
                  f"infertop:requests_rejected:increase{ws}"
                  f"\n  + (sum without (engine) (infertop:requests_finished:increase{ws})"
                  f"\n     or infertop:requests_rejected:increase{ws} * 0)"),
        Recording(f"infertop:rejection:ratio{ws}",
                  f"infertop:requests_rejected:increase{ws} / "
                  f"infertop:requests_ended:increase{ws} > -1"),
    ]
    # SCH-006: vLLM's one-hot engine_sleep_state as a level, the deepest state flagged
    # (servers/vllm.py's _vllm_sleep_level; no state flagged: no level, not "awake")
    from .servers.vllm import VLLM_SLEEP_LEVELS, VLLM_SLEEP_STATE
    states = "\n  or ".join(
        f'({VLLM_SLEEP_STATE}{{sleep_state={_q(state)}}} >= 0.5) * 0 + {_num(level)}'
        for state, level in VLLM_SLEEP_LEVELS.items())
    recs.append(Recording("infertop:sleep_level:level",
                          f"max without (sleep_state) (\n  {states})"))
    # restarts: a counter that went backwards, or a new process start time
    resets = " or ".join(
        _agg(r, f"resets({r.selector()}[{rw}])")
        for key in ("server.generation_tokens_total", "server.prompt_tokens_total")
        for r in raw_series(key) if not r.name.endswith(("_sum", "_count")))
    recs.append(Recording(f"infertop:server_restarts:count{prom_duration(t.restart_window)}", resets))
    recs.append(Recording(
        "infertop:server:seen",
        " or ".join(f"group by (job, instance) (last_over_time({r.selector()}[1h]))"
                    for r in raw_series("server.requests_running"))))
    # GPU (DCGM)
    recs += [
        Recording(f"infertop:gpu_util:median{js}",
                  judged("quantile_over_time(0.5, {}) / 100", DCGM_UTIL)),
        Recording(f"infertop:gpu_sm_active:median{js}",
                  judged("quantile_over_time(0.5, {})", DCGM_SM_ACTIVE)),
        Recording("infertop:gpu_mem_total:bytes",
                  f"({DCGM_FB_USED} + {DCGM_FB_FREE} + ({DCGM_FB_RESERVED} or {DCGM_FB_USED} * 0))"
                  " * 1048576"),
        Recording("infertop:gpu_mem_used:bytes", f"{DCGM_FB_USED} * 1048576"),
        Recording("infertop:gpu_clock_event_reasons:mask",
                  f"{DCGM_CLOCK_REASONS[0]} or {DCGM_CLOCK_REASONS[1]}"),
        Recording("infertop:gpu_hw_slowdown:bool",
                  "floor(infertop:gpu_clock_event_reasons:mask / 8) % 2"),
        Recording(XID_VALUE, f"max without (err_code, err_msg) ({DCGM_XID})"),
        Recording(f"infertop:gpu_ecc_uncorrected:increase{prom_duration(t.error_event_window)}",
                  f"increase({DCGM_ECC_DBE}[{ew}])"),
    ]
    return recs


def _rejected(w: str) -> str:
    """Refused requests over the window of every dialect that counts them, summed over
    the refusal reasons (and engines, where a dialect has them) per server and model."""
    parts = []
    for d in DIALECTS.values():
        for m in d.rules:
            if m.key != "server.admission_rejections_total" or len(m.families) != 1:
                continue
            name = sample_name(d.name, m.families[0], Kind.COUNTER, m.part)
            drop = list(d.drop_labels) + [src for src, _ in m.keep]
            if d.engine_label:
                drop.append(d.engine_label)
            parts.append(f"sum without ({', '.join(drop)}) (increase({name}[{w}]))")
    return "\n  or ".join(parts)


def _finished(w: str, reasons: str) -> str:
    """Finished requests over the window, of every dialect; ``reasons`` (a regex of
    finish reasons) keeps only those."""
    parts = []
    for d in DIALECTS.values():
        for m in d.rules:
            if m.key != "server.requests_finished_total":
                continue
            name = sample_name(d.name, m.families[0], Kind.COUNTER)
            drop = ", ".join(d.drop_labels)
            src = dict(m.keep)
            const = dict(m.const)
            rename = dict(m.rename)
            if reasons:
                if src:
                    label = next(iter(src))
                    if rename:   # TGI: err="dropped" is a client abort, any other err an error
                        abort = next((k for k, v in rename.items() if v == "abort"), "")
                        if "error" not in reasons.split("|"):
                            continue
                        sel = f'{name}{{{label}!={_q(abort)}}}'
                    else:
                        sel = f'{name}{{{label}=~{_q(reasons)}}}'
                elif re_literal(const.get("reason", "")) in reasons.split("|"):
                    sel = name
                else:
                    continue
            else:
                sel = name
            by = f"sum without ({', '.join(filter(None, [drop] + list(src)))})" \
                if drop or src else "sum without ()"
            parts.append(f"{by} (increase({sel}[{w}]))")
    # several families of one dialect (TGI success + failure) add up per server
    return "sum without () (\n  " + "\n  or ".join(parts) + ")" if not reasons else \
        "\n  or ".join(parts)


def _alerts(cfg: DiagnosisConfig) -> list[Alert]:
    """Each exported finding's condition, built from thresholds as ``_T`` hands them out
    (called once strict and once relaxed for the hold margin)."""
    d = cfg.diagnosis
    ws, js = prom_duration(d.window), prom_duration(d.judge_window)
    t = cfg.thresholds
    rs = prom_duration(t.restart_window)
    out: list[Alert] = []
    held: dict[int, str] = {}    # alert index -> its relaxed condition

    def add(code: str, sev: Severity, build: Callable[[_T], str], value_text: str,
            remedy: str = "", labels: tuple[tuple[str, str], ...] = ()) -> None:
        strict = _T(cfg)
        relaxed = _T(cfg, relaxed=True)
        e_strict, e_relaxed = build(strict), build(relaxed)
        out.append(Alert(code, sev, e_strict, value_text, 0.0, 0.0, tuple(strict.used),
                         remedy=remedy, labels=labels))
        held[len(out) - 1] = e_relaxed

    # MEM-001 KV pressure: KV near full (median, or full on enough ticks) with
    # preemptions over the window or a queue on half the judge window's ticks
    def mem001(th: _T, crit: bool) -> str:
        kv = (f"(infertop:kv_usage:median{js} >= {th('thresholds.kv_pressure_ratio', '>=')}"
              f"\n   or infertop:kv_full:share{js} >= {_num_relax(th, 0.3)})")
        cause = (f"(infertop:preemptions:rate{ws} > 0\n   or infertop:retracted:max{js} >= 1"
                 f"\n   or infertop:queued:share{js} >= {_num_relax(th, 0.5)})")
        expr = f"{kv}\n  and {cause}"
        if crit:
            # compared without Context.past on the screen: no hold margin here either
            # (a crit held relaxed by the rate would outlive the screen's)
            expr += (f"\n  and infertop:preemptions:rate{ws} >= "
                     f"{th('thresholds.kv_preempt_crit_per_second', '>=', relax=False)}")
        return expr

    add("MEM-001", Severity.WARN, lambda th: mem001(th, False),
        "KV-cache usage (median over the judge window, or share of ticks full)")
    add("MEM-001", Severity.CRIT, lambda th: mem001(th, True),
        "KV-cache usage; preemptions per second at or above "
        f"{_num(t.kv_preempt_crit_per_second)} make it critical")
    # MEM-002 KV leak: KV held while nothing runs or waits (on every tick of the hold)
    add("MEM-002", Severity.WARN,
        lambda th: (f"infertop:kv_usage:median{js} >= {th('thresholds.kv_leak_ratio', '>=')}"
                    f"\n  and infertop:requests_running:count == 0"
                    f"\n  unless infertop:requests_waiting:count > 0"),
        "KV-cache usage (median over the judge window) with no request running or waiting")
    # MEM-003 GPU memory growing steadily (DCGM): risen over the window from its lowest
    # point, at the window's top now (no load that came and went), and rising in two
    # thirds of the window's sixths that have data, at least three of them (half the
    # window, as the screen needs; a model or batch loading in one jump is a step, not
    # growth); critical when full within the ETA at the window's pace
    gw = prom_duration(t.mem_growth_window)
    sixth = prom_duration(t.mem_growth_window / 6)

    def mem003(th: _T, crit: bool) -> str:
        used, total = "infertop:gpu_mem_used:bytes", "infertop:gpu_mem_total:bytes"
        tol = f"0.002 * {total}"
        rising = f"((delta({used}[{sixth}]) - 0.0005 * {total}) > bool 0)"
        expr = (f"({used} - min_over_time({used}[{gw}])) >= "
                f"{th('thresholds.mem_growth_ratio', '>=', relax=False)} * {total}"
                f"\n  and {used} >= max_over_time({used}[{gw}]) - {tol}"
                f"\n  and sum_over_time({rising}[{gw}:{sixth}]) >= "
                f"2 / 3 * count_over_time({rising}[{gw}:{sixth}])"
                f"\n  and count_over_time({rising}[{gw}:{sixth}]) >= 3")
        if crit:
            expr += (f"\n  and predict_linear({used}[{gw}], "
                     f"{_num(t.mem_oom_eta_seconds)}) >= {total}")
            # the level as well as the growth (issue 21): a card this full stays critical
            # while it lasts, growing or not.  Prometheus does not know which server holds
            # the GPU nor its reservation (gpu_memory_utilization), so usage beyond a
            # reservation but short of mem_full_ratio raises on the screen only
            expr = (f"({expr})\n  or {used} >= "
                    f"{th('thresholds.mem_full_ratio', '>=', relax=False)} * {total}")
        return expr

    add("MEM-003", Severity.WARN, lambda th: mem003(th, False),
        f"bytes of GPU memory gained over {gw}")
    add("MEM-003", Severity.CRIT, lambda th: mem003(th, True),
        f"bytes of GPU memory gained over {gw}; full within "
        f"{_num(t.mem_oom_eta_seconds)} s at this pace")
    # HW-001 busy but not working (DCGM util and the opt-in SM-active profiling field)
    add("HW-001", Severity.WARN,
        lambda th: (f"infertop:gpu_util:median{js} >= {th('thresholds.busy_util_ratio', '>=')}"
                    f"\n  and infertop:gpu_sm_active:median{js} <= "
                    f"{th('thresholds.busy_sm_active_max', '<=')}"),
        "GPU util (median over the judge window) with SM active at or below "
        f"{_num(t.busy_sm_active_max)}")
    # HW-003 clocks throttled: the clocks-event reason bits (hw_slowdown 0x8, hw_thermal
    # 0x40, power brake 0x80 critical; sw_thermal 0x20 a warning)
    mask = "infertop:gpu_clock_event_reasons:mask"

    def bit(b: int) -> str:
        return f"floor({mask} / {b}) % 2 == 1"

    add("HW-003", Severity.CRIT,
        lambda th: f"({bit(8)})\n  or ({bit(64)})\n  or ({bit(128)})",
        "clocks-event reason bit (hw_slowdown, hw_thermal or power brake)")
    add("HW-003", Severity.WARN, lambda th: bit(32), "clocks-event reason bit (sw_thermal)")
    # HW-005 GPU errors: uncorrectable ECC over the event window; a new critical Xid
    # (the Xid's class sets the remedy and an ``xid_action`` label, as the screen's remedy)
    ew = prom_duration(t.error_event_window)
    from .rules.hardware import CRIT_XIDS, XID_ACTIONS
    # A new Xid is a change of the sticky last-Xid gauge within the window (its err_code
    # label aggregated away: XID_VALUE), or its series appearing while the exporter
    # already served the GPU (dcgm-exporter 4.5.3-4.8.2 omits the gauge until the first
    # Xid): fewer scrapes of it in the window than of the GPU's temperature (raw series of
    # one target: a restart starts both at once).  Never a series that
    # starts with the exporter's others: a Prometheus or exporter restart on a node with
    # an old Xid 79 must not page "reboot the node" (issue 31).
    x = XID_VALUE
    new_xid = (f"({x} > 0\n   and (changes({x}[{ew}]) > 0"
               f"\n     or sum without (err_code, err_msg) (count_over_time({DCGM_XID}[{ew}]))"
               f"\n        < on (job, instance, gpu) group_left count_over_time({DCGM_GPU_TEMP}[{ew}])))")
    actions = {"restart-application": (31, 43, 94), "reset-gpu": (119, 145, 149),
               "reboot": (79,)}
    classed: list[int] = []
    for action, xids in actions.items():
        for sev in (Severity.CRIT, Severity.WARN):
            mine = [x for x in xids if (x in CRIT_XIDS) == (sev is Severity.CRIT)]
            if not mine:
                continue
            classed += mine
            add("HW-005", sev, _fixed(f"{new_xid}\n  and ({_xid_in(mine)})"),
                f"the last Xid (new within {ew})",
                remedy=XID_ACTIONS[mine[0]].format(xid="/".join(str(x) for x in mine)),
                labels=(("xid_action", action),))
    other_crit = sorted(CRIT_XIDS - set(classed))
    add("HW-005", Severity.CRIT,
        lambda th: (f"infertop:gpu_ecc_uncorrected:increase{ew} > 0"
                    f"\n  or {new_xid}\n  and ({_xid_in(other_crit)})"),
        f"new uncorrected ECC errors over {ew}, or the last Xid (a critical one)")
    add("HW-005", Severity.WARN,
        lambda th: f"{new_xid}\n  unless ({_xid_in(sorted(CRIT_XIDS | set(classed)))})",
        f"the last Xid, new within {ew}")
    # HW-006 too hot: held for the whole hold (the screen's rule holds it, raise_after 0);
    # "existed the hold ago" mirrors History covering it
    def hot(metric: str, qual: str, hold_qual: str) -> Callable[[_T], str]:
        hold = float(cfg.value(hold_qual))

        def build_expr(th: _T) -> str:
            th(hold_qual, ">", relax=False)
            return (f"min_over_time({metric}[{prom_duration(hold)}]) > {th(qual, '>')}"
                    f" and {metric} offset {prom_duration(max(0.0, hold - 1))}")
        return build_expr

    add("HW-006", Severity.CRIT,
        hot(DCGM_GPU_TEMP, "thresholds.gpu_very_hot_celsius", "thresholds.gpu_very_hot_seconds"),
        f"core temperature (C), lowest of the last {prom_duration(t.gpu_very_hot_seconds)}")
    add("HW-006", Severity.WARN,
        hot(DCGM_GPU_TEMP, "thresholds.gpu_hot_celsius", "thresholds.gpu_hot_seconds"),
        f"core temperature (C), lowest of the last {prom_duration(t.gpu_hot_seconds)}")
    add("HW-006", Severity.WARN,
        hot(DCGM_MEM_TEMP, "thresholds.hbm_hot_celsius", "thresholds.hbm_hot_seconds"),
        f"memory (HBM) temperature (C), lowest of the last {prom_duration(t.hbm_hot_seconds)}",
        labels=(("sensor", "memory"),))
    # HW-007 the hardware-slowdown reason held on every evaluation of the hold
    sd = prom_duration(t.hw_slowdown_seconds)
    add("HW-007", Severity.WARN,
        lambda th: (f"min_over_time(infertop:gpu_hw_slowdown:bool[{sd}]) == 1"
                    f" and infertop:gpu_hw_slowdown:bool offset "
                    f"{prom_duration(max(0.0, t.hw_slowdown_seconds - 1))}"),
        f"hardware-slowdown reason (0x8) set throughout the last {sd}")
    # HW-008 rows remapped: any uncorrectable remap or a failed remap; correctable growth
    add("HW-008", Severity.CRIT,
        lambda th: f"{DCGM_UNC_REMAP} > 0 or {DCGM_REMAP_FAILURE} >= 1",
        "rows remapped after uncorrectable errors, or a failed remap (1)")
    add("HW-008", Severity.WARN,
        lambda th: f"{DCGM_CORR_REMAP} - min_over_time({DCGM_CORR_REMAP}[{ew}]) > 0",
        f"correctable row remaps added in the last {ew}",
        remedy="watch the trend: correctable remaps that keep growing precede uncorrectable "
               "ones; plan a reset or a replacement")
    # DEC-001 TTFT p99 over the SLO
    for sev in (Severity.WARN, Severity.CRIT):
        def dec001(th: _T, sev: Severity = sev) -> str:
            slo = th("slo.ttft_p99_seconds", ">", relax=False)
            limit = slo if sev is Severity.WARN else \
                f"{slo} * {_num(t.ttft_crit_factor)}"
            th("thresholds.slo_min_requests", ">=", relax=False)
            return (f"infertop:ttft_seconds:p99_{ws} > {limit}"
                    f"\n  and infertop:ttft_seconds:observations{ws} >= "
                    f"{_num(t.slo_min_requests)}")
        add("DEC-001", sev, dec001,
            f"TTFT p99 over {ws} (seconds) against the SLO "
            f"{_num(cfg.slo.ttft_p99_seconds)} s"
            + ("" if sev is Severity.WARN else f" x {_num(t.ttft_crit_factor)}"))
    # DEC-002 inter-token latency jitter
    add("DEC-002", Severity.WARN,
        lambda th: (f"infertop:itl_seconds:p99_{ws} / infertop:itl_seconds:p50_{ws} >= "
                    f"{_num(t.itl_jitter_ratio)}"
                    f"\n  and infertop:itl_seconds:p99_{ws} >= {_num(t.itl_jitter_min_seconds)}"
                    f"\n  and infertop:itl_seconds:observations{ws} >= "
                    f"{_num(t.itl_min_tokens)}"),
        f"inter-token latency p99/p50 over {ws}")
    # DEC-003 speculative acceptance low
    add("DEC-003", Severity.WARN,
        lambda th: (f"infertop:spec_acceptance:ratio{ws} < {_num(t.spec_acceptance_min)}"
                    f"\n  and infertop:spec_draft_tokens:increase{ws} >= "
                    f"{_num(t.spec_min_draft_tokens)}"),
        f"accepted / proposed draft tokens over {ws}")
    # DEC-004 error rate
    for sev in (Severity.WARN, Severity.CRIT):
        def dec004(th: _T, sev: Severity = sev) -> str:
            limit = _num(cfg.slo.error_ratio) if sev is Severity.WARN else \
                _num(t.error_crit_ratio)
            return (f"infertop:error:ratio{ws} > {limit}"
                    f"\n  and infertop:requests_finished:increase{ws} >= "
                    f"{_num(t.error_min_requests)}")
        add("DEC-004", sev, dec004, f"share of finished requests over {ws} that failed")
    # DEC-007 requests refused at admission: judged as DEC-004 judges errors (no hold
    # margin: the rule compares without Context.past)
    for sev in (Severity.WARN, Severity.CRIT):
        def dec007(th: _T, sev: Severity = sev) -> str:
            limit = th("slo.error_ratio", ">", relax=False)
            expr = f"infertop:rejection:ratio{ws} > {limit}"
            if sev is Severity.CRIT:
                expr += (f"\n  and infertop:rejection:ratio{ws} >= "
                         f"{th('thresholds.error_crit_ratio', '>=', relax=False)}")
            return (expr + f"\n  and infertop:requests_ended:increase{ws} >= "
                    f"{th('thresholds.error_min_requests', '>=', relax=False)}")
        add("DEC-007", sev, dec007,
            f"share of the requests ended over {ws} (refused + finished) refused at admission")
    # SCH-006 engine asleep: a warning when requests wait on it, a notice otherwise (each
    # tick's state, no thresholds to relax)
    def sch006(th: _T, waiting: bool) -> str:
        queue = (f"infertop:requests_waiting:count >= "
                 f"{th('thresholds.queue_waiting_min', '>=', relax=False)}")
        return f"infertop:sleep_level:level >= 1\n  {'and' if waiting else 'unless'} {queue}"

    add("SCH-006", Severity.WARN, lambda th: sch006(th, True),
        "sleep level (1 weights offloaded, 2 weights and KV discarded) with requests waiting")
    add("SCH-006", Severity.NOTICE, lambda th: sch006(th, False),
        "sleep level (1 weights offloaded, 2 weights and KV discarded), nothing waiting")
    # DEC-005 server restarted (within the restart window)
    add("DEC-005", Severity.WARN,
        lambda th: (f"infertop:server_restarts:count{rs} > 0"
                    f"\n  or (changes(process_start_time_seconds[{rs}]) > 0"
                    f" and on (job, instance) infertop:server:seen)"
                    # an outage longer than the window (a real restart takes minutes:
                    # 545 s in tests/corpus/vllm-slow-restart) leaves no old sample in
                    # it: a process started within the window, of a target that had a
                    # start time before the window began, came back with a new identity
                    f"\n  or ((time() - process_start_time_seconds) < {_num(t.restart_window)}"
                    f" and on (job, instance)"
                    f" count_over_time(process_start_time_seconds[2h] offset {rs}) > 0)"),
        f"counter resets or process start-time changes in the last {rs}, or a process "
        f"started in the last {rs} after an outage")
    # DEC-006 server not answering: its target's scrapes fail
    add("DEC-006", Severity.CRIT,
        lambda th: "up == 0 and on (job, instance) infertop:server:seen",
        "`up` of a target that served inference metrics in the last hour")
    # SCH-005 the queue waits on a deferral, not capacity: a queue on half the judge
    # window's ticks and most of it (medians) deferred; both compared through
    # Context.past, so both relaxed while it fires
    def deferred_part(th: _T, relax: bool = True) -> str:
        return (f"infertop:deferred:median{js} / infertop:waiting:median{js} >= "
                f"{th('thresholds.deferred_share_min', '>=', relax)}"
                f"\n  and infertop:waiting:median{js} > 0")

    add("SCH-005", Severity.WARN,
        lambda th: (f"{deferred_part(th)}"
                    f"\n  and infertop:queued:share{js} >= {_num_relax(th, 0.5)}"),
        "share of the queue (medians over the judge window) deferred, not waiting for "
        "capacity")
    # SCH-002 queue while GPUs idle and KV free: needs a GPU reading on the same node as
    # the server (a ``node`` target label on both jobs, as fleet mode uses); a queue
    # mostly deferred is SCH-005's (it supersedes SCH-002 on the screen)
    # GPUs idle on the server's node: the mean of each GPU's SM-active median (DCGM's
    # opt-in profiling field), else of its util median on nodes without it (as the
    # screen falls back to NVML util); only GPUs with a ``node`` label, so a fleet without
    # one never averages every node's GPUs together (docs/alerts.md#sch-002)
    def gpus_idle(th: _T) -> str:
        sm = f'infertop:gpu_sm_active:median{js}{{node!=""}}'
        util = f'infertop:gpu_util:median{js}{{node!=""}}'
        return (f"(avg by (node) ({sm}) <= {th('thresholds.idle_sm_active_max', '<=')}"
                f"\n     or (avg by (node) ({util}) <= {th('thresholds.idle_util_max', '<=')}"
                f"\n         unless on (node) group by (node) ({sm})))")

    # KV free, or no KV reading at all (llama.cpp sizes KV per slot): llama.cpp defers a
    # request only when every slot is busy, so its queue is the cap reached
    def kv_free(th: _T) -> str:
        return (f"(infertop:kv_usage:median{js} <= {th('thresholds.kv_free_max', '<=')}"
                f"\n     or (infertop:queued:share{js} unless infertop:kv_usage:ratio))")

    # Without GPU readings on the node (a remote server, a CPU backend) the page names the
    # cap: the running batch at its window maximum on half the ticks while requests wait
    # for capacity (a server without that reading: the queue) and KV is free, as the
    # engine judges it (rules/scheduling._cap_from_page)
    def sch002(th: _T) -> str:
        queued = f"infertop:queued:share{js} >= {_num_relax(th, 0.5)}"
        # any GPU reading on the node; GPUs without a node label group to node="" with
        # every unlabelled server: the page variant then stays silent rather than judge a
        # server whose GPUs it cannot tell (the screen judges a box with GPUs by them)
        gpus = (f'group by (node) (infertop:gpu_sm_active:median{js})'
                f'\n       or group by (node) (infertop:gpu_util:median{js})')
        pinned = (f"\n  and infertop:running:median{js} >= infertop:running:max{js}"
                  f"\n  and infertop:running:max{js} >= 1"
                  f"\n  and (infertop:capacity_queued:share{js} >= {_num_relax(th, 0.5)}"
                  f"\n       or infertop:queued:share{js} unless "
                  f"infertop:requests_waiting_capacity:count)"
                  f"\n  and {kv_free(th)}"
                  f"\n  unless on (node) ({gpus})")
        return (f"(\n  ({queued}\n  and {kv_free(th)}\n  and on (node) {gpus_idle(th)})"
                f"\n or\n  ({queued}{pinned})\n)"
                f"\n  unless ({deferred_part(th, relax=False)})")

    add("SCH-002", Severity.WARN, sch002,
        "share of the judge window's ticks with a queue (GPUs idle, or the batch pinned "
        "at its maximum; KV free or no KV reading)")
    for i, e_relaxed in held.items():
        if e_relaxed != out[i].expr:
            out[i].expr = _held(out[i], e_relaxed, out)
    return out


def _held(a: Alert, e_relaxed: str, alerts: list[Alert]) -> str:
    """The alert's condition, or its relaxed condition while this very alert fires (its
    own ``ALERTS`` series: the code, the severity and its extra labels, such as HW-006's
    ``sensor``; a sibling without the label is matched with it empty), as the engine's
    per-(rule, subject, level) hold."""
    names = sorted({k for b in alerts if b.code == a.code for k, _ in b.labels})
    mine = dict(a.labels)
    sel = [f'alertname="{a.code}"', f'severity="{SEVERITY_LABEL[a.severity]}"',
           'alertstate="firing"'] + [f"{k}={_q(mine.get(k, ''))}" for k in names]
    ignoring = ", ".join(["alertname", "alertstate", "severity", "layer"] + names)
    return (f"({a.expr})\nor\n(({e_relaxed})\n  and ignoring ({ignoring}) "
            f"ALERTS{{{', '.join(sel)}}})")


def _fixed(expr: str) -> Callable[[_T], str]:
    """A condition with no thresholds (nothing for the hold margin to relax)."""
    return lambda th: expr


def _xid_in(xids: list[int]) -> str:
    """The last-Xid gauge when it holds one of ``xids``."""
    return " or ".join(f"{XID_VALUE} == {x}" for x in xids)


def _num_relax(th: _T, v: float) -> str:
    """A fixed share (not a config key) that the engine still relaxes through ``past``."""
    if th.relaxed:
        return _num(v * (1 - th.cfg.diagnosis.hold_margin))
    return _num(v)


@dataclass
class Export:
    recordings: list[Recording]
    alerts: list[Alert]
    not_exported: dict[str, str]
    config_path: str


def build(cfg: DiagnosisConfig | None = None) -> Export:
    """The rules for ``cfg`` (defaults when None): timing and texts from the catalogue."""
    cfg = cfg or DiagnosisConfig()
    specs = {s.code: s for s in Diagnoser(cfg).catalogue()}
    alerts = []
    for a in _alerts(cfg):
        s = specs[a.code]
        if not cfg.enabled(a.code):
            continue
        a.for_s = s.raise_after if s.raise_after is not None else cfg.diagnosis.raise_after
        a.keep_s = s.clear_after if s.clear_after is not None else cfg.diagnosis.clear_after
        a.title, a.layer = s.title, s.layer.value
        a.remedy = a.remedy or s.remedy
        alerts.append(a)
    exported = {a.code for a in alerts}
    missing = {c: NOT_EXPORTED.get(c, "not exported in this version")
               for c in specs if c not in exported}
    for c in specs:
        if not cfg.enabled(c):
            missing[c] = "disabled in the config"
    return Export(_recordings(cfg), alerts, dict(sorted(missing.items())), cfg.path)


def _q(s: str) -> str:
    return json.dumps(s, ensure_ascii=True)


def _block(expr: str, indent: str) -> str:
    """A multi-line PromQL expression as a YAML literal block."""
    return "|-\n" + "\n".join(indent + line for line in expr.splitlines())


def render(export: Export) -> str:
    """The rules file (Prometheus ``rule_files`` YAML)."""
    out = ["# infertop diagnosis rules for Prometheus (generated by `infertop rules export`; "
           "regenerate, do not edit)",
           f"# thresholds: {export.config_path or 'defaults'}",
           "# alertname = finding code; labels severity (warn|crit|notice) and layer; for: = the "
           "rule's raise delay,",
           "# keep_firing_for: = its clear delay (Prometheus >= 2.42); while firing, relaxed "
           "thresholds hold it (ALERTS).",
           "#",
           "# not exported (Prometheus lacks their inputs):"]
    for code, why in export.not_exported.items():
        out.append(f"#   {code}: {why}")
    out += ["groups:", f"  - name: {RECORDING_GROUP}", "    rules:"]
    for r in export.recordings:
        out += [f"      - record: {_q(r.record)}",
                f"        expr: {_block(r.expr, '          ')}"]
    out += [f"  - name: {ALERTING_GROUP}", "    rules:"]
    for a in export.alerts:
        sev = SEVERITY_LABEL[a.severity]
        sources = "; ".join(f"{k}: {SOURCES.get(k, 'infertop')}" for k in a.sources) or \
            "infertop: see docs/rules.md"
        out += [f"      - alert: {_q(a.code)}",
                f"        expr: {_block(a.expr, '          ')}",
                f"        for: {prom_duration(a.for_s)}",
                f"        keep_firing_for: {prom_duration(a.keep_s)}",
                "        labels:",
                f"          severity: {_q(sev)}",
                f"          layer: {_q(a.layer)}",
                *[f"          {k}: {_q(v)}" for k, v in a.labels],
                "        annotations:",
                f"          title: {_q(a.code + ' ' + a.title)}",
                "          value: " + _q(a.value_text + ": {{ $value | printf \"%.4g\" }}"),
                f"          remedy: {_q(a.remedy)}",
                f"          threshold_source: {_q(sources)}"]
    return "\n".join(out) + "\n"


def export_text(cfg: DiagnosisConfig | None = None) -> str:
    return render(build(cfg))
