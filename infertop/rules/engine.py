"""The Diagnoser: runs every rule each tick and turns conditions into trusted Findings.

Rules say what holds *now*; this module decides what the on-call engineer sees:

* **hysteresis**: a condition must hold ``raise_after`` seconds (default 5; 3 for rules
  that judge a window's median) without a break before its finding raises, and be absent
  ``clear_after`` seconds (default 10) before it clears.  While raised, the rule's
  thresholds relax by ``hold_margin`` (``Context.past``), so a value hovering at a
  threshold, once raised, never clears and re-raises: one raise per episode.  ``since``
  is when the condition began.
* **severity** rises at once and falls only after ``clear_after`` at the lower level.
* **cause over symptom**: a rule that ``supersedes`` another (launch-bound decode explains
  "busy but not working" on the same GPUs) keeps it quiet while it holds.
* **symptom names its cause across layers**: a decoding symptom (TTFT over the SLO, ITL
  jitter, errors) that an active memory, scheduling, hardware, kernel or parallelism
  finding on the same server explains (``EXPLAINS``: KV pressure -> queue time -> TTFT)
  stays visible (users feel it, and its severity still counts) but names the cause in
  its title and ``caused_by``, and the active list puts each cause right before the
  symptoms it explains.
* **missing inputs**: a rule whose required readings are absent is not run (silent), and
  ``missing_inputs`` says which readings it lacks and why.
* a rule that raises is a bug, not a finding: it is skipped and recorded in
  ``rule_errors``, the other rules still run.

Time is the Snapshot's clock, so demo, replay and live diagnose alike.  Call
``evaluate`` after ``history.add(snapshot)``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..config import DiagnosisConfig
from ..findings import Finding, FindingEvent, RuleSpec, Severity, leads, order_key
from ..history import History, Series
from ..model import Labels, Reading, Snapshot, Status
from ..reading_index import ReadingIndex
from .base import (
    FACT_MAX_AGE,
    JUDGED_RAISE_AFTER,
    Candidate,
    Context,
    Rule,
    describe_subject,
)
from .registry import all_rules

# Real scrapes are not exactly 1 s apart (2.99 s for three ticks is common): a delay is
# met when it is met to within this much, so "3 s" means three ticks, not four.
TICK_SLACK = 0.1

def _own_remedy(*symptoms: str) -> dict[str, str]:
    """Symptoms a cause explains that keep their own remedy."""
    return dict.fromkeys(symptoms, "")


# cause code -> the decoding symptoms it explains on the same server (the seeds' method:
# symptom -> layer -> cause).  KV pressure queues requests (TTFT) and preempts running ones
# (ITL stalls); a concurrency cap or a starved host queues them; throttled, lost or
# straggling GPUs slow every step; launch-bound decode slows every token.
# Each symptom maps to its remedy while that cause explains it ("": its own).  A symptom's
# own remedy guesses from its own readings (DEC-001: queue or prefill, from the queue time);
# a cause that explains it may know better.  TTFT over the SLO because the KV transfer
# dominates is not fixed by chunked prefill or prefix caching: the remedy is the wire.
EXPLAINS: dict[str, dict[str, str]] = {
    "MEM-001": _own_remedy("DEC-001", "DEC-002"),
    "MEM-005": _own_remedy("DEC-001"),             # evicted prefixes are prefilled again
    "SCH-001": _own_remedy("DEC-001", "DEC-002"),
    "SCH-002": _own_remedy("DEC-001"),
    "SCH-003": _own_remedy("DEC-001", "DEC-002"),
    "SCH-004": _own_remedy("DEC-001", "DEC-002"),
    "SCH-005": _own_remedy("DEC-001"),   # a deferred queue (KV transfer, LoRA) delays TTFT
    "SCH-006": _own_remedy("DEC-001", "DEC-002"),   # an asleep engine is not a slow one
    "HW-003": _own_remedy("DEC-001", "DEC-002"),
    "HW-005": _own_remedy("DEC-001", "DEC-004"),
    "KRN-001": _own_remedy("DEC-002"),
    "KRN-002": _own_remedy("DEC-001"),
    "PAR-001": _own_remedy("DEC-001", "DEC-002"),
    "PAR-002": _own_remedy("DEC-001", "DEC-002"),
    # the first token waits for the KV transfer
    "PAR-004": {"DEC-001": (
        "the first token waits for the KV transfer from the prefill instance (PAR-004), "
        "not for prefill or the queue: put the pair on a fast path (NIXL/UCX over RDMA or "
        "NVLink, not TCP; same rack), check the transfer backend's logs for retries, "
        "shrink the KV (FP8 KV cache); chunked prefill or more capacity will not help")},
}


@dataclass
class _Track:
    pending_since: float
    finding: Finding | None = None
    raised_at: float | None = None
    healthy_since: float | None = None
    sev_seen: dict[Severity, float] = field(default_factory=dict)


def covers(cause: Labels, symptom: Labels) -> bool:
    """True when a cause's subject includes the symptom's (same labels where both have
    one; a ``gpus`` list includes its ``gpu``s; an empty subject covers everything)."""
    a, b = dict(cause), dict(symptom)
    if "gpus" in a and "gpu" in b:
        return b["gpu"] in a["gpus"].split(",")
    return all(a[k] == b[k] for k in a.keys() & b.keys())


def _own_title(f: Finding) -> str:
    """A cause's title as it names itself, without its own subject or cause suffixes."""
    return f.title.split(": caused by ", 1)[0]


