"""Prometheus's alerts from infertop's exported rules, as findings per node.

When the rules of ``infertop rules export`` run in the fleet's Prometheus, the judging is
done there, on every node, and the fleet screen shows its result instead of judging the
nodes itself (``probes/prometheus/aggregates.py`` reads the alerts; ``infertop.fleet`` uses
these findings).  Each alert becomes the finding it was exported from: ``alertname`` is
the code, ``severity`` and ``layer`` its labels, the annotations its title, value against
threshold and remedy.  The subject keeps the series' identifying labels and says where the
finding comes from: ``via=prometheus``, and ``alertstate=pending`` while Prometheus holds it
within ``for:``: shown as "(pending warn)", a notice until it fires (the doctor's exit code
counts raised findings only).  Label values and
annotations were cleaned when read (textclean); they are cleaned again here because a
recording can carry them too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .findings import Evidence, Finding, Severity, leads
from .model import Layer, make_labels
from .textclean import one_line

VIA = "prometheus"
# labels that say what the alert is rather than what it is about
# (HW-006's ``sensor`` and HW-005's ``xid_action`` pick the alert's remedy: the screen has
# one finding per GPU for each, so they are not part of the subject either)
_NOT_SUBJECT = frozenset({"alertname", "alertstate", "severity", "layer", "job", "__name__",
                          "model_name", "model", "sensor", "xid_action"})
_SEVERITY = {"crit": Severity.CRIT, "critical": Severity.CRIT, "warn": Severity.WARN,
             "warning": Severity.WARN}
_LAYERS = {layer.value: layer for layer in Layer}
_PREFIX_LAYER = {"HW": Layer.HARDWARE, "KRN": Layer.KERNELS, "MEM": Layer.MEMORY,
                 "SCH": Layer.SCHEDULING, "PAR": Layer.PARALLELISM, "DEC": Layer.DECODING}


def is_pending(f: Finding) -> bool:
    return dict(f.subject).get("alertstate") == "pending"


def from_prometheus(f: Finding) -> bool:
    return dict(f.subject).get("via") == VIA


def alert_finding(alert: Mapping[str, Any], node: str, now: float) -> Finding | None:
    """One active alert (as ``aggregates.alerting_groups`` keeps it) as a finding."""
    labels = alert.get("labels")
    if not isinstance(labels, Mapping):
        return None
    code = one_line(labels.get("alertname", ""), 40)
    if not code:
        return None
    layer = _LAYERS.get(str(labels.get("layer", ""))) or \
        _PREFIX_LAYER.get(code.split("-", 1)[0], Layer.HARDWARE)
    got = alert.get("annotations")
    notes: Mapping[str, Any] = got if isinstance(got, Mapping) else {}
    state = "pending" if alert.get("state") == "pending" else "firing"
    title = one_line(notes.get("title", ""), 120)
    if title.startswith(code + " "):
        title = title[len(code) + 1:]
    subject = {one_line(k, 100): one_line(v, 200) for k, v in labels.items()
               if k not in _NOT_SUBJECT}
    subject.update(node=node, via=VIA)
    if state == "pending":
        subject["alertstate"] = "pending"
    value = alert.get("value")
    number = float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None
    said = one_line(notes.get("value", ""), 200)
    source = one_line(notes.get("threshold_source", ""), 300)
    note = f"Prometheus alert {state}" + (f": {said}" if said else "") + \
        (f" (thresholds: {source})" if source else "")
    since = alert.get("active_at")
    since = float(since) if isinstance(since, (int, float)) and math.isfinite(since) else now
    # activeAt is when the condition began (the alert went pending): the screen's
    # ``since``; it raised ``for:`` later (the rules API's ``duration``), as the screen's
    # raised is since + raise_after
    hold = alert.get("for_s")
    hold = float(hold) if isinstance(hold, (int, float)) and math.isfinite(hold) \
        and 0 <= hold <= 86400 * 365 else 0.0
    severity = _SEVERITY.get(str(labels.get("severity", "")), Severity.NOTICE)
    if state == "pending":   # not raised yet: worth knowing, not an action (doctor's exit)
        title = f"{title or code} (pending {severity.value})"
        severity = Severity.NOTICE
    return Finding(code, layer, severity, title or code,
                   (Evidence("prometheus.alert", make_labels(subject), number, None, "", "",
                             note),),
                   one_line(notes.get("remedy", ""), 300), since, make_labels(subject),
                   raised=None if state == "pending" else min(now, since + hold))


def findings_by_node(alerts: Any, now: float) -> dict[str, list[Finding]]:
    """node -> its alerts as findings, firing before pending, worst first (each alert
    names its node: the source found it as for any series)."""
    out: dict[str, list[Finding]] = {}
    for a in alerts if isinstance(alerts, (list, tuple)) else ():
        node = one_line(a.get("node", ""), 200) if isinstance(a, Mapping) else ""
        f = alert_finding(a, node, now) if node else None
        if f is not None:
            out.setdefault(node, []).append(f)
    for node, fs in out.items():
        fs = out[node] = _one_per_subject(fs)
        fs.sort(key=lambda f: (is_pending(f), not leads(f.code), -f.severity.rank, f.code))
    return out


def _one_per_subject(fs: list[Finding]) -> list[Finding]:
    """One finding per (code, subject), as the screen: the exported rules fire one alert
    per level (a critical MEM-001 fires with its warning; HW-006's core and HBM rules),
    so the highest firing severity stands for them; a pending alert only while none of
    its subject fires."""
    def key(f: Finding) -> tuple:
        return f.code, tuple((k, v) for k, v in f.subject if k != "alertstate")

    best: dict[tuple, Finding] = {}
    for f in fs:
        k = key(f)
        old = best.get(k)
        if old is None or (is_pending(old), -old.severity.rank) > (is_pending(f),
                                                                   -f.severity.rank):
            best[k] = f
    return list(best.values())
