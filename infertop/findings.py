"""What the diagnosis produces: Findings with their evidence, and the rule catalogue entries.

A Finding names a stable code (``HW-001``), the layer it belongs to, how bad it is, the
readings that prove it (each with the threshold it crossed), what to do about it, and when
the condition began.  Everything here is immutable and plain, so findings can be shown,
recorded and compared in tests; ``to_dict`` is the JSON shape of ``doctor --format json``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .keysym import Input, Key, as_inputs
from .model import Labels, Layer
from .units import fmt_value


class Severity(str, enum.Enum):
    """How bad a finding is; ordered NOTICE < WARN < CRIT (``max()`` gives the worst).

    NOTICE: worth knowing, no action needed now (does not change doctor's exit code).
    WARN: performance or reliability is degraded; act soon (exit code 1).
    CRIT: requests are failing or about to (exit code 2).
    """

    NOTICE = "notice"
    WARN = "warn"
    CRIT = "crit"

    @property
    def rank(self) -> int:
        return _RANK[self]

    # str-Enum compares as strings by default ("crit" < "notice"): order by rank instead
    def __lt__(self, other: object) -> bool:
        if isinstance(other, Severity):
            return self.rank < other.rank
        return NotImplemented

    def __le__(self, other: object) -> bool:
        if isinstance(other, Severity):
            return self.rank <= other.rank
        return NotImplemented

    def __gt__(self, other: object) -> bool:
        if isinstance(other, Severity):
            return self.rank > other.rank
        return NotImplemented

    def __ge__(self, other: object) -> bool:
        if isinstance(other, Severity):
            return self.rank >= other.rank
        return NotImplemented

    __hash__ = str.__hash__


_RANK = {Severity.NOTICE: 1, Severity.WARN: 2, Severity.CRIT: 3}


@dataclass(frozen=True, slots=True)
class Evidence:
    """One reading behind a finding: its value and the threshold it crossed.

    ``key``/``labels`` are the reading's own (so a pane can highlight that value); ``op`` is
    how value compares with ``threshold`` when the finding holds (">=", "<", "==", ...).
    ``threshold`` is None for context readings that explain rather than trigger (the
    cuda_graphs setting, the queue time).  ``value`` is text for INFO readings.
    """

    key: str
    labels: Labels
    value: float | str | None
    threshold: float | str | None
    op: str
    unit: str
    note: str = ""
    # "<" or ">" when value is only a bound (a quantile below a histogram's first bucket
    # bound or past its last finite one: qbound.py), "" for a measurement
    bound: str = ""

    def describe(self) -> str:
        """``gpu.util_ratio{gpu=0} 97 % >= 90 %`` (context readings without the comparison)."""
        text = f"{self.key}{_fmt_labels(self.labels)} {self.bound}{_fmt(self.value, self.unit)}"
        if self.threshold is not None and self.op:
            text += f" {self.op} {_fmt(self.threshold, self.unit)}"
        if self.note:
            text += f" ({self.note})"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "labels": dict(self.labels), "value": _json_num(self.value),
                "threshold": _json_num(self.threshold), "op": self.op, "unit": self.unit,
                "note": self.note, "bound": self.bound}


@dataclass(frozen=True, slots=True)
class Finding:
    """An active diagnosis: raised after its condition held ``raise_after`` seconds.

    ``since`` is the onset (when the condition began, not when it was raised); ``subject``
    the labels of what it is about (``(("gpu", "3"),)``; empty for the whole server).
    """

    code: str
    layer: Layer
    severity: Severity
    title: str
    evidence: tuple[Evidence, ...]
    remedy: str
    since: float
    subject: Labels = ()
    caused_by: tuple[str, ...] = ()   # codes of active findings in other layers that explain it
    # when it was raised (``since`` plus the raise delay): every view shows both, labelled
    # alike ("since 00:00:26, raised 00:00:29"), so no two views seem to disagree
    raised: float | None = None

    def summary(self) -> str:
        first = self.evidence[0].describe() if self.evidence else ""
        return f"{self.code} {self.title}" + (f": {first}" if first else "")

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "layer": self.layer.value, "severity": self.severity.value,
                "title": self.title, "evidence": [e.to_dict() for e in self.evidence],
                "remedy": self.remedy, "since": self.since, "raised": self.raised,
                "subject": dict(self.subject), "caused_by": list(self.caused_by)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Finding:
        from .model import make_labels
        ev = tuple(Evidence(str(e["key"]), make_labels(e.get("labels") or {}), e.get("value"),
                            e.get("threshold"), str(e.get("op", "")), str(e.get("unit", "")),
                            str(e.get("note", "")), _bound_side(e.get("bound")))
                   for e in d.get("evidence", ()))
        return cls(str(d["code"]), Layer(d["layer"]), Severity(d["severity"]), str(d["title"]),
                   ev, str(d.get("remedy", "")), float(d["since"]),
                   make_labels(d.get("subject") or {}),
                   tuple(str(c) for c in d.get("caused_by") or ()),
                   float(d["raised"]) if isinstance(d.get("raised"), (int, float)) else None)


@dataclass(frozen=True, slots=True)
class FindingEvent:
    """A raise or a clear, for the findings screen's log and recordings."""

    time: float
    code: str
    subject: Labels
    kind: str            # "raised" | "escalated" (severity rose while raised) | "cleared"
    severity: Severity
    summary: str
    since: float | None = None   # a raise: when its condition began (the finding's since)

    def to_dict(self) -> dict[str, Any]:
        return {"time": self.time, "code": self.code, "subject": dict(self.subject),
                "kind": self.kind, "severity": self.severity.value, "summary": self.summary,
                "since": self.since}


@dataclass
class RuleSpec:
    """A catalogue entry: what a rule detects, what it reads, its thresholds and remedy.

    ``inputs`` are required (all of them), ``optional`` sharpen the finding when present:
    key symbols (``K.gpu.util_ratio``, infertop/key_symbols.py), ``any_of(K.a, K.b)`` for
    either, ``K.server.setting.where(name="dtype")`` for a reading with that label
    (infertop/keysym.py).  Both are ``Input`` objects once constructed, their keys checked
    against keys.py's SPECS; text (``"a|b{name=value}"``) is still read, deprecated.
    ``thresholds`` maps config keys (``thresholds.busy_util_ratio``) to their values.
    ``raise_after``/``clear_after`` override the global timing for this rule (None: global).
    ``supersedes``: codes this rule explains; while it holds, those stay quiet for the same
    subject (the cause is shown, not the symptom).
    """

    code: str
    layer: Layer
    title: str
    detects: str
    inputs: tuple[Key | Input, ...]
    thresholds: dict[str, Any]
    remedy: str
    optional: tuple[Key | Input, ...] = ()
    raise_after: float | None = None
    clear_after: float | None = None
    supersedes: tuple[str, ...] = ()
    notes: str = ""
    judged: str = ""   # the statistic and window it compares ("median over judge_window")

    def __post_init__(self) -> None:
        # at load: every key declared (a ValueError names the one that is not), the
        # deprecated text form parsed once; readers see Inputs only
        self.inputs = as_inputs(self.inputs)
        self.optional = as_inputs(self.optional)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "layer": self.layer.value, "title": self.title,
                "detects": self.detects, "inputs": [str(i) for i in self.inputs],
                "optional": [str(i) for i in self.optional],
                "thresholds": dict(self.thresholds),
                "remedy": self.remedy, "raise_after": self.raise_after,
                "clear_after": self.clear_after, "supersedes": list(self.supersedes),
                "notes": self.notes, "judged": self.judged}


