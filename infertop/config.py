"""Diagnosis settings: timing (hysteresis), SLOs and every rule threshold, from TOML.

Defaults are documented field by field (``docs/rules.md`` is generated from them).  A
config file overrides any of them::

    [diagnosis]
    raise_after = 5          # seconds a condition must hold before a finding raises
    clear_after = 10         # healthy seconds before it clears

    [slo]
    ttft_p99_seconds = 0.5

    [thresholds]
    kv_pressure_ratio = 0.95

    [rules.MEM-002]          # per-rule timing, or enabled = false
    raise_after = 60

The file is ``--config PATH``, else ``$XDG_CONFIG_HOME/infertop/config.toml`` (default
``~/.config/infertop/config.toml``) when it exists.  Bad values raise ConfigError naming
the key (``thresholds.kv_pressure_ratio: expected a number between 0 and 1, got 'high'``);
unknown keys are rejected with the list of valid ones.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


class ConfigError(ValueError):
    """A config file that cannot be used; the message names the file and the bad key."""


# Top-level tables that belong to other parts of infertop (the screen's settings); this
# module leaves them alone instead of calling them unknown.
OTHER_SECTIONS: set[str] = {"ui", "keys"}

# value kinds: how a field is validated and described
_KINDS = {
    "ratio": "a number between 0 and 1",
    "seconds": "a number of seconds >= 0",
    "positive": "a number > 0",
    "factor": "a number >= 1",
    "count": "a whole number >= 0",
    "bytes": "a number of bytes >= 0",
    "codes": "a list of finding codes such as [\"HW-001\"]",
    "strings": "a list of strings",
    "bool": "true or false",
}


def _f(default: Any, kind: str, doc: str) -> Any:
    return field(default=default, metadata={"kind": kind, "doc": doc})


# ---- ranges (issue 36, case 4 and item 3) ----------------------------------------------------
# Every number a config can hold is bounded by what it can mean, each bound with its reason:
# an accepted value must neither exhaust memory (ttft_fit_windows = 1e15 built a list of that
# length every tick: killed at 3.8 GB) nor make the export promtool rejects (window = 1e15,
# 1e-300).  A field's own entry in FIELD_RANGES wins over its kind's in KIND_RANGES.
DAY, WEEK = 86_400.0, 7 * 86_400.0
_WINDOW_WHY = ("a window below 10 ms is no Prometheus range ([0s] is rejected: durations "
               "count milliseconds) and none holds two ticks; above a day it outlasts the "
               "history infertop keeps and any incident a rule judges")
KIND_RANGES: dict[str, tuple[float, float, str]] = {
    "ratio": (0.0, 1.0, "a share"),
    "seconds": (0.0, WEEK, "no condition waits or holds longer than a week to matter, and "
                           "Prometheus writes it as a plain duration"),
    "positive": (1e-6, 1e6, "a count of requests, cores, degrees or a rate per second: "
                            "none a rule compares is below a millionth or above a million"),
    "factor": (1.0, 1e6, "a ratio between two readings: above a million none can be told "
                         "from infinity"),
    "count": (0.0, 1e6, "a count of events, windows or requests a rule needs: above a "
                        "million it can never be met (and some size lists)"),
    "bytes": (0.0, 1e15, "a petabyte: beyond any GPU memory or link rate"),
}
FIELD_RANGES: dict[str, tuple[float, float, str]] = {
    "diagnosis.window": (0.01, DAY, _WINDOW_WHY),
    "diagnosis.judge_window": (0.01, DAY, _WINDOW_WHY),
    "diagnosis.events_max": (0, 100_000, "events are kept in memory for the findings log "
                                         "(~1 KB each)"),
    "slo.ttft_p99_seconds": (0.001, 3600.0, "a first token objective between a millisecond "
                                            "and an hour"),
    "thresholds.error_event_window": (0.01, WEEK, "exported as a Prometheus range"),
    "thresholds.restart_window": (0.01, WEEK, "exported as a Prometheus range"),
    "thresholds.ttft_fit_window": (0.01, DAY, _WINDOW_WHY),
    "thresholds.ttft_fit_windows": (0, 900, "the history keeps 900 points a series: more "
                                            "windows can never each hold one (the rule "
                                            "builds a list of this length every tick)"),
    "thresholds.ttft_fit_min_points": (0, 900, "at most ttft_fit_windows can hold points"),
    "thresholds.mem_growth_window": (0.01, DAY, _WINDOW_WHY),
    "thresholds.mem_oom_eta_seconds": (0.01, WEEK, "an out-of-memory forecast"),
    "thresholds.gpu_hot_celsius": (1.0, 200.0, "no GPU reports a temperature above 200 °C"),
    "thresholds.gpu_very_hot_celsius": (1.0, 200.0, "no GPU reports a temperature above 200 °C"),
    "thresholds.hbm_hot_celsius": (1.0, 200.0, "no GPU reports a temperature above 200 °C"),
    "thresholds.itl_jitter_min_seconds": (1e-6, 3600.0, "an inter-token latency"),
    "thresholds.fleet_slow_min_seconds": (1e-6, 3600.0, "a latency p99"),
    **{f"thresholds.{k}": (2.0, WEEK, "exported as a Prometheus range and an offset one "
                                      "second shorter (promtool rejects [0s] and offset 0s)")
       for k in ("gpu_hot_seconds", "gpu_very_hot_seconds", "hbm_hot_seconds",
                 "hw_slowdown_seconds")},
    "thresholds.gil_busy_threads": (0, 100_000, "threads of one process"),
    "ui.low_bandwidth": (1.0, 3600.0, "the screen's body every N seconds: below a second "
                                      "(the tick) it saves nothing, above an hour the "
                                      "screen misleads more than it saves"),
}
# [ui] low_bandwidth / --low-bandwidth without a number: a body every 5 s cut infertop's
# bytes at 80x24 by ~4x in benchmarks/bytes-issue35.md, and a screen 5 s old still reads live
LOW_BANDWIDTH_SECONDS = 5.0
# lists of strings (finish reasons): each lands in the exported PromQL regex and every
# finish reason is compared with each; a 10 MB list made an export promtool rejects
MAX_STRINGS, MAX_STRING = 32, 200


def value_range(key: str, kind: str) -> tuple[float, float, str] | None:
    """(lowest, highest, why) a number under ``key`` (``section.name``) may take."""
    if key in FIELD_RANGES:
        return FIELD_RANGES[key]
    if key.startswith("rules."):   # rules.CODE.raise_after: as diagnosis.raise_after
        key = "diagnosis." + key.rsplit(".", 1)[-1]
        if key in FIELD_RANGES:
            return FIELD_RANGES[key]
    return KIND_RANGES.get(kind)


def _shown(raw: Any) -> str:
    """A bad value as the message shows it: a 10 MB string is not echoed whole."""
    text = repr(raw)
    return text if len(text) <= 80 else text[:60] + f"… ({len(text)} characters)"


@dataclass(frozen=True)
class Timing:
    """[diagnosis]: hysteresis and windows shared by all rules."""

    raise_after: float = _f(5.0, "seconds",
                            "a condition must hold this long before its finding raises")
    clear_after: float = _f(10.0, "seconds",
                            "a raised finding clears after this many healthy seconds")
    window: float = _f(60.0, "positive",
                       "seconds over which counters become rates and histograms quantiles "
                       "(keep equal to the screen's window)")
    judge_window: float = _f(10.0, "positive",
                             "seconds over which rules judge a gauge by its median, so jitter "
                             "around a threshold neither hides a condition nor makes it flap")
    hold_margin: float = _f(0.1, "ratio",
                            "a raised finding's thresholds relax by this share towards healthy "
                            "(raise at 0.9, hold down to 0.81): a reading hovering at the "
                            "threshold raises once and stays raised")
    events_max: int = _f(500, "count", "raise/clear events kept for the findings log")
    disabled: tuple[str, ...] = _f((), "codes", "finding codes never evaluated")


@dataclass(frozen=True)
class SLO:
    """[slo]: service-level objectives the decoding rules hold the server to."""

    ttft_p99_seconds: float = _f(0.2, "positive", "DEC-001: time-to-first-token p99 objective")
    error_ratio: float = _f(0.001, "ratio",
                            "DEC-004: highest acceptable share of finished requests that failed")


@dataclass(frozen=True)
class Thresholds:
    """[thresholds]: every rule's limits (the rule code that uses each one is in its doc)."""

    # ---- hardware -------------------------------------------------------------------
    busy_util_ratio: float = _f(0.9, "ratio", "HW-001: NVML GPU util at or above this is 'busy'")
    busy_sm_active_max: float = _f(0.5, "ratio",
                                   "HW-001: GPM SM activity at or below this is 'not working'")
    tensor_busy_sm_min: float = _f(0.5, "ratio",
                                   "HW-002: SM activity at or above this means the GPU computes")
    tensor_idle_max: float = _f(0.02, "ratio",
                                "HW-002: tensor-pipe activity at or below this is 'idle'")
    throttle_clock_ratio: float = _f(0.85, "ratio",
                                     "HW-003: power-cap throttling counts only when the SM clock "
                                     "is below this share of its maximum")
    pcie_saturated_ratio: float = _f(0.8, "ratio",
                                     "HW-004: PCIe rate (either direction) at or above this share "
                                     "of the link's capacity")
    error_event_window: float = _f(300.0, "positive",
                                   "HW-005: a new Xid/ECC error stays a finding this many seconds; "
                                   "HW-008: correctable row remaps growing over this window")
    gpu_hot_celsius: float = _f(85.0, "positive",
                                "HW-006: core temperature above this for gpu_hot_seconds warns")
    gpu_hot_seconds: float = _f(300.0, "seconds", "HW-006: how long the core stays hot to warn")
    gpu_very_hot_celsius: float = _f(92.0, "positive",
                                     "HW-006: core temperature above this for "
                                     "gpu_very_hot_seconds is critical")
    gpu_very_hot_seconds: float = _f(120.0, "seconds",
                                     "HW-006: how long the core stays very hot to be critical")
    hbm_hot_celsius: float = _f(95.0, "positive",
                                "HW-006: memory (HBM) temperature above this for "
                                "hbm_hot_seconds warns")
    hbm_hot_seconds: float = _f(300.0, "seconds", "HW-006: how long the HBM stays hot to warn")
    hw_slowdown_seconds: float = _f(600.0, "seconds",
                                    "HW-007: the hardware-slowdown clock event held this long "
                                    "is a degraded board, not a transient")
    # ---- kernels --------------------------------------------------------------------
    launch_thread_cpu_min: float = _f(0.9, "positive",
                                      "KRN-001: an engine thread using at least this many cores "
                                      "is CPU-bound")
    launch_sm_active_max: float = _f(0.4, "ratio",
                                     "KRN-001: mean SM activity at or below this is 'starved'")
    launch_batch_max: float = _f(16.0, "positive",
                                 "KRN-001: running requests (or tokens per step) at or below "
                                 "this is a small batch")
    ttft_slope_min: float = _f(1.5, "positive",
                               "KRN-002: slope of log(TTFT) over log(prompt length) at or above "
                               "this is superlinear")
    ttft_fit_window: float = _f(10.0, "positive",
                                "KRN-002: seconds per (mean prompt, mean TTFT) point")
    ttft_fit_windows: int = _f(12, "count", "KRN-002: how many past windows the fit uses")
    ttft_fit_min_points: int = _f(4, "count", "KRN-002: windows with requests needed for a fit")
    ttft_fit_min_requests: int = _f(3, "count", "KRN-002: requests a window needs to count")
    ttft_fit_prompt_spread: float = _f(2.0, "factor",
                                       "KRN-002: largest/smallest mean prompt length needed")
    roofline_ratio_max: float = _f(0.3, "ratio",
                                   "KRN-003: decode tokens/s at or below this share of its "
                                   "bandwidth roofline is far below it")
    roofline_busy_util_min: float = _f(0.8, "ratio",
                                       "KRN-003: mean NVML GPU util at or above this is 'busy'")
    roofline_batch_max: float = _f(16.0, "positive",
                                   "KRN-003: running requests at or below this is a small batch "
                                   "(larger batches below the roofline have other causes)")
    roofline_dram_max: float = _f(0.5, "ratio",
                                  "KRN-003: GPM DRAM bandwidth at or above this says the memory "
                                  "is busy after all (the estimate is off): no finding")
    # ---- memory ---------------------------------------------------------------------
    kv_pressure_ratio: float = _f(0.85, "ratio", "MEM-001: KV-cache usage at or above this")
    kv_preempt_crit_per_second: float = _f(1.0, "positive",
                                           "MEM-001: preemptions per second that make it critical")
    kv_leak_ratio: float = _f(0.2, "ratio",
                              "MEM-002: KV usage at or above this with no request running")
    mem_headroom_ratio: float = _f(0.2, "ratio",
                                   "MEM-003: free GPU memory below this share is a notice")
    mem_full_ratio: float = _f(0.98, "ratio",
                               "MEM-003: used memory at or above this share of the card is "
                               "critical when no reservation explains it (or beyond one)")
    mem_growth_window: float = _f(120.0, "positive",
                                  "MEM-003: seconds over which steady growth is judged")
    mem_growth_ratio: float = _f(0.03, "ratio",
                                 "MEM-003: growth over the window (share of total) that counts")
    mem_oom_eta_seconds: float = _f(300.0, "positive",
                                    "MEM-003: growing memory that fills up sooner than this is "
                                    "critical")
    weights_min_bytes: float = _f(float(1 << 30), "bytes",
                                  "MEM-004: GPU memory a process needs to count as holding weights")
    thrash_ratio: float = _f(0.3, "ratio",
                             "MEM-005: share of evicted KV blocks stored again within the "
                             "restore window (60 s) that is prefix-cache thrash")
    thrash_min_evictions: float = _f(100.0, "count",
                                     "MEM-005: evicted KV blocks in the window needed to judge")
    # ---- scheduling -----------------------------------------------------------------
    gil_cpu_min: float = _f(0.85, "positive",
                            "SCH-001: process CPU (cores) from which it is 'pinned at one core'")
    gil_cpu_max: float = _f(1.15, "positive",
                            "SCH-001: process CPU (cores) up to which it is 'pinned at one core'")
    gil_thread_busy: float = _f(0.15, "positive",
                                "SCH-001: a thread using at least this many cores is busy")
    gil_busy_threads: int = _f(2, "count", "SCH-001: busy threads that compete for the GIL")
    gil_throughput_drop: float = _f(0.2, "ratio",
                                    "SCH-001: generation throughput this far below its recent "
                                    "peak is 'falling'")
    queue_waiting_min: float = _f(1.0, "positive", "SCH-002: waiting requests that form a queue")
    idle_sm_active_max: float = _f(0.5, "ratio",
                                   "SCH-002: mean SM activity at or below this is 'idle' (GPM)")
    idle_util_max: float = _f(0.6, "ratio",
                              "SCH-002: mean NVML util at or below this is 'idle' (no GPM)")
    kv_free_max: float = _f(0.7, "ratio", "SCH-002: KV usage at or below this is 'free'")
    thread_busy_cores: float = _f(0.1, "positive",
                                  "SCH-003: a thread using at least this many cores is runnable")
    threads_per_core_max: float = _f(2.0, "positive",
                                     "SCH-003: runnable threads per logical CPU that is too many")
    threads_host_busy_ratio: float = _f(0.7, "ratio",
                                        "SCH-003: host CPU busy share from which too many "
                                        "runnable threads hurt (they then fight for cores)")
    host_cpu_saturated: float = _f(0.9, "ratio", "SCH-004: whole-host CPU busy share")
    host_top_scan_at: float = _f(0.8, "ratio",
                                 "SCH-004: host CPU busy share from which the host's top CPU "
                                 "consumers are read (a /proc scan every 5 s while it lasts; "
                                 "capped at host_cpu_saturated)")
    deferred_share_min: float = _f(0.5, "ratio",
                                   "SCH-005: share of the queue (medians) waiting on a "
                                   "deferral, not capacity, from which it is the deferral's")
    # ---- parallelism ----------------------------------------------------------------
    tp_imbalance: float = _f(0.2, "ratio",
                             "PAR-001: spread (max - min) of SM activity/util inside a TP group")
    tp_busy_min: float = _f(0.3, "ratio",
                            "PAR-001: mean activity a TP group needs before imbalance counts")
    tp_pcie_heavy_ratio: float = _f(0.3, "ratio",
                                    "PAR-002: PCIe rate (share of link capacity) that is heavy")
    tp_pcie_heavy_bytes: float = _f(4e9, "bytes",
                                    "PAR-002: PCIe bytes/s that is heavy when the link's capacity "
                                    "is unknown")
    dp_load_ratio: float = _f(2.0, "factor",
                              "PAR-003: busiest engine's load (running+waiting) over the "
                              "quietest's (+1)")
    dp_load_min_gap: float = _f(4.0, "positive",
                                "PAR-003: smallest load difference (requests) that counts")
    dp_kv_gap: float = _f(0.3, "ratio", "PAR-003: KV-usage spread between engines that counts")
    kv_transfer_ttft_share: float = _f(0.5, "ratio",
                                       "PAR-004: mean KV transfer as a share of the mean "
                                       "TTFT from which the transfer dominates")
    pd_running_ratio: float = _f(3.0, "factor",
                                 "PAR-005: prefill engines' mean running requests over the "
                                 "decode engines' that is an imbalance")
    pd_prefill_queue: float = _f(100.0, "positive",
                                 "PAR-006: requests waiting on a prefill engine that saturate it")
    pd_decode_kv_full: float = _f(0.95, "ratio",
                                  "PAR-007: KV usage of a decode engine that is critical")
    # ---- fleet (cross-node) ---------------------------------------------------------
    fleet_slow_factor: float = _f(2.0, "factor",
                                  "FLT-001: a node's TTFT/ITL p99 over the median of its peers "
                                  "(same model) that is slow")
    fleet_slow_min_seconds: float = _f(0.1, "positive",
                                       "FLT-001: the slow node's p99 must also reach this")
    fleet_min_peers: int = _f(3, "count",
                              "FLT-001: nodes serving the same model needed to compare")
    # ---- decoding -------------------------------------------------------------------
    slo_min_requests: int = _f(10, "count",
                               "DEC-001: first tokens in the window needed to judge the p99")
    ttft_crit_factor: float = _f(5.0, "factor", "DEC-001: p99 this many times the SLO is critical")
    itl_jitter_ratio: float = _f(4.0, "factor",
                                 "DEC-002: inter-token latency p99/p50 at or above this")
    itl_jitter_min_seconds: float = _f(0.1, "positive",
                                       "DEC-002: ITL p99 must also reach this (tiny jitter is fine)")
    itl_min_tokens: int = _f(100, "count", "DEC-002: tokens in the window needed to judge")
    spec_acceptance_min: float = _f(0.4, "ratio",
                                    "DEC-003: accepted/proposed draft tokens below this")
    spec_min_draft_tokens: int = _f(100, "count",
                                    "DEC-003: proposed draft tokens in the window needed to judge")
    error_min_requests: int = _f(20, "count",
                                 "DEC-004: finished requests in the window needed to judge")
    error_crit_ratio: float = _f(0.05, "ratio", "DEC-004: error share that is critical")
    error_reasons: tuple[str, ...] = _f(("error",), "strings",
                                        "DEC-004: finish reasons that count as errors (client "
                                        "aborts are not errors by default)")
    restart_window: float = _f(300.0, "positive",
                               "DEC-005: a restart stays a finding this many seconds")


