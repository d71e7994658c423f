"""Numbers and regex literals written into PromQL and promtool's text.

One place for both: the exported rules (promrules.py), their promtool test input
(promtool_input.py) and the fleet's Prometheus queries (probes/prometheus/) write them.
"""

from __future__ import annotations

_RE2_SPECIAL = frozenset(".+*?()[]{}|^$\\")


def re_literal(text: str) -> str:
    """``text`` matched literally inside an RE2 regex (PromQL's ``=~``)."""
    return "".join("\\" + c if c in _RE2_SPECIAL else c for c in text)


def number(v: float, *, exact: bool = False) -> str:
    """``v`` as PromQL and promtool read it: an integer without ".0" (below 1e15, where a
    float still holds every integer), else 12 significant digits (a threshold: 0.7 * 0.8
    is 0.56, not 0.5599999999999999), or with ``exact`` every digit (a recorded value
    replayed as it was)."""
    v = float(v)
    if v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return repr(v) if exact else f"{v:.12g}"