# Findings that lead every list of findings while they last, whatever else is raised: a
# server that does not answer (DEC-006) or a node whose scrape fails (FLT-003) is the
# headline of an incident (nothing else about it is known, and a throttle finding beside
# it is a footnote).  Issue 31: the strip led with a GPU throttle for a 2.6 min outage.
LEADS = frozenset({"DEC-006", "FLT-003"})


def leads(code: str) -> bool:
    return code in LEADS


def order_key(f: Finding) -> tuple:
    """How every list of findings is ordered: a dead server first (``LEADS``), then the
    worst severity, the layer's position, the code and the subject."""
    return (not leads(f.code), -f.severity.rank, f.layer.position, f.code, f.subject)


def worst(findings) -> Severity | None:
    sevs = [f.severity for f in findings]
    return max(sevs) if sevs else None


def _fmt_labels(labels: Labels) -> str:
    return "{" + ",".join(f"{k}={v}" for k, v in labels) + "}" if labels else ""


def _fmt(v: float | str | None, unit: str) -> str:
    if isinstance(v, str):
        return v
    return fmt_value(v, unit)


def _bound_side(v: Any) -> str:
    return v if v in ("<", ">") else ""


def _json_num(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("+Inf" if v > 0 else "-Inf")
    return v


__all__ = ["Severity", "Evidence", "Finding", "FindingEvent", "RuleSpec", "worst"]
