"""What ``promtool test rules`` must find on a recording: infertop's own verdicts on it.

``infertop rules promtool-input`` writes a recording as promtool ``input_series``
(``promtool_input``); a test file with no expectations prints SUCCESS for any rules and
any recording.  This module plays the same snapshots through infertop's own Pipeline and
Diagnoser (what ``doctor`` raises, and when) and writes the expectations both engines
must agree on, as ``promql_expr_test`` entries over Prometheus's ``ALERTS`` series:

* at the end of the run, the exported codes that fired at all, each in its layer, are
  exactly those infertop raised (nothing else fires; a healthy recording fires none);
* each of them fired by infertop's raise time plus the rule's ``for:`` plus one
  evaluation interval and one scrape (``SLACK_STEPS``), and not long before it;
* the worst severity: its alert fired, and no alert of the code at a higher severity.

Not ``alert_rule_test``: promtool compares an alert's every label and annotation exactly,
and the annotations hold ``$value``; ``ALERTS`` grouped by the labels that matter asserts
the code, layer, severity and time without restating them.

Disagreements that are inherent (inputs Prometheus cannot have) are in ``INHERENT`` and
``LATER_IN_PROMETHEUS`` with the reason (docs/alerts.md lists them too).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .config import DiagnosisConfig
from .findings import Severity
from .model import Snapshot
from .pipeline import Pipeline
from .promrules import SEVERITY_LABEL, Export, build
from .rules.engine import Diagnoser
from .rules.registry import all_rules

# Findings infertop raises from inputs Prometheus never has, though their code is exported
# for the inputs it does have.  (SCH-002 without GPU readings was one: it judged the cap
# setting from the command line; since issue 32 both engines judge the cap from the page,
# the running batch pinned at its maximum while requests wait.)
INHERENT: dict[str, str] = {}
# findings the screen may raise earlier than Prometheus can, for a documented reason: the
# export still fires within the run (docs/alerts.md)
LATER_IN_PROMETHEUS: dict[str, str] = {
    "MEM-003": "the screen also raises usage beyond the server's own reservation "
               "(gpu_memory_utilization), which Prometheus cannot tie to a GPU; the export "
               "raises on steady growth or on a card near full",
}
# raise times agree within one evaluation interval plus one scrape (steps of the grid)
SLACK_STEPS = 2


@dataclass(frozen=True)
class Episode:
    code: str
    layer: str
    first: float        # seconds after the first snapshot that the finding was first active
    worst: Severity     # the worst severity it reached in the run


def episodes(snaps: Iterable[Snapshot], config: DiagnosisConfig | None = None
             ) -> tuple[dict[str, Episode], float, float]:
    """Each code infertop's own diagnosis raised (first time, worst severity), the first
    snapshot's time and the run's length in seconds.  Streams: one snapshot at a time."""
    pipeline = Pipeline(Diagnoser(config, fleet=False))
    first: dict[str, tuple[str, float]] = {}
    worst: dict[str, Severity] = {}
    t0 = t1 = None
    for snap in snaps:
        t0 = snap.time if t0 is None else t0
        t1 = snap.time
        for f in pipeline.feed(snap).findings:
            if f.code not in first:
                first[f.code] = (f.layer.value, snap.time - t0)
            if f.code not in worst or f.severity > worst[f.code]:
                worst[f.code] = f.severity
    out = {c: Episode(c, layer, at, worst[c]) for c, (layer, at) in first.items()}
    start = t0 if t0 is not None else 0.0
    return out, start, (t1 - start) if t1 is not None else 0.0


def fired_expr(window_s: int, code: str = "", unless: tuple[str, ...] = (),
               severity: str = "", by: str = "alertname, layer") -> str:
    sel = 'alertstate="firing"' + (f', alertname="{code}"' if code else "")
    if severity:
        sel += f', severity=~"{severity}"'
    if unless:
        sel += f', alertname!~"{"|".join(sorted(unless))}"'
    return f"group by ({by}) (max_over_time(ALERTS{{{sel}}}[{max(1, window_s)}s]))"


def expr_test(expr: str, at: int, samples: list[dict[str, str]]) -> str:
    lines = [f"      - expr: '{expr}'", f"        eval_time: {at}s"]
    if not samples:
        return "\n".join(lines + ["        exp_samples: []"])
    lines.append("        exp_samples:")
    for labels in samples:
        text = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        lines += [f"          - labels: '{{{text}}}'", "            value: 1"]
    return "\n".join(lines)


@dataclass
class Expectations:
    tests: list[str]                  # promql_expr_test entries (YAML at six spaces)
    expected: dict[str, Episode]      # the exported codes both engines must raise
    skipped: dict[str, str]           # code -> why it is not expected in Prometheus
    judged: bool                      # the run is long enough for the rules to judge

    def yaml(self) -> str:
        return "    promql_expr_test:\n" + "\n".join(self.tests) + "\n" if self.tests else ""


def expectations(snaps: Iterable[Snapshot], interval: float, steps: int,
                 has_gpu: bool, config: DiagnosisConfig | None = None,
                 export: Export | None = None) -> Expectations:
    """The assertions for a run converted on a grid of ``steps`` x ``interval`` s.
    ``has_gpu``: the converted series hold DCGM fields (else GPU-only findings are
    inherent).  An empty ``tests`` means nothing can be asserted (``judged`` False: the
    run is shorter than the rules need to judge)."""
    cfg = config or DiagnosisConfig()
    export = export or build(cfg)
    eps, _start, length = episodes(snaps, cfg)
    alerted = {a.code for a in export.alerts}
    hold = {a.code: a.for_s for a in export.alerts}
    levels: dict[str, set[Severity]] = {}
    for a in export.alerts:
        levels.setdefault(a.code, set()).add(a.severity)
    specs = {r.code: r.spec for r in all_rules()}
    skipped = {c: INHERENT[c] for c in eps if c in alerted and c in INHERENT and not has_gpu}
    expect = {c: e for c, e in eps.items() if c in alerted and c not in skipped}
    # a symptom the screen files under a cause Prometheus cannot judge (HW-001 under
    # launch-bound KRN-001): the cause is not exported, so the symptom may fire there
    victims = tuple(sorted({v for c in eps if c not in alerted
                            for v in specs[c].supersedes if v in alerted and v not in expect}))
    for v in victims:
        skipped[v] = "its cause on the screen is not exported (supersedes)"
    judged = length >= Diagnoser(cfg).judge_after()
    end = steps - 1
    if end < 1 or not judged:
        return Expectations([], expect, skipped, False)
    step = interval or 1.0

    def at(seconds: float) -> int:     # an eval time, in promtool's seconds from step 0
        return int(round(seconds))

    end_s = at(end * step)
    tests = [expr_test(fired_expr(end_s, unless=victims), end_s,
                       [{"alertname": c, "layer": e.layer} for c, e in sorted(expect.items())])]
    for code, e in sorted(expect.items()):
        slack = SLACK_STEPS * step
        by = end_s if code in LATER_IN_PROMETHEUS else \
            min(end_s, at(e.first + hold[code] + slack + 0.5 * step))
        tests.append(expr_test(fired_expr(by, code), by,
                               [{"alertname": code, "layer": e.layer}]))
        early = int(e.first) - int(hold[code]) - 10
        if early > 0:   # not long before infertop raised it: the same episode
            tests.append(expr_test(fired_expr(early, code), early, []))
        # the worst severity: fired, and no level above it
        sev = e.worst if e.worst in levels.get(code, ()) else max(
            (s for s in levels.get(code, ()) if s <= e.worst), default=None)
        if sev is None:
            continue
        tests.append(expr_test(fired_expr(end_s, code, severity=SEVERITY_LABEL[sev],
                                          by="alertname, severity"), end_s,
                               [{"alertname": code, "severity": SEVERITY_LABEL[sev]}]))
        above = [SEVERITY_LABEL[s] for s in levels.get(code, ()) if s > sev]
        if above:
            tests.append(expr_test(fired_expr(end_s, code, severity="|".join(sorted(above)),
                                              by="alertname, severity"), end_s, []))
    return Expectations(tests, expect, skipped, True)