def explains(cause_code: str, symptom_code: str) -> bool:
    return symptom_code in EXPLAINS.get(cause_code, ())


def cause_first(items: list, code_subject: Callable[[Any], tuple[str, Labels]],
                span: Callable[[Any], tuple[float, float]] | None = None) -> list:
    """``items`` (findings, episodes, compare rows) with each symptom moved right after
    the first item that explains it (EXPLAINS, a covering subject, and, with ``span``,
    overlapping in time); otherwise in their given order.  Every list infertop shows goes
    through this or through the Diagnoser's chain: cause before symptom everywhere."""
    cause_of: dict[int, int] = {}
    for i, a in enumerate(items):
        code, subject = code_subject(a)
        for j, b in enumerate(items):
            c2, s2 = code_subject(b)
            if j == i or not explains(c2, code) or not covers(s2, subject):
                continue
            if span is not None:
                (a0, a1), (b0, b1) = span(a), span(b)
                if a0 > b1 or b0 > a1:
                    continue
            cause_of[i] = j
            break
    out: list = []
    done: set[int] = set()

    def emit(k: int) -> None:
        if k in done:
            return
        done.add(k)
        out.append(items[k])
        for i, j in cause_of.items():
            if j == k:
                emit(i)

    for k in range(len(items)):
        if k not in cause_of:
            emit(k)
    for k in range(len(items)):   # a cycle (none in EXPLAINS today) must not lose items
        emit(k)
    return out


# cross-node rules (infertop/rules/fleet.py): judged on a fleet's Frame only
FLEET_CODE_PREFIX = "FLT-"

