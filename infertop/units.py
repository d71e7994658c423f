"""Human formatting of values by unit, and text sparklines (pure, shared by TUI and reports)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

from . import qbound
from .model import Reading, Status


def natural_key(s: str) -> tuple[int, int, str]:
    """Order label values a person expects: "2" before "10", numbers before names (GPU
    indices, engine ids, PIDs are label strings)."""
    return (0, int(s), "") if s.isdigit() else (1, 0, s)

_BLOCKS = "▁▂▃▄▅▆▇█"


def fmt_bytes(v: float) -> str:
    for unit, div in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(v) >= div:
            return f"{v / div:.1f} {unit}"
    return f"{v:.0f} B"


def fmt_seconds(v: float) -> str:
    if v >= 2 * 86400:   # an uptime of 8043.3 h says less than "335.1 d"
        return f"{v / 86400:.1f} d"
    if v >= 3600:
        return f"{v / 3600:.1f} h"
    if v >= 60:
        return f"{v / 60:.1f} min"
    if v >= 1:
        return f"{v:.2f} s"
    if v >= 1e-3:
        return f"{v * 1e3:.0f} ms" if v >= 0.01 else f"{v * 1e3:.1f} ms"
    return f"{v * 1e6:.0f} µs"


def fmt_si(v: float, unit: str) -> str:
    for prefix, div in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= div:
            return f"{v / div:.1f} {prefix}{unit}"
    return f"{v:.0f} {unit}" if abs(v) >= 10 or v == 0 else f"{v:.2f} {unit}"


# the unit of evidence that is a moment (unix seconds) rather than a duration
UNIX_TIME = "unix_s"

# Beyond this magnitude a fixed-point format prints hundreds of digits (a counter at
# 1.7e308 is 309 of them) and ``round`` of an overflowed product raises: such values are
# shown in scientific notation with their unit, as the server sent them.
HUGE = 1e15


def fmt_count(v: float | None) -> str:
    """A count in running text: ``12``; past 1e15 (a page's 1e308) ``1.7e+308``, never
    the 309 digits ``f"{v:.0f}"`` writes (issue 36, case 13)."""
    if v is None:
        return "–"
    if not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return f"{v:.0f}" if abs(v) < 1e15 else f"{v:.3g}"


def fmt_value(value: float | None, unit: str) -> str:
    """One reading's value as a person reads it: 73 %, 1.2 GiB, 41 ms, 1.4 GHz.
    Never raises and never prints more than a few digits: NaN, ``inf``/``-inf`` and
    magnitudes past ``HUGE`` (``1.7e+308``) are shown as such."""
    if value is None:
        return "–"
    if not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if abs(value) >= HUGE:
        return f"{value:.3g} {unit}".rstrip()
    if unit == "ratio":
        return f"{value * 100:.0f} %"
    if unit == "bytes":
        return fmt_bytes(value)
    if unit == "bytes/s":
        return fmt_bytes(value) + "/s"
    if unit == "s":
        return fmt_seconds(value)
    if unit == UNIX_TIME:   # a moment, not a length: a process start time
        if not math.isfinite(value) or not 0 <= value < 1e11:
            return f"{value:g}"
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))
    if unit == "Hz":
        return fmt_si(value, "Hz")
    if unit == "W":
        return f"{value:.0f} W"
    if unit == "celsius":
        return f"{value:.0f} °C"
    if unit == "cores":
        return f"{value * 100:.0f} %"  # top's convention: 100 % = one core
    if unit == "FLOP/s":
        return fmt_si(value, unit)
    if unit in ("tokens/s", "1/s", "blocks/s"):
        return fmt_si(value, unit.replace("1/s", "/s"))
    if unit in ("count", "tokens", "lanes", "blocks", ""):
        return f"{value:.0f}" if abs(value - round(value)) < 1e-9 else f"{value:.1f}"
    return f"{value:g} {unit}"


def fmt_reading(r: Reading | None) -> str:
    """Value text, or why there is none: n/a (unsupported), err, stale marker, no data."""
    if r is None:
        return "–"
    if r.status is Status.UNSUPPORTED:
        return "n/a"
    if r.status is Status.ERROR:
        return "err"
    if r.status is Status.NODATA or r.value is None:
        return "–"
    bound = qbound.of(r.reason)
    if bound is not None:
        # a quantile that only a bucket bound limits: say "<300 ms", not a made-up 297 ms
        text = bound[0] + fmt_value(bound[1], r.unit)
    elif r.text is not None and r.unit == "":
        text = r.text
    else:
        text = fmt_value(r.value, r.unit)
    return text + ("*" if r.status is Status.STALE else "")


def sparkline(values: Sequence[float], width: int = 20, lo: float | None = None,
              hi: float | None = None) -> str:
    """The last ``width`` values as block characters; fixed lo/hi keep ratios comparable."""
    # ±inf is left out like NaN: inf - inf is NaN and int(NaN) crashed the live screen
    # (issue 36, case 3); halves keep 1.7e308 - (-1.7e308) from overflowing to inf
    vals = [v for v in values[-width:] if v is not None and math.isfinite(v)]
    if not vals:
        return ""
    lo = min(vals) if lo is None or not math.isfinite(lo) else lo
    hi = max(vals) if hi is None or not math.isfinite(hi) else hi
    span = hi / 2 - lo / 2
    if not span > 0:
        return _BLOCKS[0 if hi <= 0 else 3] * len(vals)
    out = []
    for v in vals:
        i = int((min(max(v, lo), hi) / 2 - lo / 2) / span * (len(_BLOCKS) - 1) + 0.5)
        out.append(_BLOCKS[i])
    return "".join(out)


def bar(ratio: float | None, width: int = 10) -> str:
    """A horizontal meter, like htop's: ███████░░░."""
    if ratio is None or math.isnan(ratio):
        return "·" * width
    n = int(round(max(0.0, min(1.0, ratio)) * width))
    return "█" * n + "░" * (width - n)
