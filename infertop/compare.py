"""Before/after: which readings moved beyond their noise, which findings came or went, and
which settings differ between two recordings (pure; ``infertop compare`` prints it).

A reading moved when (1) its median changed by at least ``min_rel`` of the larger median
(and by more than a unit's floor, so 0.1 % -> 0.3 % of a ratio is not news), and (2) a
95 % bootstrap interval of (median after - median before) excludes 0.  The bootstrap
resamples *blocks* of consecutive ticks (circular block bootstrap, block length twice
the decorrelation time estimated from the lag-1 autocorrelation): readings one second
apart are far from independent (a windowed rate changes slowly), and resampling single
ticks makes every interval too narrow.  Even so, a short recording of a slowly wandering
reading holds few independent values: the interval is then wider, never exact, which is
why the relative floor (1) stays.  Seeded, so the same two files give the same answer.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from statistics import median  # the tree's one median (windowstat.median says why)
from typing import Any

from .keys import SPECS
from .model import LAYERS, Labels
from .runsummary import RunSummary, SeriesId
from .textclean import one_line
from .units import fmt_value

MIN_POINTS = 5
# readings that differ between any two runs by nature, not because of a change
RUN_SPECIFIC = frozenset({"server.uptime_seconds", "server.process_start_seconds"})
# below these absolute changes a move is not worth a line, whatever the statistics say
ABS_FLOOR = {"ratio": 0.005, "cores": 0.02}


@dataclass(frozen=True)
class Moved:
    key: str
    labels: Labels
    unit: str
    layer: str
    n_before: int
    n_after: int
    before: float            # medians
    after: float
    low: float               # interval of (after - before)
    high: float
    # "<"/">" when that side's median is only a bound (a quantile below a histogram's first
    # bucket bound: qbound.py); the change from or to a bound has no size
    before_bound: str = ""
    after_bound: str = ""

    @property
    def bounded(self) -> bool:
        return bool(self.before_bound or self.after_bound)

    @property
    def delta(self) -> float:
        return self.after - self.before

    @property
    def rel(self) -> float | None:
        if self.bounded:
            return None
        return self.delta / abs(self.before) if self.before else None

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "labels": dict(self.labels), "unit": self.unit,
                "layer": self.layer, "before": self.before, "after": self.after,
                "before_bound": self.before_bound, "after_bound": self.after_bound,
                "delta": None if self.bounded else self.delta, "relative": self.rel,
                "interval": None if self.bounded else [self.low, self.high],
                "n_before": self.n_before, "n_after": self.n_after}


@dataclass
class Comparison:
    moved: list[Moved] = field(default_factory=list)
    steady: int = 0                   # compared, did not move
    too_few: int = 0                  # fewer than MIN_POINTS on a side
    only_before: list[SeriesId] = field(default_factory=list)
    only_after: list[SeriesId] = field(default_factory=list)
    appeared: list[dict] = field(default_factory=list)     # findings
    vanished: list[dict] = field(default_factory=list)
    persisted: list[dict] = field(default_factory=list)
    settings: list[tuple[str, str | None, str | None]] = field(default_factory=list)
    # every reading key compared (on both sides with enough points): what "steady" covers
    compared: set[str] = field(default_factory=set)
    before: dict[str, Any] = field(default_factory=dict)   # run facts
    after: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"before": self.before, "after": self.after, "params": self.params,
                "moved": [m.to_dict() for m in self.moved], "steady": self.steady,
                "compared_keys": sorted(self.compared),
                "too_few_points": self.too_few,
                "only_before": [_sid_text(s) for s in self.only_before],
                "only_after": [_sid_text(s) for s in self.only_after],
                "findings": {"appeared": self.appeared, "vanished": self.vanished,
                             "persisted": self.persisted},
                "settings": [{"name": n, "before": b, "after": a} for n, b, a in self.settings]}


def block_length(xs: list[float]) -> int:
    """Ticks per bootstrap block: about twice the series' decorrelation time, from its
    lag-1 autocorrelation r (an AR(1) forgets in -1/ln r ticks), at most a third of it."""
    n = len(xs)
    if n < 3:
        return 1
    m = sum(xs) / n
    var = sum((x - m) ** 2 for x in xs)
    if not 0 < var < math.inf:   # constant, or values near 1e308 whose squares overflow
        return 1
    r = sum((xs[i] - m) * (xs[i + 1] - m) for i in range(n - 1)) / var
    cap = max(1, n // 3)
    if not r > 0:                # NaN too (inf - inf): no autocorrelation to go on
        return 1
    if r >= 0.999:
        return cap
    return int(min(max(1, math.ceil(-2 / math.log(r))), cap))


def block_medians(xs: list[float], rng: random.Random, resamples: int,
                  block: int | None = None) -> list[float]:
    """Medians of circular block-bootstrap resamples of ``xs`` (same length); blocks of
    ``block`` ticks (default ``block_length(xs)``; 1 is the plain iid bootstrap)."""
    n = len(xs)
    block = max(1, block_length(xs) if block is None else block)
    ring = xs + xs[:block]
    nblocks = -(-n // block)
    out = []
    for _ in range(resamples):
        sample: list[float] = []
        for start in rng.choices(range(n), k=nblocks):
            sample += ring[start:start + block]
        out.append(median(sample[:n]))
    return out


def interval(before: list[float], after: list[float], *, resamples: int, seed: int,
             confidence: float = 0.95, block: int | None = None) -> tuple[float, float]:
    rng = random.Random(seed)
    if block is None:   # one length for both sides: the slower-forgetting one
        block = max(block_length(before), block_length(after))
    mb = block_medians(before, rng, resamples, block)
    ma = block_medians(after, rng, resamples, block)
    diffs = sorted(a - b for a, b in zip(ma, mb))
    lo_i = int((1 - confidence) / 2 * (len(diffs) - 1))
    hi_i = int(math.ceil((1 + confidence) / 2 * (len(diffs) - 1)))
    return diffs[lo_i], diffs[hi_i]


def _layer(key: str) -> str:
    spec = SPECS.get(key)
    return spec.layers[0].value if spec else "other"


def _sid_text(sid: SeriesId) -> str:
    key, labels = sid
    return key + ("{" + ",".join(f"{k}={v}" for k, v in labels) + "}" if labels else "")


def _finding_dict(code: str, subject: Labels, title: str, when: float | None,
                  start: float) -> dict:
    return {"code": code, "subject": dict(subject), "title": title,
            "first_raised_after_s": None if when is None else round(when - start, 1)}


def compare(before: RunSummary, after: RunSummary, *, min_rel: float = 0.05,
            resamples: int = 400, seed: int = 0, confidence: float = 0.95,
            loaded_only: bool = True) -> Comparison:
    """``loaded_only``: compare only ticks with requests in flight, when both recordings
    have some (an idle warm-up would otherwise dominate a median)."""
    loaded_only = loaded_only and bool(before.loaded) and bool(after.loaded)
    c = Comparison(params={"min_relative_change": min_rel, "resamples": resamples,
                           "confidence": confidence, "seed": seed,
                           "block": "circular, 2x decorrelation time",
                           "ticks": "ticks with requests in flight" if loaded_only
                           else "all ticks"})
    for side, run in (("before", before), ("after", after)):
        setattr(c, side, {"ticks": run.ticks, "loaded_ticks": len(run.loaded),
                          "duration_s": round(run.duration, 1), "start": run.start,
                          **run.meta})
    keys_b, keys_a = set(before.series), set(after.series)
    c.only_before = sorted(keys_b - keys_a)
    c.only_after = sorted(keys_a - keys_b)
    for i, sid in enumerate(sorted(keys_b & keys_a)):
        if sid[0] in RUN_SPECIFIC:
            continue
        xb, xa = before.values(sid, loaded_only), after.values(sid, loaded_only)
        if len(xb) < MIN_POINTS or len(xa) < MIN_POINTS:
            c.too_few += 1
            continue
        c.compared.add(sid[0])
        mb, ma = median(xb), median(xa)
        unit = after.units.get(sid[0]) or before.units.get(sid[0], "")
        scale = max(abs(mb), abs(ma))
        d = ma - mb
        if scale == 0 or abs(d) < min_rel * scale or abs(d) < ABS_FLOOR.get(unit, 0.0):
            c.steady += 1
            continue
        lo, hi = interval(xb, xa, resamples=resamples, seed=seed + i, confidence=confidence)
        if lo <= 0 <= hi:
            c.steady += 1
            continue
        c.moved.append(Moved(sid[0], sid[1], unit, _layer(sid[0]), len(xb), len(xa), mb, ma,
                             lo, hi, before.bound_side(sid, loaded_only),
                             after.bound_side(sid, loaded_only)))
    order = {layer.value: i for i, layer in enumerate(LAYERS)}
    c.moved.sort(key=lambda m: (order.get(m.layer, 99), -abs(m.rel if m.rel is not None
                                                            else math.inf), m.key))
    rb, ra = before.raised(), after.raised()
    titles = {**{k: f.title for k, f in before.findings.items()},
              **{k: f.title for k, f in after.findings.items()}}
    def ordered(keys: set) -> list:   # cause before symptom, as every list says it
        from .rules.engine import cause_first
        return cause_first(sorted(keys), lambda k: k)

    for k in ordered(set(ra) - set(rb)):
        c.appeared.append(_finding_dict(k[0], k[1], titles.get(k, ra[k].summary), ra[k].time,
                                        after.start))
    for k in ordered(set(rb) - set(ra)):
        c.vanished.append(_finding_dict(k[0], k[1], titles.get(k, rb[k].summary), rb[k].time,
                                        before.start))
    for k in ordered(set(rb) & set(ra)):
        c.persisted.append(_finding_dict(k[0], k[1], titles.get(k, ra[k].summary), ra[k].time,
                                         after.start))
    for name in sorted(set(before.settings) | set(after.settings)):
        b, a = before.settings.get(name), after.settings.get(name)
        if b != a:
            c.settings.append((name, b, a))
    return c


# ---- output -------------------------------------------------------------------------------
def _fmt(v: float, unit: str) -> str:
    return fmt_value(v, unit)


def _signed(m: Moved) -> str:
    if m.bounded:   # "<300 ms -> 3.75 s" has a direction, not a size
        word = "up" if m.delta >= 0 else "down"
        side, v = (m.before_bound, m.before) if m.before_bound else (m.after_bound, m.after)
        return f"{word} {'from' if m.before_bound else 'to'} {side}{_fmt(v, m.unit)} " \
               "(a bucket bound, not measured)"
    sign = "+" if m.delta >= 0 else "-"
    text = f"{sign}{_fmt(abs(m.delta), m.unit)}"
    if m.rel is not None:
        text += f" ({m.rel * 100:+.0f} %)"
    return text


def printable(text: str, limit: int = 200) -> str:
    """Text from a recording made safe for a terminal, one line (textclean.one_line)."""
    return one_line(text, limit)


def render_text(c: Comparison, clean=printable) -> str:
    """``clean`` sanitises text that came from the recordings (names, settings)."""
    lines = ["infertop compare"]
    for side in ("before", "after"):
        r = getattr(c, side)
        lines.append(f"  {side:6}  {clean(str(r.get('file', '')))}  {r.get('ticks', 0)} ticks "
                     f"({r.get('loaded_ticks', 0)} with requests in flight), "
                     f"{r.get('duration_s', 0):.0f} s"
                     + (f", rates and quantiles over {r['window_s']:g} s windows"
                        if isinstance(r.get("window_s"), (int, float)) else ""))
        # lines left out (corrupt, a meta of the wrong type): said, as report and doctor do
        lines += [f"          note: {clean(str(n))}" for n in r.get("notes") or ()]
    lines.append("")
    lines.append("SETTINGS THAT DIFFER")
    if not c.settings:
        lines.append("  none")
    for name, b, a in c.settings:
        lines.append(f"  {clean(name)}: {clean(b) if b is not None else '(not set)'} -> "
                     f"{clean(a) if a is not None else '(not set)'}")
    lines.append("")
    lines.append("FINDINGS")
    for word, items in (("appeared", c.appeared), ("vanished", c.vanished),
                        ("persisted", c.persisted)):
        for f in items:
            subj = " ".join(f"{k}={v}" for k, v in f["subject"].items())
            lines.append(f"  {word:9} {f['code']} {clean(f['title'])}"
                         + (f" [{clean(subj)}]" if subj else ""))
    if not (c.appeared or c.vanished or c.persisted):
        lines.append("  none in either recording")
    lines.append("")
    lines.append(f"READINGS THAT MOVED (medians over {c.params['ticks']}, "
                 f"{int(c.params['confidence'] * 100)} % block-bootstrap interval of the "
                 f"change excludes 0, change >= {c.params['min_relative_change']:.0%})")
    layer = None
    # columns as wide as their widest cell (a name wider than 58 pushed its row's values
    # right of the others'); a name past NAME_MAX goes on its own line above its values
    rows = [(m, clean(_sid_text((m.key, m.labels))), m.before_bound + _fmt(m.before, m.unit),
             m.after_bound + _fmt(m.after, m.unit)) for m in c.moved]
    wn = min(NAME_MAX, max((len(n) for _, n, _, _ in rows), default=0))
    wb = max((len(b) for _, _, b, _ in rows), default=0)
    wa = max((len(a) for _, _, _, a in rows), default=0)
    for m, name, before, after in rows:
        if m.layer != layer:
            layer = m.layer
            lines.append(f"  {layer.upper()}")
        if len(name) > wn:
            lines.append(f"    {name}")
            name = ""
        lines.append(f"    {name:<{wn}}  {before:>{wb}} -> {after:<{wa}}  {_signed(m)}")
    if not c.moved:
        lines.append("  none")
    lines.append(f"  ({c.steady} readings steady, {c.too_few} with too few points, "
                 f"{len(c.only_before)} only before, {len(c.only_after)} only after)")
    return "\n".join(lines) + "\n"


NAME_MAX = 80     # a longer name takes a line of its own


def regressions(c: Comparison) -> list[str]:
    """What got worse from before to after, for ``compare --fail-on-regression``: a
    finding that appeared, a latency that went up, a throughput that went down, an error
    or refusal share that went up (each a reading the comparison found moved)."""
    out = [f"{f['code']} appeared" for f in c.appeared]
    for m in c.moved:
        worse = (m.key.startswith("latency.") and m.key.endswith("_seconds") and m.delta > 0
                 or m.key.startswith("throughput.") and m.delta < 0
                 or m.key in ("server.error_ratio", "server.rejection_ratio") and m.delta > 0)
        if worse:
            out.append(f"{_sid_text((m.key, m.labels))} {_signed(m)}")
    return out


def render_json(c: Comparison) -> str:
    return json.dumps(_json_numbers(c.to_dict()), indent=2, default=str, allow_nan=False) + "\n"


# JSON has no infinity: a change between medians at the float limits (-1.7e308 -> 1.7e308)
# is -inf/+inf and crashed the writer (issue 36, case 12); written as Prometheus' own API
# spells non-finite numbers, so the overflow is kept rather than turned into "no value"
_NON_FINITE = {math.inf: "+Inf", -math.inf: "-Inf"}


def _json_numbers(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return _NON_FINITE.get(v, "NaN")
    if isinstance(v, dict):
        return {k: _json_numbers(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_numbers(x) for x in v]
    return v