class Diagnoser:
    def __init__(self, config: DiagnosisConfig | None = None, fleet: bool | None = None) -> None:
        """``fleet``: None every rule; False a box's rules (no cross-node FLT-*, which a
        single box can never raise nor be "not checked" on); True the FLT-* rules alone."""
        self.config = config or DiagnosisConfig()
        self.scope: tuple[Rule, ...] = tuple(
            r for r in all_rules()
            if fleet is None or r.code.startswith(FLEET_CODE_PREFIX) == fleet)
        self.rules: tuple[Rule, ...] = tuple(r for r in self.scope
                                            if self.config.enabled(r.code))
        self._by_code = {r.code: r for r in all_rules()}
        self._causes: dict[str, list[str]] = {}
        for r in self.rules:
            for victim in r.spec.supersedes:
                self._causes.setdefault(victim, []).append(r.code)
        self._timing = {r.code: (self.config.raise_after(r.code, r.spec.raise_after),
                                 self.config.clear_after(r.code, r.spec.clear_after))
                        for r in all_rules()}
        self.reset()

    def reset(self) -> None:
        """Forget every finding and trend (a replay that seeks backwards)."""
        self._tracks: dict[tuple[str, Labels], _Track] = {}
        self._events: deque[FindingEvent] = deque(maxlen=max(1, self.config.diagnosis.events_max))
        self._state: dict = {"outages": {}}
        self._index_key: tuple | None = None
        self._index: dict[str, list[Series]] = {}
        self.rule_errors: dict[str, str] = {}
        self.active: list[Finding] = []
        # (code, subject) whose condition held on the newest tick; an active finding not
        # in it is clearing and keeps the evidence of the last tick it held
        self.holding: frozenset[tuple[str, Labels]] = frozenset()

    @property
    def events(self) -> list[FindingEvent]:
        """Raises and clears, oldest first (bounded by ``diagnosis.events_max``)."""
        return list(self._events)

    # -- one tick -----------------------------------------------------------------------
    def evaluate(self, history: History, snapshot: Snapshot, derived: list[Reading],
                 index: ReadingIndex | None = None) -> list[Finding]:
        """This tick's findings.  ``index``: the tick's readings by key, when the caller
        built it (the Pipeline, whose Frame reads the same); else built here."""
        now = snapshot.time
        self._track_sources(snapshot)
        raised = {k: tr.finding.severity for k, tr in self._tracks.items()
                  if tr.finding is not None}
        ctx = Context(history, snapshot, derived, self.config, self._series_index(history),
                      self._state, raised, index=index)
        cands: dict[tuple[str, Labels], Candidate] = {}
        has_input = ctx.has_input
        for rule in self.rules:
            if not all(has_input(i) for i in rule.required):
                continue
            ctx.rule_code = rule.code
            ctx.relaxed_used.clear()
            try:
                got = list(rule.check(ctx))
                if ctx.relaxed_used:
                    got = self._hold_not_lift(rule, ctx, got, raised)
                for c in got:
                    key = (rule.code, c.subject)
                    old = cands.get(key)
                    if old is None or c.severity > old.severity:
                        cands[key] = c
            except Exception as e:  # a rule bug must not take the screen down
                self.rule_errors[rule.code] = f"{type(e).__name__}: {e}"
        if self._causes:
            cands = {k: c for k, c in cands.items() if not self._explained(k, cands)}
        self._update(now, cands)
        self.holding = frozenset(cands)
        return list(self.active)

    @staticmethod
    def _hold_not_lift(rule: Rule, ctx: Context, got: list[Candidate],
                       raised: dict[tuple[str, Labels], Severity]) -> list[Candidate]:
        """Hysteresis holds the level that is raised; it never lifts a subject higher.
        A candidate above its raised level whose check leaned on a relaxed threshold
        (``Context.past``) is judged again with no threshold relaxed: the strict verdict
        when it earns the raised level or more, else the candidate at the raised level.
        Rules that pass ``past`` their level never get here for it; this catches any
        rule that does not (one place, so no rule can get it wrong)."""
        lifted = [c for c in got if (rule.code, c.subject) in ctx.relaxed_used
                  and c.severity > raised.get((rule.code, c.subject), c.severity)]
        if not lifted:
            return got
        ctx.strict = True
        try:
            strict: dict[Labels, Candidate] = {}
            for c in rule.check(ctx):
                old = strict.get(c.subject)
                if old is None or c.severity > old.severity:
                    strict[c.subject] = c
        finally:
            ctx.strict = False
        out = []
        for c in got:
            if any(c is x for x in lifted):
                held = raised[(rule.code, c.subject)]
                s = strict.get(c.subject)
                # the strict verdict when it earns the raised level or more (its evidence
                # is true: "0.85 >= 0.5", not the lifted "0.85 >= 0.9"), else the hold
                c = s if s is not None and s.severity >= held else replace(c, severity=held)
            out.append(c)
        return out

    def _explained(self, key: tuple[str, Labels], cands) -> bool:
        code, subject = key
        for cause in self._causes.get(code, ()):
            for (c2, s2) in cands:
                if c2 == cause and covers(s2, subject):
                    return True
        return False

    def _update(self, now: float, cands: dict[tuple[str, Labels], Candidate]) -> None:
        for key, c in cands.items():
            code = key[0]
            raise_after, clear_after = self._timing[code]
            tr = self._tracks.get(key)
            if tr is None:
                tr = self._tracks[key] = _Track(pending_since=now)
            tr.healthy_since = None
            tr.sev_seen[c.severity] = now
            if tr.finding is None and now - tr.pending_since < raise_after - TICK_SLACK:
                continue
            sev = max(s for s, t in tr.sev_seen.items()
                      if s is c.severity or now - t < clear_after)
            was = tr.finding
            if was is None:
                tr.raised_at = now
            tr.finding = self._finding(code, c, sev, tr.pending_since, tr.raised_at)
            if was is None:
                self._events.append(FindingEvent(now, code, c.subject, "raised", sev,
                                                 tr.finding.summary(), tr.pending_since))
            elif sev > was.severity:   # one severity in every view: the timeline learns it
                self._events.append(FindingEvent(now, code, c.subject, "escalated", sev,
                                                 tr.finding.summary(), tr.pending_since))
        for key in [k for k in self._tracks if k not in cands]:
            tr = self._tracks[key]
            if tr.finding is None:
                del self._tracks[key]  # the streak broke before it raised
                continue
            if tr.healthy_since is None:
                tr.healthy_since = now
            if now - tr.healthy_since >= self._timing[key[0]][1] - TICK_SLACK:
                f = tr.finding
                self._events.append(FindingEvent(
                    now, f.code, f.subject, "cleared", f.severity,
                    f"{f.code} {f.title}: cleared after {now - f.since:.0f} s"))
                del self._tracks[key]
        active = [tr.finding for tr in self._tracks.values() if tr.finding is not None]
        active.sort(key=order_key)
        self.active = self._chain(active)

    def _chain(self, active: list[Finding]) -> list[Finding]:
        """Symptoms name the active causes that explain them; each cause leads, its
        symptoms follow it (ordered by the worst severity in the chain)."""
        causes_of: dict[int, list[Finding]] = {}
        for i, f in enumerate(active):
            causes = [c for c in active if f.code in EXPLAINS.get(c.code, ())
                      and covers(c.subject, f.subject)]
            if causes:
                causes_of[i] = causes
        if not causes_of:
            return active
        out: list[Finding] = []
        symptoms: dict[tuple[str, Labels], list[Finding]] = {}
        for i, f in enumerate(active):
            if i in causes_of:
                first = causes_of[i][0]
                # the cause's own title ("queue grows while the batch is at its cap"),
                # not its catalogue title ("... while GPUs idle" on a box with no GPU)
                names = ", ".join(f"{c.code} {self._cause_title(c)}" for c in causes_of[i])
                remedy = next((r for c in causes_of[i] if (r := EXPLAINS[c.code][f.code])),
                              f.remedy)
                symptoms.setdefault((first.code, first.subject), []).append(replace(
                    f, title=f"{f.title}: caused by {names}", remedy=remedy,
                    caused_by=tuple(c.code for c in causes_of[i])))
        for f in active:
            if (f.code, f.subject) in {(a.code, a.subject) for a in out}:
                continue
            if any(f is active[i] for i in causes_of):
                continue
            out.append(f)
            out += symptoms.get((f.code, f.subject), [])
        # a chain ranks by its worst member: a warning cause of a critical symptom leads
        # (after a dead server: LEADS)
        chains: list[list[Finding]] = []
        for f in out:
            if f.caused_by and chains:
                chains[-1].append(f)
            else:
                chains.append([f])
        chains.sort(key=lambda ch: (not any(leads(x.code) for x in ch),
                                    -max(x.severity.rank for x in ch), ch[0].layer.position,
                                    ch[0].code, ch[0].subject))
        return [f for ch in chains for f in ch]

    def _cause_title(self, f: Finding) -> str:
        """How a symptom names its cause: the catalogue's short title when the cause's own
        is only that plus its subject, else the cause's own ("queue grows while the batch
        is at its cap", not the catalogue's "... while GPUs idle" on a box with no GPU)."""
        spec_title = self._by_code[f.code].spec.title
        own = _own_title(f)
        return spec_title if own.startswith(spec_title) else own

    def _finding(self, code: str, c: Candidate, sev: Severity, since: float,
                 raised: float | None) -> Finding:
        spec = self._by_code[code].spec
        title = c.title
        if title is None:
            title = spec.title + (f" ({describe_subject(c.subject)})" if c.subject else "")
        return Finding(code, spec.layer, sev, title, c.evidence, c.remedy or spec.remedy, since,
                       c.subject, raised=raised)

    def _track_sources(self, snapshot: Snapshot) -> None:
        """Outages per source (ERROR ticks), for the restart finding's downtime."""
        outages = self._state["outages"]
        for name, s in snapshot.samples.items():
            o = outages.setdefault(name, {"down_since": None, "failed": 0, "last": None,
                                          "reason": ""})
            if s.status is Status.ERROR:
                if o["down_since"] is None:
                    o["down_since"], o["failed"] = s.time, 0
                o["failed"] += 1
                o["reason"] = s.reason
            elif s.status is Status.OK and o["down_since"] is not None:
                o["last"] = (o["down_since"], snapshot.time, o["failed"], o["reason"])
                o["down_since"] = None

    def _series_index(self, history: History) -> dict[str, list[Series]]:
        # History only gains series between its expiry sweeps (every 30th tick): its
        # length and that sweep count say whether the index is still right.
        key = (id(history), len(history), history.ticks // 30)
        if key != self._index_key:
            idx: dict[str, list[Series]] = {}
            for s in history:
                idx.setdefault(s.key, []).append(s)
            self._index, self._index_key = idx, key
        return self._index

    def judge_after(self) -> float:
        """Seconds of samples before most rules can raise: the global raise delay, or half
        the judge window (a median needs it) plus the judged rules' delay.  A run shorter
        than this (``snapshot``'s default 2 s) has judged nothing yet: its empty findings
        list must not read as healthy."""
        d = self.config.diagnosis
        return max(d.raise_after, d.judge_window / 2 + JUDGED_RAISE_AFTER)

    def window_needed(self) -> dict[str, float]:
        """Enabled rule code -> seconds of samples before its finding can raise: its raise
        delay, plus half the judge window for rules that compare a window's median (the
        median needs that much History).  A shorter run cannot raise it (doctor says so)."""
        half = self.config.diagnosis.judge_window / 2
        return {r.code: self._timing[r.code][0] + (half if "judge_window" in r.spec.judged
                                                   else 0.0)
                for r in self.rules}

    # -- what the help screen and docs show -----------------------------------------------
    def catalogue(self) -> list[RuleSpec]:
        """Every rule (enabled or not) with the thresholds and timing in force."""
        out = []
        for r in all_rules():
            ra, ca = self._timing[r.code]
            out.append(replace(r.spec, thresholds={k: self.config.value(k)
                                                   for k in r.spec.thresholds},
                               raise_after=ra, clear_after=ca))
        return out

    def missing_inputs(self, history: History) -> dict[str, list[str]]:
        """Why silent: code -> the required inputs with no current reading (and the
        source's reason when it said one: no GPM on this GPU, no server)."""
        idx: dict[str, list[Series]] = {}
        for s in history:
            idx.setdefault(s.key, []).append(s)
        fresh = history.now - FACT_MAX_AGE
        out: dict[str, list[str]] = {}
        for r in self.scope:
            if not self.config.enabled(r.code):
                out[r.code] = ["disabled in the config"]
                continue
            lacking = []
            for spec in r.required:
                reasons = []
                ok = False
                for key, lab in spec.alternatives:
                    for s in idx.get(key, ()):
                        if lab and any(s.label(k) != v for k, v in lab):
                            continue
                        if s.status is Status.OK and s.last_seen >= fresh:
                            ok = True
                            break
                        if s.reason:
                            reasons.append(f"{s.status.value}: {s.reason}")
                    if ok:
                        break
                if not ok:
                    why = reasons[0] if reasons else "not reported by any source"
                    lacking.append(f"{spec.text} ({why})")
            if lacking:
                out[r.code] = lacking
        return out

