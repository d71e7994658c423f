"""How a finding's evidence reads in a few words, and which reading it is *about*.

Domain logic shared by every view of findings: the panes tag the reading a finding is
about (``subject_evidence``) and give a subject they have no column for a line of its own
(``short_evidence``); ``CODE_RE`` finds a finding's code drawn beside a value.
"""

from __future__ import annotations

import re
import statistics

from .findings import Evidence, Finding

CODE_RE = re.compile(r"\b[A-Z]{2,5}-\d{3}\b")   # a finding code drawn beside a reading


def subject_evidence(f: Finding) -> list[Evidence]:
    """The evidence a finding is about (see ``PaneContext.subjects``).

    A triggering reading (one with a threshold) is its own subject, unless it aggregates a
    group (a label such as ``gpus=0,1,2,3``): then the group member among the context
    readings that is farthest from the members' median is.  A finding with only context
    readings is about all of them."""
    trig = [e for e in f.evidence if e.threshold is not None]
    if not trig:
        return list(f.evidence)
    out: list[Evidence] = []
    for e in trig:
        if not any("," in v for _, v in e.labels):
            out.append(e)
            continue
        members = [(float(c.value), c) for c in f.evidence if c.threshold is None
                   and c.key == e.key and isinstance(c.value, (int, float))]
        if len(members) < 2:
            out.append(e)
            continue
        median = statistics.median(v for v, _ in members)
        out.append(max(members, key=lambda m: abs(m[0] - median))[1])
    return out


_SUFFIXES = ("_bytes_per_second", "_per_second", "_ratio", "_seconds", "_bytes", "_total",
             "_celsius", "_watts", "_hz")
_NAMESPACE_SHOWN = {"kv": "KV"}
_WHO = {"gpu": "GPU {}", "engine": "e{}", "pid": "pid {}", "gpus": "GPUs {}"}


def short_evidence(ev: Evidence, compare: bool = True) -> str:
    """'GPU 0 pcie rx 52.3 GiB/s >= 46.9 GiB/s': who, what, how much, against what; short
    enough for a 36-column pane (the full form is on the findings screen, `f`)."""
    who = " ".join(_WHO[k].format(v) for k, v in ev.labels if k in _WHO)
    ns, _, name = ev.key.partition(".")
    if ns in _NAMESPACE_SHOWN:   # "usage" alone says nothing: "KV usage"
        name = f"{_NAMESPACE_SHOWN[ns]}_{name}"
    for suf in _SUFFIXES:
        if name.endswith(suf):
            name = name[: -len(suf)]
            break
    plain = Evidence(ev.key, (), ev.value, ev.threshold if compare else None, ev.op,
                     ev.unit, bound=ev.bound).describe()
    return " ".join(x for x in (who, name.replace("_", " "), plain[len(ev.key) + 1:]) if x)