@dataclass(frozen=True)
class RuleOverride:
    """[rules.<CODE>]: one rule's own timing, or switched off."""

    enabled: bool = _f(True, "bool", "false switches the rule off")
    raise_after: float | None = _f(None, "seconds", "this rule's raise delay (default: global)")
    clear_after: float | None = _f(None, "seconds", "this rule's clear delay (default: global)")


@dataclass(frozen=True)
class DiagnosisConfig:
    """Everything the Diagnoser reads; ``DiagnosisConfig()`` is the documented defaults."""

    diagnosis: Timing = field(default_factory=Timing)
    slo: SLO = field(default_factory=SLO)
    thresholds: Thresholds = field(default_factory=Thresholds)
    rules: Mapping[str, RuleOverride] = field(default_factory=dict)
    path: str = ""  # the file it came from ("" for defaults)
    # [ui] low_bandwidth = N: the screen's --low-bandwidth N (the only [ui] key read here)
    low_bandwidth: float | None = None

    def value(self, qualified: str) -> Any:
        """``thresholds.kv_pressure_ratio`` -> its value (for the catalogue and help)."""
        section, _, name = qualified.partition(".")
        return getattr(getattr(self, section), name)

    def enabled(self, code: str) -> bool:
        o = self.rules.get(code)
        return code not in self.diagnosis.disabled and (o is None or o.enabled)

    def raise_after(self, code: str, rule_default: float | None = None) -> float:
        o = self.rules.get(code)
        if o is not None and o.raise_after is not None:
            return o.raise_after
        return self.diagnosis.raise_after if rule_default is None else rule_default

    def clear_after(self, code: str, rule_default: float | None = None) -> float:
        o = self.rules.get(code)
        if o is not None and o.clear_after is not None:
            return o.clear_after
        return self.diagnosis.clear_after if rule_default is None else rule_default


