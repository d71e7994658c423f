"""An infertop recording as promtool's ``input_series`` (``infertop rules promtool-input``).

A recording holds raw readings under infertop's keys (``recording.py``); Prometheus would
have held the servers' own families and dcgm-exporter's fields.  This turns each reading
back into the series Prometheus would have scraped, on a fixed grid of the recording's
interval, so ``promtool test rules`` can run the exported rules (``infertop.promrules``)
on the very ticks infertop's own doctor judged:

* a server reading -> its dialect's family (``infertop.dialects``, the first table entry
  for the key, with its selector labels; ``model``/``engine`` back to the dialect's own
  label names; a finish ``reason`` back to its source label), job ``server``; a histogram
  -> ``_bucket{le}``, ``_count`` and ``_sum``;
* a GPU reading -> its DCGM field (``infertop.dcgm``, units back to the exporter's),
  job ``dcgm``, label ``gpu``;
* each server scrape -> ``up`` (0 when the source failed that tick, and its series go
  ``stale`` as after a failed real scrape);
* every series gets ``node`` (the recording's host), the label fleet mode groups by.

Readings infertop makes itself (process, thread, host, settings) have no Prometheus
series and are left out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from .dcgm import DCGM_FIELDS, MIB
from .dialects import DIALECTS, Dialect, FamilyMap
from .keys import SPECS
from .meta import ServerMeta
from .model import Kind, Reading, Snapshot, Status
from .promql import number
from .promrules import (
    DCGM_CLOCK_REASONS,
    DCGM_CORR_REMAP,
    DCGM_ECC_DBE,
    DCGM_FB_FREE,
    DCGM_MEM_TEMP,
    DCGM_REMAP_FAILURE,
    DCGM_UNC_REMAP,
    DCGM_XID,
    prom_duration,
    sample_name,
)
from .recording import Decoded, iter_snapshots
from .servers.vllm import VLLM_SLEEP_LEVELS, VLLM_SLEEP_STATE

# GPU keys the exporter names, beyond DCGM_FIELDS (key -> (field, factor to its unit))
EXTRA_GPU: dict[str, tuple[str, float]] = {
    "gpu.throttle_reasons": (DCGM_CLOCK_REASONS[0], 1.0),
    "gpu.xid_last": (DCGM_XID, 1.0),
    "gpu.ecc_uncorrected_total": (DCGM_ECC_DBE, 1.0),
    "gpu.mem_temp_celsius": (DCGM_MEM_TEMP, 1.0),
    "gpu.remapped_rows_uncorrectable": (DCGM_UNC_REMAP, 1.0),
    "gpu.remapped_rows_correctable": (DCGM_CORR_REMAP, 1.0),
    "gpu.row_remap_failure": (DCGM_REMAP_FAILURE, 1.0),
}
GPU_FIELD: dict[str, tuple[str, float]] = {
    **{key: (name, factor) for name, (key, factor) in DCGM_FIELDS.items()}, **EXTRA_GPU}


@dataclass
class InputSeries:
    """The converted series: selector text -> value per grid step (None: no sample)."""

    interval: float
    start: float
    steps: int = 0
    series: dict[str, dict[int, float | str]] = field(default_factory=dict)

    values: int = 0   # values held (counted for the budget, MAX_VALUES)

    def put(self, selector: str, step: int, value: float | str) -> None:
        if isinstance(value, float) and not math.isfinite(value):
            return  # a NaN/Inf reading: Prometheus would hold it, promtool cannot say it
        got = self.series.setdefault(selector, {})
        self.values += step not in got
        got[step] = value

    def values_text(self, selector: str) -> str:
        """promtool's notation: a value per step, ``_`` for none, ``stale`` once after a
        run of samples ends (a failed scrape marks its series stale)."""
        got = self.series[selector]
        out, prev = [], False
        for i in range(self.steps):
            v = got.get(i)
            if v is None:
                out.append("stale" if prev else "_")
                prev = False
            else:
                out.append(_fmt(v))
                prev = True
        return " ".join(out)


def _fmt(v: float | str) -> str:
    if isinstance(v, str):
        return v
    return number(v, exact=True)   # the recorded value, every digit


def selector(name: str, labels: dict[str, str]) -> str:
    """``name{a="b"}`` with PromQL string escapes (JSON's are a subset)."""
    if not labels:
        return name
    return name + "{" + ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(labels.items())) + "}"


