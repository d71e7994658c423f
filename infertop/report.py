"""The ``infertop doctor`` report: findings by layer with evidence and remedies, plus the key
readings of each layer, as text, JSON or Markdown.  Pure: strings in, string out.

``meta`` carries what the caller knows about the run; recognised entries (all optional):
``source`` (what was read), ``duration`` (s), ``ticks``, ``now`` (unix time of the last
tick, for "since ... ago"), ``any_source_ok`` (False: nothing could be read),
``sources`` ({name: "ok" or the error}), ``unchecked`` (Diagnoser.missing_inputs()),
``episodes`` (``episodes()``: every finding raised during the run, with its raise and
clear times and whether it is still active),
``rules_total`` (rules in the catalogue: the verdict says how many were checked),
``unreachable`` ({server source: why}: printed above the verdict; the run exits 3),
``gpu_off`` (why there are no GPU readings: "no NVML ..."; names the unchecked GPU rules),
``too_short`` ({code: seconds}: checked rules that cannot raise in a run as short as
``duration``; the verdict does not count them as judged, WINDOW TOO SHORT names them).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .findings import Finding, Severity, worst
from .mdtext import md_code, md_text
from .model import LAYERS, Reading, Status
from .textclean import clean
from .units import fmt_reading, fmt_seconds

# The readings a report shows per layer, in this order (the screen shows everything).
KEY_READINGS: dict[str, tuple[str, ...]] = {
    "hardware": ("gpu.info", "gpu.lost", "gpu.util_ratio", "gpu.sm_active_ratio",
                 "gpu.mem_used_bytes", "gpu.power_watts", "gpu.temp_celsius", "gpu.sm_clock_hz",
                 "gpu.throttle_reasons", "gpu.pcie_tx_bytes_per_second",
                 "gpu.pcie_rx_bytes_per_second"),
    "kernels": ("gpu.sm_active_ratio", "gpu.sm_occupancy_ratio", "gpu.tensor_active_ratio",
                "gpu.dram_bw_util_ratio", "server.iteration_tokens_mean",
                "server.engine_steps_per_second", "gpu.peak_flops",
                "gpu.peak_mem_bandwidth_bytes_per_second", "sol.mfu_ratio", "sol.mbu_ratio",
                "sol.decode_roofline_tokens_per_second", "sol.decode_roofline_ratio",
                "server.setting"),
    "memory": ("kv.usage_ratio", "server.preemptions_per_second", "kv.prefix_cache_hit_ratio",
               "kv.prompt_source_ratio", "kv.cached_source_ratio",
               "kv.external_prefix_cache_hit_ratio",
               "kv.blocks_stored_per_second", "kv.blocks_evicted_per_second",
               "kv.prefix_thrash_ratio", "kv.event_resident_blocks",
               "kv.event_batches_dropped_per_second", "kv.used_tokens",
               "kv.available_tokens", "kv.evictable_tokens", "kv.batch_prefix_hit_ratio",
               "request.prefill_computed_tokens_mean", "server.requests_retracted",
               "kv.prompt_cached_ratio", "request.preemptions_mean",
               "gpu.mem_used_bytes", "gpu.mem_total_bytes", "process.gpu_mem_bytes"),
    "scheduling": ("host.cpu_ratio", "host.cpu_count", "host.load1", "server.requests_running",
                   "server.requests_waiting", "server.requests_deferred",
                   "server.requests_waiting_capacity",
                   "server.requests_paused", "server.sleep_level", "process.cpu_ratio",
                   "process.threads", "latency.queue_seconds", "latency.stage_seconds",
                   "server.utilization_ratio", "server.scheduler_idle_ratio",
                   "server.scheduler_cpu_cores", "server.scheduler_stage_ratio",
                   "server.requests_grammar_queued", "server.http_requests_active"),
    "parallelism": ("gpu.nvlink_tx_bytes_per_second", "gpu.nvlink_rx_bytes_per_second",
                    "gpu.topology", "throughput.generation_tokens_per_second",
                    "server.disagg_role", "pd.ttft_split_seconds",
                    "latency.kv_transfer_seconds", "kv.transfer_bytes_per_second",
                    "kv.transfer_failures_per_second", "disagg.queue_requests"),
    "decoding": ("server.info", "throughput.prompt_tokens_per_second",
                 "throughput.generation_tokens_per_second", "server.requests_per_second",
                 "server.error_ratio", "server.rejection_ratio", "server.requests_rejected",
                 "spec.batch_acceptance_ratio", "latency.ttft_seconds",
                 "latency.itl_seconds",
                 "latency.e2e_seconds", "spec.acceptance_ratio", "server.uptime_seconds",
                 "throughput.server_generation_tokens_per_second", "latency.inference_seconds",
                 "server.running_context_tokens"),
}
# execution settings worth a line in the kernels section
KEY_SETTINGS = ("cuda_graphs", "dtype", "quantization", "compilation_config",
                "tensor_parallel_size", "max_num_seqs")
# readings whose reason says where the value came from (a datasheet, NVML, the engine's
# counters or infertop's estimate): the report prints it beside an OK value too
SOURCED = ("gpu.peak_flops", "gpu.peak_mem_bandwidth_bytes_per_second", "sol.mfu_ratio",
           "sol.mbu_ratio", "sol.decode_roofline_tokens_per_second",
           "sol.decode_roofline_ratio")
MAX_PER_KEY = 16
QUANTILES_SHOWN = ("0.5", "0.99")


def episodes(events: Iterable[Any], active: Sequence[Finding] = ()) -> list[dict[str, Any]]:
    """Pair the Diagnoser's raise/clear events into episodes, causes before the symptoms
    they explain (the Diagnoser's cause_first), else oldest first:
    ``{"code", "subject", "severity", "since", "summary", "raised", "cleared", "active"}``
    (``severity`` the worst the episode reached: its escalations count, so the timeline
    never says warn for a finding that is crit; ``since`` its onset; ``cleared`` None while
    still raised; ``active`` from the last tick's findings)."""
    from .rules.engine import cause_first
    out: list[dict[str, Any]] = []
    open_: dict[tuple, dict[str, Any]] = {}
    for e in events:
        key = (e.code, tuple(e.subject))
        if e.kind == "raised":
            ep = {"code": e.code, "subject": dict(e.subject), "severity": e.severity.value,
                  "since": getattr(e, "since", None) or e.time,
                  "summary": e.summary, "raised": e.time, "cleared": None, "active": False}
            out.append(ep)
            open_[key] = ep
        elif e.kind == "escalated" and key in open_:
            ep = open_[key]
            if e.severity > Severity(ep["severity"]):
                ep["severity"], ep["summary"] = e.severity.value, e.summary
        elif e.kind == "cleared" and key in open_:
            open_.pop(key)["cleared"] = e.time
    now_active = {(f.code, tuple(f.subject)): f for f in active}
    for key, ep in open_.items():
        f = now_active.get(key)
        ep["active"] = f is not None
        if f is not None and f.severity > Severity(ep["severity"]):
            ep["severity"] = f.severity.value   # events trimmed away: the finding knows
    return cause_first(out, lambda ep: (ep["code"], tuple(ep["subject"].items())),
                       lambda ep: (ep["since"], ep["cleared"] if ep["cleared"] is not None
                                   else float("inf")))


def exit_code(findings: Iterable[Finding], any_source_ok: bool,
              unreachable: Mapping[str, str] | None = None) -> int:
    """0 healthy (notices allowed), 1 worst is a warning, 2 critical, 3 nothing readable
    or a server that was asked for (``--url``) could not be read."""
    if not any_source_ok or unreachable:
        return 3
    w = worst(list(findings))
    return {Severity.CRIT: 2, Severity.WARN: 1}.get(w, 0) if w is not None else 0


def select_key_readings(layers_readings: Mapping[str, Sequence[Reading]]
                        ) -> dict[str, list[Reading]]:
    """The report's readings per layer: the KEY_READINGS keys in order, a few per key,
    raw cumulative counters/histogram buckets left out, quantiles p50/p99 only."""
    out: dict[str, list[Reading]] = {}
    for layer in LAYERS:
        given = layers_readings.get(layer.value, ())
        wanted = KEY_READINGS[layer.value]
        picked: list[Reading] = []
        for key in wanted:
            rs = [r for r in given if r.key == key and _shown(r)]
            picked += sorted(rs, key=lambda r: r.labels)[:MAX_PER_KEY]
        out[layer.value] = picked
    return out


def _shown(r: Reading) -> bool:
    if r.buckets is not None:
        return False  # a raw histogram: its quantiles are the derived readings
    q = r.label("quantile")
    if r.key.startswith("latency.") and q not in QUANTILES_SHOWN:
        return False
    if r.key == "server.setting" and r.label("name") not in KEY_SETTINGS:
        return False
    return True


def render_report(findings: Sequence[Finding], layers_readings: Mapping[str, Sequence[Reading]],
                  fmt: str = "text", meta: Mapping[str, Any] | None = None) -> str:
    meta = dict(meta or {})
    readings = select_key_readings(layers_readings)
    # Last guard before a terminal: label values, reasons and settings came from outside
    # (the probes clean them already; a recording from an older infertop may not be).
    # JSON needs none: json.dumps escapes every control and non-ASCII character.
    if fmt == "json":
        return _json(findings, readings, meta)
    if fmt == "markdown":
        return clean(_markdown(findings, readings, meta), multiline=True)
    if fmt == "text":
        return clean(_text(findings, readings, meta), multiline=True)
    raise ValueError(f"unknown report format {fmt!r}: use text, json or markdown")


# ---- shared pieces --------------------------------------------------------------------
def _verdict(findings: Sequence[Finding], meta: Mapping[str, Any]) -> tuple[str, str]:
    """(one word, one line).  A dead server comes first; a verdict says how much of the
    catalogue it rests on, so "healthy" on a third of the rules never reads as all."""
    unreachable = meta.get("unreachable") or {}
    read = meta.get("ticks_read")
    if meta.get("any_source_ok") is False and read:
        # read earlier, not on the last tick: an outage at the end is not "nothing read"
        word = "no-data"
        line = (f"no server or GPU source answered on the last tick; {read} of "
                f"{meta.get('ticks', '?')} ticks were read before")
        counts = {s: sum(f.severity is s for f in findings) for s in Severity}
        w = worst(findings)
        if w is not None:
            word = w.value
            line = f"{word}: {len(findings)} finding{'s' if len(findings) != 1 else ''} (" + \
                ", ".join(f"{counts[s]} {s.value}" for s in sorted(Severity, reverse=True)
                          if counts[s]) + "); " + line
    elif meta.get("any_source_ok") is False:
        word, line = "no-data", "no source could be read"
    else:
        counts = {s: sum(f.severity is s for f in findings) for s in Severity}
        w = worst(findings)
        word = w.value if w is not None else "healthy"
        cover = coverage(meta)
        nothing = nothing_checked(meta)
        if not findings and nothing:   # every rule off reads nothing, not "healthy"
            word, line = "not-checked", nothing
        elif not findings:
            line = f"healthy on {cover}" if cover else "healthy: no findings"
        else:
            parts = [f"{counts[s]} {s.value}" for s in sorted(Severity, reverse=True)
                     if counts[s]]
            n = len(findings)
            line = f"{word}: {n} finding{'s' if n != 1 else ''} ({', '.join(parts)})"
            line += f"; {cover}" if cover else ""
    if unreachable:   # never "healthy" beside a server that could not be read
        word = "server-unreachable"
        rest = line if findings or meta.get("any_source_ok") is False else \
            "no findings in what could be read" + (f" ({coverage(meta)})" if coverage(meta)
                                                   else "")
        line = f"server unreachable ({', '.join(unreachable)}); {rest}"
    return word, line


def nothing_checked(meta: Mapping[str, Any]) -> str:
    """"" when at least one rule was checked; else why none was (every rule disabled in
    the config read "healthy", exit 0: issue 36, case 13).  doctor exits 3 on it."""
    total = meta.get("rules_total")
    unchecked = meta.get("unchecked") or {}
    if not total or len(unchecked) < total:
        return ""
    off = sum(1 for why in unchecked.values() if "disabled in the config" in why)
    return (f"nothing checked: none of the {total} rules could run ({off} disabled in the "
            f"config, {total - off} lack inputs)")


def coverage(meta: Mapping[str, Any]) -> str:
    """"11 of 23 rules; GPU rules not checked: no NVML" from ``rules_total``,
    ``unchecked`` and ``gpu_off``; "" when the caller did not say how many rules exist."""
    total = meta.get("rules_total")
    if not total:
        return ""
    unchecked = meta.get("unchecked") or {}
    checked = max(0, total - len(unchecked))
    short = meta.get("too_short") or {}
    if short:
        dur = meta.get("duration")
        run = f"a {_dur(dur)} run" if isinstance(dur, (int, float)) else "this run"
        out = f"{max(0, checked - len(short))} of {total} rules judged; {run} is too short " \
              f"for {len(short)} more (see WINDOW TOO SHORT)"
    else:
        out = f"{checked} of {total} rules checked" if unchecked else \
            f"all {total} rules checked"
    gpu = [c for c, why in unchecked.items()
           if any(w.startswith("gpu.") for w in why)]
    if gpu and meta.get("gpu_off"):
        out += f"; GPU rules not checked ({len(gpu)}): {meta['gpu_off']}"
    rest = len(unchecked) - (len(gpu) if meta.get("gpu_off") else 0)
    if rest > 0:
        out += f"; {rest} other{'s' if rest != 1 else ''} lack inputs (see NOT CHECKED)"
    return out


def _labels(labels) -> str:
    return "{" + ",".join(f"{k}={v}" for k, v in labels) + "}" if labels else ""


def _value(r: Reading) -> str:
    value = r.text if r.text is not None and r.ok else fmt_reading(r)
    if r.reason and (r.status not in (Status.OK, Status.STALE) or r.key in SOURCED):
        value += f" ({r.reason})"
    return value


def _reading_lines(rs: Sequence[Reading]) -> list[tuple[str, str]]:
    """(name, value) lines; a key read on several GPUs (and nothing else) is one line,
    ``0: 93 %  1: 94 %``, so an 8-GPU host stays readable."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(rs):
        j = i
        while j < len(rs) and rs[j].key == rs[i].key:
            j += 1
        group = rs[i:j]
        if len(group) > 1 and all(len(r.labels) == 1 and r.labels[0][0] == "gpu" for r in group):
            out.append((f"{group[0].key}{{gpu}}",
                        "  ".join(f"{r.labels[0][1]}: {_value(r)}" for r in group)))
        else:
            out += [(f"{r.key}{_labels(r.labels)}", _value(r)) for r in group]
        i = j
    return out


def _dur(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 60 else fmt_seconds(seconds)


def _since(f: Finding, meta: Mapping[str, Any]) -> str:
    """"00:00:26 (4.2 min ago), raised 00:00:29": the onset and the raise, as the
    timeline, the findings screen and the event log say them."""
    clock = _clock(f.since)
    now = meta.get("now")
    text = f"{clock} ({_dur(max(0.0, now - f.since))} ago)" if now else clock
    return text + (f", raised {_clock(f.raised)}" if f.raised is not None else "")


def _meta_pairs(meta: Mapping[str, Any]) -> list[tuple[str, str]]:
    out = []
    for k in ("source", "duration", "ticks"):
        if k in meta:
            v = meta[k]
            text = _dur(v) if k == "duration" and isinstance(v, (int, float)) else str(v)
            asked = meta.get("duration_asked")
            length = meta.get("recording_length")
            if k == "duration" and isinstance(v, (int, float)) and \
                    isinstance(length, (int, float)):
                # a replay: the whole recording, or how much of it was left out
                if v < length - 2.0:
                    text += f" of a {_dur(length)} recording (--duration; the rest not judged)"
                elif isinstance(asked, (int, float)) and asked > v + 2.0:
                    text += (f" (the whole recording: it ended before the {_dur(asked)} "
                             f"asked for)")
                else:
                    text += " (the whole recording)"
            elif k == "duration" and isinstance(v, (int, float)) and \
                    isinstance(asked, (int, float)) and v < asked - 2.0:
                text += (f" (stopped before the {_dur(asked)} asked for: every server "
                         f"unreachable from the start)" if meta.get("gave_up")
                         else f" (the source ended before the {_dur(asked)} asked for)")
            out.append((k, text))
    for name, state in (meta.get("sources") or {}).items():
        out.append((f"source {name}", str(state)))
    # a replay's lines left out (corrupt, a meta of the wrong type): counted, with the first
    out += [("note", str(n)) for n in meta.get("notes") or ()]
    return out


def _by_layer(findings: Sequence[Finding]) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {layer.value: [] for layer in LAYERS}
    for f in findings:
        out[f.layer.value].append(f)
    return out


# ---- text -------------------------------------------------------------------------------
def _text(findings, readings, meta) -> str:
    _, line = _verdict(findings, meta)
    lines = ["infertop doctor"]
    lines += [f"SERVER UNREACHABLE: {name}: {why}"
              for name, why in (meta.get("unreachable") or {}).items()]
    lines += [f"  {k}: {v}" for k, v in _meta_pairs(meta)]
    lines += [f"verdict: {line}", ""]
    for layer, fs in _by_layer(findings).items():
        lines.append(layer.upper())
        if not fs:
            lines.append("  no findings")
        for f in fs:
            lines.append(f"  [{f.severity.value.upper()}] {f.code} {f.title}")
            lines.append(f"      since    {_since(f, meta)}")
            for i, e in enumerate(f.evidence):
                lines.append(f"      {'evidence' if i == 0 else '':8} {e.describe()}")
            lines.append(f"      remedy   {f.remedy}")
        rs = readings.get(layer, [])
        if rs:
            lines.append("  readings")
            pairs = _reading_lines(rs)
            width = min(40, max(len(p[0]) for p in pairs))
            lines += [f"    {k:<{width}}  {v}" for k, v in pairs]
        lines.append("")
    lines += _chain_lines(findings)
    lines += _episode_lines(meta)
    lines += _short_lines(meta)
    unchecked = meta.get("unchecked") or {}
    if unchecked:
        lines.append("NOT CHECKED (inputs missing)")
        for code, why in unchecked.items():
            lines.append(f"  {code}: {'; '.join(why)}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _short_groups(meta: Mapping[str, Any]) -> list[tuple[float, list[str]]]:
    """(seconds needed, codes) of ``too_short``, shortest need first."""
    groups: dict[float, list[str]] = {}
    for code, need in (meta.get("too_short") or {}).items():
        groups.setdefault(need, []).append(code)
    return sorted(groups.items())


def _short_advice(meta: Mapping[str, Any]) -> str:
    need = max((meta.get("too_short") or {}).values(), default=0.0)
    return f"a finding raises only after its condition held long enough: " \
           f"--duration {need + 1:g} or more judges them all"


def _short_lines(meta: Mapping[str, Any]) -> list[str]:
    groups = _short_groups(meta)
    if not groups:
        return []
    lines = ["WINDOW TOO SHORT (checked, but could not raise in this run)"]
    lines += [f"  need {_dur(need)}: {', '.join(codes)}" for need, codes in groups]
    return lines + [f"  {_short_advice(meta)}", ""]


def _chains(findings: Sequence[Finding]) -> list[tuple[Finding, list[Finding]]]:
    """(cause, its symptoms) for every active cause that explains a symptom."""
    out: list[tuple[Finding, list[Finding]]] = []
    for f in findings:
        syms = [s for s in findings if f.code in s.caused_by]
        if syms:
            out.append((f, syms))
    return out


def _chain_lines(findings: Sequence[Finding]) -> list[str]:
    chains = _chains(findings)
    if not chains:
        return []
    lines = ["CAUSE AND SYMPTOM"]
    for cause, syms in chains:
        lines.append(f"  {cause.code} ({cause.layer.value}) {cause.title}")
        lines += [f"    -> {s.code} ({s.layer.value}) {s.title}" for s in syms]
    return lines + [""]


def _clock(t: float | None) -> str:
    """HH:MM:SS of a time; a time no clock can show (1e308, NaN from a recording's alert:
    OverflowError in localtime, issue 36 case 12) is a dash, as htmlreport.utc says it."""
    if t is None:
        return ""
    try:
        return time.strftime("%H:%M:%S", time.localtime(t))
    except (OverflowError, OSError, ValueError):
        return "–"


def _episode_lines(meta: Mapping[str, Any]) -> list[str]:
    eps = meta.get("episodes")
    if eps is None:
        return []
    lines = ["DURING THE RUN (raised and cleared)"]
    if not eps:
        lines.append("  no finding raised")
    for ep in eps:
        if ep["cleared"] is not None:
            state = f"cleared {_clock(ep['cleared'])} (after {_dur(ep['cleared'] - ep['raised'])})"
        else:
            state = "still active" if ep["active"] else "not cleared"
        lines.append(f"  {ep['code']:<8} [{ep['severity'].upper()}] since "
                     f"{_clock(ep.get('since', ep['raised']))}, raised {_clock(ep['raised'])}, "
                     f"{state}: {ep['summary']}")
    return lines + [""]


# ---- JSON -------------------------------------------------------------------------------
def _json(findings, readings, meta) -> str:
    word, line = _verdict(findings, meta)
    by_layer = _by_layer(findings)
    doc = {
        "verdict": word,
        "summary": line,
        "unreachable": dict(meta.get("unreachable") or {}),
        "findings": [f.to_dict() for f in findings],
        "layers": {layer: {"findings": [f.code for f in by_layer[layer]],
                           "worst": (w.value if (w := worst(by_layer[layer])) else None),
                           "readings": [r.to_dict() for r in readings.get(layer, [])]}
                   for layer in by_layer},
        "chains": [{"cause": c.code, "symptoms": [x.code for x in syms]}
                   for c, syms in _chains(findings)],
        "meta": {k: v for k, v in meta.items()},
    }
    return json.dumps(doc, indent=2, default=str) + "\n"


# ---- Markdown ---------------------------------------------------------------------------
def _md(text: object) -> str:
    """Outside text, inert in CommonMark/GFM (infertop.mdtext)."""
    return md_text(text)


def _markdown(findings, readings, meta) -> str:
    _, line = _verdict(findings, meta)
    out = ["# infertop doctor", ""]
    out += [f"**SERVER UNREACHABLE:** {_md(name)}: {_md(why)}" + "  "
            for name, why in (meta.get("unreachable") or {}).items()]
    out += [f"**Verdict:** {_md(line)}", ""]
    pairs = _meta_pairs(meta)
    if pairs:
        out += ["| | |", "|---|---|"] + [f"| {_md(k)} | {_md(v)} |" for k, v in pairs] + [""]
    for layer, fs in _by_layer(findings).items():
        out += [f"## {layer}", ""]
        if not fs:
            out += ["No findings.", ""]
        else:
            out += ["| severity | code | finding | evidence | remedy | since |",
                    "|---|---|---|---|---|---|"]
            for f in fs:
                ev = "<br>".join(_md(e.describe()) for e in f.evidence)
                # the code too: a Prometheus alert's alertname is outside text (issue 36, case 2)
                out.append(f"| {f.severity.value} | {_md(f.code)} | {_md(f.title)} | {ev} | "
                           f"{_md(f.remedy)} | {_md(_since(f, meta))} |")
            out.append("")
        rs = readings.get(layer, [])
        if rs:
            out += ["| reading | value |", "|---|---|"]
            out += [f"| {md_code(k)} | {_md(v)} |" for k, v in _reading_lines(rs)]
            out.append("")
    chains = _chains(findings)
    if chains:
        out += ["## cause and symptom", ""]
        for cause, syms in chains:
            out.append(f"- **{_md(cause.code)}** ({cause.layer.value}) {_md(cause.title)}")
            out += [f"  - → **{_md(x.code)}** ({x.layer.value}) {_md(x.title)}" for x in syms]
        out.append("")
    eps = meta.get("episodes")
    if eps is not None:
        out += ["## during the run", ""]
        if not eps:
            out += ["No finding raised.", ""]
        else:
            out += ["| code | severity | since | raised | cleared | summary |",
                    "|---|---|---|---|---|---|"]
            for ep in eps:
                cleared = _clock(ep["cleared"]) if ep["cleared"] is not None else \
                    ("still active" if ep["active"] else "not cleared")
                out.append(f"| {_md(ep['code'])} | {_md(ep['severity'])} | {_clock(ep.get('since', ep['raised']))} | "
                           f"{_clock(ep['raised'])} | {cleared} | {_md(ep['summary'])} |")
            out.append("")
    groups = _short_groups(meta)
    if groups:
        out += ["## window too short", ""]
        out += [f"- need {_dur(need)}: {_md(', '.join(codes))}" for need, codes in groups]
        out += ["", _md(_short_advice(meta)), ""]
    unchecked = meta.get("unchecked") or {}
    if unchecked:
        out += ["## not checked", ""]
        out += [f"- **{code}**: {_md('; '.join(why))}" for code, why in unchecked.items()]
        out.append("")
    return "\n".join(out).rstrip() + "\n"