SECTIONS: dict[str, type] = {"diagnosis": Timing, "slo": SLO, "thresholds": Thresholds}


def default_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "infertop" / "config.toml"


def load_config(path: str | None = None) -> DiagnosisConfig:
    """The config from ``path``, else from the default location if a file is there, else
    the defaults.  Raises ConfigError (naming the file and key) for anything wrong."""
    if path is None:
        p = default_config_path()
        try:
            found = p.is_file()
        except OSError as e:   # a HOME this user may not search (sudo -u, a debug pod)
            raise ConfigError(f"config file {p}: cannot read: {e.strerror or e} "
                              f"(pass --config FILE, or set XDG_CONFIG_HOME)") from None
        if not found:
            return DiagnosisConfig()
    else:
        p = Path(path).expanduser()
        try:
            found = p.is_file()
        except OSError as e:   # a name too long for the file system (found by the props suite)
            raise ConfigError(f"config file {p}: cannot read: {e.strerror or e}") from None
        if not found:
            raise ConfigError(f"config file {p}: not found")
    try:
        with open(p, "rb") as fh:   # a budget: a config is a few KB
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"config file {p}: cannot read: {_first(str(e))}") from None
    return replace(config_from_bytes(raw, f"config file {p}"), path=str(p))


def config_from_bytes(raw: bytes, where: str = "config") -> DiagnosisConfig:
    """A config file's bytes -> the config; ConfigError (one line, starting ``where``)
    for anything else.  The entry point the fuzzer drives (tools/fuzz)."""
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{where}: larger than {MAX_CONFIG_BYTES // 1024} KiB, not a config")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{where}: not valid TOML: {_first(str(e))}") from None
    except RecursionError:   # a 50,000-deep array: tomllib recurses (issue 36, case 13)
        raise ConfigError(f"{where}: not valid TOML: nested too deep") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{where}: cannot read: {_first(str(e))}") from None
    try:
        return config_from_dict(data)
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None


def config_from_dict(data: Mapping[str, Any]) -> DiagnosisConfig:
    """Validate a parsed TOML document (also used by tests and the options screen)."""
    valid = sorted([*SECTIONS, "rules"])
    parts: dict[str, Any] = {}
    for name, body in data.items():
        if name in OTHER_SECTIONS:
            if name == "ui" and isinstance(body, Mapping) and "low_bandwidth" in body:
                parts["low_bandwidth"] = _coerce("ui.low_bandwidth", "positive",
                                                 body["low_bandwidth"])
            continue
        if name not in SECTIONS and name != "rules":
            raise ConfigError(_unknown(name, valid + sorted(OTHER_SECTIONS), "section"))
        if not isinstance(body, Mapping):
            raise ConfigError(f"{name}: expected a table ([{name}]), got {body!r}")
        if name == "rules":
            parts["rules"] = _rules(body)
        else:
            parts[name] = _section(name, SECTIONS[name], body)
    cfg = DiagnosisConfig(**parts)
    _check_codes("diagnosis.disabled", cfg.diagnosis.disabled)
    t = cfg.thresholds
    if t.gil_cpu_min > t.gil_cpu_max:
        raise ConfigError(f"thresholds.gil_cpu_min: must not exceed thresholds.gil_cpu_max "
                          f"({t.gil_cpu_max}), got {t.gil_cpu_min}")
    return cfg


def _section(prefix: str, cls: type, body: Mapping[str, Any]) -> Any:
    specs = {f.name: f for f in fields(cls)}
    values: dict[str, Any] = {}
    for key, raw in body.items():
        f = specs.get(key)
        if f is None:
            raise ConfigError(_unknown(f"{prefix}.{key}", sorted(specs), "key"))
        values[key] = _coerce(f"{prefix}.{key}", f.metadata["kind"], raw)
    return cls(**values)


def _rules(body: Mapping[str, Any]) -> dict[str, RuleOverride]:
    out = {}
    for code, sub in body.items():
        _check_codes("rules", (code,))
        if not isinstance(sub, Mapping):
            raise ConfigError(f"rules.{code}: expected a table ([rules.{code}]), got {sub!r}")
        out[code] = _section(f"rules.{code}", RuleOverride, sub)
    return out


def _coerce(key: str, kind: str, raw: Any) -> Any:
    def bad() -> ConfigError:
        return ConfigError(f"{key}: expected {_KINDS[kind]}, got {_shown(raw)}")

    if kind == "bool":
        if not isinstance(raw, bool):
            raise bad()
        return raw
    if kind in ("codes", "strings"):
        if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
            raise bad()
        if kind == "strings" and (len(raw) > MAX_STRINGS or
                                  any(not 0 < len(x) <= MAX_STRING for x in raw)):
            raise ConfigError(f"{key}: at most {MAX_STRINGS} strings of 1 to {MAX_STRING} "
                              f"characters (finish reasons are short words), got {_shown(raw)}")
        return tuple(raw)
    # numbers: TOML booleans are not numbers here, though Python says they are ints
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise bad()
    # TOML integers are unbounded: 10**400 overflows float(), 10**30 a deque's maxlen
    if isinstance(raw, int) and abs(raw) > MAX_NUMBER:
        raise ConfigError(f"{key}: {str(raw)[:20]}… is too large (at most {MAX_NUMBER:g})")
    v = float(raw)
    if v != v or abs(v) > MAX_NUMBER:  # NaN, inf, or a number no setting means
        raise bad() if v != v else ConfigError(
            f"{key}: {raw!r} is too large (at most {MAX_NUMBER:g})")
    if kind == "ratio" and not 0.0 <= v <= 1.0:
        raise bad()
    if kind in ("seconds", "bytes") and v < 0:
        raise bad()
    if kind == "positive" and not v > 0:
        raise bad()
    if kind == "factor" and v < 1:
        raise bad()
    if kind == "count" and (v < 0 or v != int(v)):
        raise bad()
    got = value_range(key, kind)
    if got is not None and not got[0] <= v <= got[1]:
        lo, hi, why = got
        raise ConfigError(f"{key}: {_shown(raw)} is outside {lo:g} to {hi:g} ({why})")
    return int(v) if kind == "count" else v


MAX_NUMBER = 1e15   # above any real threshold (bytes included); keeps every use in range
MAX_CONFIG_BYTES = 1024 * 1024


def _first(text: str) -> str:
    return text if len(text) <= 200 else text[:200] + "…"


def _check_codes(key: str, codes: tuple[str, ...]) -> None:
    from .rules.registry import codes as known_codes  # lazy: rules import this module
    known = known_codes()
    for c in codes:
        if c not in known:
            raise ConfigError(_unknown(f"{key}.{c}" if key == "rules" else f"{key}: {c!r}",
                                       list(known), "finding code"))


def _unknown(what: str, valid: list[str], noun: str) -> str:
    name = what.rsplit(".", 1)[-1].strip("'\": ")
    close = difflib.get_close_matches(name, valid, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"{what}: unknown {noun}{hint}; valid: {', '.join(valid)}"


def describe_fields(cls: type) -> list[tuple[str, Any, str, str]]:
    """(name, default, kind description, doc) of each field: for docs and the help screen."""
    out = []
    for f in fields(cls):
        default = f.default if f.default is not MISSING else None
        out.append((f.name, default, _KINDS[f.metadata["kind"]], f.metadata["doc"]))
    return out