def convert(dec: Decoded, interval: float | None = None) -> InputSeries:
    """The recording on a grid of ``interval`` seconds (default: the recording's own)."""
    header = dec.header
    return convert_snapshots(iter_snapshots(dec),
                             float(interval or header.get("interval") or 1.0),
                             str(header.get("host") or "localhost"),
                             str((header.get("server") or {}).get("kind") or ""))


# Budgets (issue 36, case 11): the grid is written whole, one value per step for every
# series, and promtool holds it all too.  A 31-line recording spanning 1970-3000, or an
# interval of 1e-9 s, made a grid of 3e10 steps (MemoryError).  A day of 1-second ticks
# is longer than any incident a rules test replays; 4 million values are ~400 MB here
# (a dict entry and a float each) and a ~60 MB test file.
MAX_STEPS = 86_400
MAX_VALUES = 4_000_000
MIN_INTERVAL = 0.001   # Prometheus durations count milliseconds: a smaller step is "0s"


class GridTooLarge(ValueError):
    """The recording on its grid would pass a budget above; the message says which."""


def grid_steps(start: float, end: float, step: float) -> int:
    """Grid steps from ``start`` to ``end``; GridTooLarge past MAX_STEPS or for a step
    promtool cannot write."""
    if not MIN_INTERVAL <= step <= MAX_STEPS:   # NaN fails too
        raise GridTooLarge(f"an interval of {step:g} s cannot be a promtool grid step "
                           f"(between {MIN_INTERVAL:g} s and {MAX_STEPS} s)")
    span = end - start
    steps = span / step + 1 if math.isfinite(span) and span >= 0 else math.inf
    if steps > MAX_STEPS:
        raise GridTooLarge(f"{span:.6g} s at {step:g} s a step is {steps:.3g} grid steps, "
                           f"more than the {MAX_STEPS} a promtool test holds here; convert "
                           "a shorter recording")
    return round(steps)


def convert_snapshots(snaps: Iterable[Snapshot], step: float, host: str,
                      kind: str = "") -> InputSeries:
    """Snapshots (a recording's, or a demo's played headless) on a grid of ``step`` s.
    Streams: holds the series, never the snapshots; GridTooLarge past the budgets."""
    out: InputSeries | None = None
    start = 0.0
    for snap in snaps:
        if out is None:
            start = snap.time
            out = InputSeries(step, start)
        grid_steps(start, snap.time, step)
        i = round((snap.time - start) / step)
        out.steps = max(out.steps, i + 1)
        _snapshot(out, snap, i, host, kind)
        if out.values > MAX_VALUES:
            raise GridTooLarge(f"more than {MAX_VALUES} values ({len(out.series)} series "
                               f"by {out.steps} steps so far); convert a shorter recording")
    return out if out is not None else InputSeries(step, start)


def _snapshot(out: InputSeries, snap: Snapshot, i: int, host: str, kind: str) -> None:
    for name, sample in snap.samples.items():
        if name.startswith("server"):
            inst = name.split(":", 1)[1] if ":" in name else host
            ok = sample.status in (Status.OK,)
            out.put(selector("up", {"job": "server", "instance": inst, "node": host}), i,
                    1.0 if ok else 0.0)
            if not ok:
                continue
            got = sample.meta.dialect if isinstance(sample.meta, ServerMeta) else None
            dialect = DIALECTS.get(str(got or kind))
            if dialect is None:
                continue
            for r in sample.readings:
                _server_reading(out, dialect, r, i, inst, host)
        elif name == "nvml" and sample.status is Status.OK:
            totals = {dict(r.labels).get("gpu", ""): r.value for r in sample.readings
                      if r.key == "gpu.mem_total_bytes" and r.value is not None}
            for r in sample.readings:
                _gpu_reading(out, r, i, host, totals)


def _server_reading(out: InputSeries, d: Dialect, r: Reading, i: int, inst: str,
                    host: str) -> None:
    if r.value is None or r.status not in (Status.OK, Status.STALE):
        return
    if r.key == "server.process_start_seconds":
        out.put(selector("process_start_time_seconds",
                         {"job": "server", "instance": inst, "node": host}), i, r.value)
        return
    if r.key == "server.sleep_level":
        _sleep_state(out, d, r, i, inst, host)
        return
    found = _family_for(d, r)
    if found is None:
        return
    m, labels = found
    labels.update({"job": "server", "instance": inst, "node": host})
    kind = SPECS[r.key].kind
    if kind is Kind.HISTOGRAM:
        if not r.buckets:
            return
        fam = m.families[0]
        for le, c in r.buckets:
            out.put(selector(f"{fam}_bucket", {**labels, "le": _le(le)}), i, c)
        out.put(selector(f"{fam}_count", labels), i, r.value)
        if r.hist_sum is not None:
            out.put(selector(f"{fam}_sum", labels), i, r.hist_sum)
        return
    out.put(selector(sample_name(d.name, m.families[0], kind, m.part), labels), i, r.value)


def _sleep_state(out: InputSeries, d: Dialect, r: Reading, i: int, inst: str,
                 host: str) -> None:
    """The level back to the one-hot ``engine_sleep_state{sleep_state}`` samples of the
    dialect that serves that family (vLLM's; asked of the dialect's declaration, not its
    name, so no per-kind test lives outside infertop/servers/)."""
    if VLLM_SLEEP_STATE not in d.extra_families or r.value is None:
        return
    labels = {"job": "server", "instance": inst, "node": host,
              **_source_labels(d, dict(r.labels))}
    for state, level in VLLM_SLEEP_LEVELS.items():
        out.put(selector(VLLM_SLEEP_STATE, {**labels, "sleep_state": state}), i,
                1.0 if level == r.value else 0.0)


def _le(le: float) -> str:
    return "+Inf" if math.isinf(le) else repr(float(le))


def _source_labels(d: Dialect, have: dict[str, str]) -> dict[str, str]:
    """A reading's ``model`` and ``engine`` labels under the dialect's own label names."""
    labels = {}
    if "model" in have and d.model_labels:
        labels[d.model_labels[0]] = have["model"]
    if "engine" in have and d.engine_label:
        labels[d.engine_label] = have["engine"]
    return labels


def _family_for(d: Dialect, r: Reading) -> tuple[FamilyMap, dict[str, str]] | None:
    """The table entry a reading came from, and the source labels it had."""
    have = dict(r.labels)
    for m in d.rules:
        if m.key != r.key or len(m.families) != 1:
            continue
        if any(have.get(k) != v for k, v in m.const):
            continue
        labels = {**dict(m.select), **_source_labels(d, have)}
        extra = {k: v for k, v in have.items()
                 if k not in ("instance", "model", "engine") and k not in dict(m.const)}
        if m.keep:
            back = {dst: src for src, dst in m.keep}
            ok = True
            for k, v in extra.items():
                if k not in back:
                    ok = False
                    break
                if m.rename:   # TGI err -> reason: "abort" was "dropped", an error any err
                    inv = {dst: src for src, dst in m.rename if src != "*"}
                    v = inv.get(v, v)
                labels[back[k]] = v
            if not ok:
                continue
        elif extra:
            continue
        return m, labels
    return None


def _gpu_reading(out: InputSeries, r: Reading, i: int, host: str,
                 totals: dict[str, float]) -> None:
    if r.value is None or r.status is not Status.OK:
        return
    gpu = dict(r.labels).get("gpu")
    if not gpu or len(r.labels) != 1:
        return
    base = {"job": "dcgm", "instance": f"{host}:9400", "node": host, "gpu": gpu}
    if r.key == "gpu.mem_total_bytes":
        return  # written with the used bytes below, as FB_FREE
    got = GPU_FIELD.get(r.key)
    if got is None:
        return
    name, factor = got
    out.put(selector(name, base), i, r.value / factor)
    if r.key == "gpu.mem_used_bytes":
        total = totals.get(gpu)
        if total is not None:
            out.put(selector(DCGM_FB_FREE, base), i, (total - r.value) / MIB)


def render(series: InputSeries, rule_files: list[str], tests: str = "") -> str:
    """A promtool test file: the rule files, the input series, and ``tests`` (YAML text
    of ``alert_rule_test``/``promql_expr_test`` entries at six spaces, may be empty)."""
    lines = ["# promtool test file made by `infertop rules promtool-input` from a recording",
             f"# grid: {series.steps} steps of {series.interval:g} s from epoch "
             f"{series.start:.3f} (promtool time 0)",
             "rule_files:"] + [f"  - {json.dumps(f)}" for f in rule_files] + [
             f"evaluation_interval: {prom_duration(series.interval)}",
             "tests:",
             f"  - interval: {prom_duration(series.interval)}",
             "    input_series:"]
    for sel in sorted(series.series):
        lines += [f"      - series: {json.dumps(sel)}",
                  f"        values: {json.dumps(series.values_text(sel))}"]
    if tests:
        lines.append(tests.rstrip("\n"))
    return "\n".join(lines) + "\n"

