"""A fleet through the core: one ordinary Pipeline per node, cross-node rules on top.

A fleet Snapshot names its samples ``<source>@<node>`` (``probes/prometheus/source.py``,
``probes/sources/fleet_hub.py``).  ``split_nodes`` cuts it into one Snapshot per node whose
samples have the plain names a single box has (``nvml``, ``server:host:port``), so each node
runs through its own History and every per-node rule, and the six panes draw a node exactly
as they draw a local box (the fleet screen's drill-down).

``FleetPipeline.feed`` returns a ``FleetFrame``: a Frame over the whole fleet (every reading
labelled with its ``node``, so ``snapshot --json`` and ``doctor`` print the fleet with the
node named) whose findings are every node's findings (subject + ``node``) and the
cross-node rules' (``infertop/rules/fleet.py``), plus ``nodes``: each node's own Frame.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from .findings import Finding, leads, order_key
from .history import History
from .meta import AlertsMeta, FleetOverviewMeta
from .model import Capability, Reading, Sample, Snapshot, Status, has_value, make_labels
from .pipeline import Evaluator, Frame, Pipeline
from .units import natural_key

# fleet-wide samples of a Prometheus fleet (probes/prometheus/aggregates.py): no node
ALERTS_SAMPLE = "prometheus-alerts"
AGGREGATES_SAMPLE = "prometheus-aggregates"
ROWS = "\0rows"   # a node's Pipeline key suffix for rows Prometheus computed and judged


def node_of(name: str, sample: Sample | None = None) -> str | None:
    """The node of a fleet sample: its meta's ``node``, else the part after ``@``."""
    if sample is not None and sample.meta.node:
        return sample.meta.node
    return name.rpartition("@")[2] if "@" in name else None


def is_fleet(snap: Snapshot) -> bool:
    return any(node_of(n, s) for n, s in snap.samples.items())


def split_nodes(snap: Snapshot) -> dict[str, Snapshot]:
    """node -> that node's Snapshot, samples renamed to their single-box names."""
    parts: dict[str, dict[str, Sample]] = {}
    caps: dict[str, dict[str, Capability]] = {}
    for name, s in snap.samples.items():
        node = node_of(name, s)
        if node is None:
            continue
        plain = name.rpartition("@")[0] if "@" in name else name
        parts.setdefault(node, {})[plain] = replace(s, source=plain)
        cap = snap.capabilities.get(name)
        if cap is not None:
            caps.setdefault(node, {})[plain] = replace(cap, source=plain)
    return {node: Snapshot(snap.time, parts[node], snap.tick, caps.get(node, {}))
            for node in sorted(parts, key=natural_key)}


_NODE_LABELS: dict[tuple, tuple] = {}   # (labels, node) -> labels with node: same every tick


def node_labels(labels: tuple, node: str) -> tuple:
    key = (labels, node)
    got = _NODE_LABELS.get(key)
    if got is None:
        if len(_NODE_LABELS) > 200_000:   # bounded: a fleet that keeps renaming its series
            _NODE_LABELS.clear()
        got = _NODE_LABELS[key] = make_labels(labels, node=node)
    return got


def with_node(r: Reading, node: str) -> Reading:
    return Reading(r.key, r.value, r.unit, node_labels(r.labels, node), r.status, r.reason,
                   r.kind, r.text, r.buckets, r.hist_sum)


def tag_finding(f: Finding, node: str) -> Finding:
    return replace(f, subject=make_labels(f.subject, node=node))


def node_findings_shown(node: str, own: list[Finding], fleet: list[Finding]) -> list[Finding]:
    """A node's findings, tagged with it, as the fleet's lists show them: cause over symptom
    across the two diagnosers, as the engine does within one (a cross-node rule that
    ``supersedes`` a node's code, on a subject that covers it, keeps it quiet there: FLT-003
    and the node's DEC-006 are one dead server).  The node's own screen keeps them all."""
    tagged = [tag_finding(f, node) for f in own]
    if not fleet:
        return tagged
    from .rules.engine import covers
    quiet = _superseded()
    return [f for f in tagged
            if not any(f.code in quiet.get(c.code, ()) and covers(c.subject, f.subject)
                       for c in fleet)]


@functools.cache
def _superseded() -> dict[str, tuple[str, ...]]:
    """Cross-node rule code -> the node codes it supersedes (their RuleSpecs)."""
    from .rules.engine import FLEET_CODE_PREFIX
    from .rules.registry import all_rules
    return {r.code: r.spec.supersedes for r in all_rules()
            if r.code.startswith(FLEET_CODE_PREFIX) and r.spec.supersedes}


# what the cross-node rules read (infertop/rules/fleet.py): only these are relabelled for
# them every tick; the whole fleet is relabelled only when asked (snapshot --json, doctor)
FLEET_RULE_KEYS = frozenset({"node.up", "server.requests_running", "server.requests_waiting",
                             "kv.usage_ratio", "latency.ttft_seconds", "latency.itl_seconds"})


@dataclass
class FleetFrame(Frame):
    """The whole fleet as one Frame, plus each node's own Frame.

    ``snapshot`` and ``derived`` label every reading with its node; they are built on first
    use (the fleet screen reads the nodes' own Frames and never needs them)."""

    nodes: dict[str, Frame] = field(default_factory=dict)
    fleet_findings: list[Finding] = field(default_factory=list)
    # node -> Prometheus's alerts as findings, when the exported rules judge the fleet
    # (None: infertop judges each node itself)
    prometheus_findings: dict[str, list[Finding]] | None = None
    # the fleet as Prometheus counts it (aggregate mode: only the worst nodes are in
    # ``nodes``): the prometheus-aggregates sample's readings and meta, else None
    overview: Sample | None = None

    @functools.cached_property
    def overview_counts(self) -> dict[str, float]:
        """The overview's fleet-wide counts (fleet.nodes, fleet.gpus, fleet.targets_down:
        its finite readings without labels), {} outside aggregate mode.  Built once per
        Frame: the header and the fleet body both read them every tick."""
        ov = self.overview
        if ov is None:
            return {}
        return {r.key: r.value for r in ov.readings
                if not r.labels and r.value is not None and math.isfinite(r.value)}

    @property
    def judged_by(self) -> str:
        return "prometheus" if self.prometheus_findings is not None else "infertop"

    @property
    def time(self) -> float:
        """The fleet snapshot's own time, without building the node-labelled one."""
        return self._raw.time

    @property
    def raw(self) -> Snapshot:
        """The fleet Snapshot as the source made it (samples ``<name>@<node>``)."""
        return self._raw

    @property   # type: ignore[misc]  # a dataclass field served by a property
    def snapshot(self) -> Snapshot:
        if self._whole is None:
            self._whole: Snapshot | None = relabel(self._raw)
        return self._whole

    @snapshot.setter
    def snapshot(self, value: Snapshot) -> None:   # the dataclass __init__ sets it
        self._raw = value
        self._whole = None

    @property   # type: ignore[misc]  # a dataclass field served by a property
    def derived(self) -> list[Reading]:
        if self._whole_derived is None:
            self._whole_derived: list[Reading] | None = [
                with_node(r, node) for node, fr in self.nodes.items() for r in fr.derived]
        return self._whole_derived

    @derived.setter
    def derived(self, value: list[Reading]) -> None:   # empty: built on first use
        self._whole_derived = value or None

    def unreachable_servers(self) -> dict[str, str]:
        """None for a fleet: a node whose server cannot be read is FLT-003 (critical, the
        node named), one finding among the fleet's, not a failed run; a fleet run fails
        with exit 3 only when nothing at all could be read (Prometheus down)."""
        return {}

    def node_findings(self, node: str) -> list[Finding]:
        """A node's own findings (Prometheus's alerts when its rules judge) and the
        cross-node ones about it, worst first, each cause before the symptoms it explains."""
        from .rules.engine import cause_first
        cross = [f for f in self.fleet_findings if dict(f.subject).get("node") == node]
        if self.prometheus_findings is not None:   # judged by Prometheus, sorted already
            return cross + list(self.prometheus_findings.get(node, ()))
        own = node_findings_shown(node, self.nodes[node].findings, cross) \
            if node in self.nodes else []
        return cause_first(sorted(own + cross, key=lambda f: (not leads(f.code),
                                                              -f.severity.rank)),
                           lambda f: (f.code, f.subject))


def relabel(snap: Snapshot, keys: frozenset[str] | None = None) -> Snapshot:
    """The fleet snapshot with every reading (or those of ``keys``) labelled by node."""
    samples: dict[str, Sample] = {}
    for name, s in snap.samples.items():
        node = node_of(name, s)
        if node is None:   # Prometheus itself failing: no node to name
            samples[name] = s
            continue
        rs = s.readings if keys is None else [r for r in s.readings if r.key in keys]
        samples[name] = replace(s, readings=tuple(with_node(r, node) for r in rs))
    return Snapshot(snap.time, samples, snap.tick, dict(snap.capabilities))


class FleetPipeline:
    """Per-node Pipelines and a Diagnoser that runs only the cross-node rules.

    ``make_diagnoser(fleet)`` builds a Diagnoser: ``fleet=False`` for a node (every rule but
    the FLT ones), ``fleet=True`` for the cross-node rules alone.

    A node whose samples are the very objects of the previous tick (PrometheusSource hands
    the same Sample back while Prometheus has not scraped the node again) keeps its Frame:
    re-feeding identical values would only cost time (refreshes run at half the scrape
    interval, so about every other one)."""

    def __init__(self, make_diagnoser: Callable[[bool], Evaluator] | None = None,
                 window: float = 60.0, max_points: int = 900) -> None:
        self.make_diagnoser = make_diagnoser
        self.window = window
        self.max_points = max_points
        self.pipelines: dict[str, Pipeline] = {}
        self.fleet_diagnoser = make_diagnoser(True) if make_diagnoser else None
        self._empty = History(max_points=2)
        self._last: dict[str, tuple[tuple, Frame]] = {}
        self.timeline = None
        self.reused = 0   # node feeds skipped because nothing changed (the benchmark says)

    @property
    def diagnoser(self):
        return self.fleet_diagnoser

    @property
    def history(self) -> History:
        """A node's History (ticks are the same for every node; doctor counts them)."""
        return next(iter(self.pipelines.values())).history if self.pipelines else self._empty

    # -- what a report of the run says (doctor), as Pipeline has it -------------------
    def missing_inputs(self) -> dict[str, list[str]]:
        """A node rule is not checked when it lacks inputs on every node (reasons as the
        first node gives them; a rule checked on some nodes was checked); the cross-node
        rules read the nodes' readings and are checked whenever a node is."""
        per_node = [p.missing_inputs() for p in self._judged()]
        if not per_node:
            return {}
        common = set(per_node[0]).intersection(*per_node[1:])
        return {code: why for code, why in per_node[0].items() if code in common}

    def window_needed(self) -> dict[str, float]:
        """The node rules' (every node runs the same) and the cross-node rules'."""
        node = next(iter(self._judged()), None)   # a row Prometheus judged has no rules
        out = node.window_needed() if node else {}
        if self.fleet_diagnoser is not None:
            out.update(self.fleet_diagnoser.window_needed())
        return out

    @property
    def rules_total(self) -> int:
        """Every node rule and every cross-node rule."""
        node = next(iter(self._judged()), None)
        return (node.rules_total if node else 0) + len(getattr(self.fleet_diagnoser, "scope", ()))

    @property
    def events(self) -> list:
        """Every node's raises and clears (subject + node) and the cross-node ones, by time."""
        out = [replace(e, subject=node_labels(e.subject, node))
               for node, p in self.pipelines.items() if ROWS not in node for e in p.events]
        out += list(getattr(self.fleet_diagnoser, "events", ()))
        return sorted(out, key=lambda e: e.time)

    def reset(self) -> None:
        self._last.clear()
        for p in self.pipelines.values():
            p.reset()
        if self.fleet_diagnoser is not None and hasattr(self.fleet_diagnoser, "reset"):
            self.fleet_diagnoser.reset()

    def _judged(self) -> list[Pipeline]:
        """The Pipelines that run infertop's rules (not the rows Prometheus judged)."""
        return [p for key, p in self.pipelines.items() if ROWS not in key]

    def _pipeline(self, node: str, judged: bool = True) -> Pipeline:
        """A node's Pipeline; ``judged=False`` (a row Prometheus computed, judged there):
        one without rules, kept apart so the node's judged History is not mixed with it."""
        key = node if judged else node + ROWS
        p = self.pipelines.get(key)
        if p is None:
            diag = self.make_diagnoser(False) if self.make_diagnoser and judged else None
            p = self.pipelines[key] = Pipeline(diag, window=self.window,
                                               max_points=self.max_points)
        return p

    def feed(self, snap: Snapshot, timeline=None) -> FleetFrame:
        if timeline != self.timeline:
            self.timeline = timeline
            self.reset()
        by_node: dict[str, list[Sample]] = {}
        for name, s in snap.samples.items():
            node = node_of(name, s)
            if node is not None and not name.startswith(("prometheus@", "scrape@")):
                by_node.setdefault(node, []).append(s)
        from .prom_findings import findings_by_node
        alerts = snap.samples.get(ALERTS_SAMPLE)
        overview = snap.samples.get(AGGREGATES_SAMPLE)
        prom = (findings_by_node(list(alerts.meta.alerts), snap.time)
                if alerts is not None and isinstance(alerts.meta, AlertsMeta)
                and alerts.meta.loaded else None)
        # aggregate mode: only the pinned nodes are read whole and judged here
        detail = (set(overview.meta.detail) if overview is not None
                  and isinstance(overview.meta, FleetOverviewMeta) else None)
        frames: dict[str, Frame] = {}
        for node, part in split_nodes(snap).items():
            same = tuple(by_node.get(node, ()))
            last = self._last.get(node)
            if last is not None and same and len(last[0]) == len(same) and \
                    all(a is b for a, b in zip(last[0], same)):
                frames[node] = last[1]
                self.reused += 1
                continue
            frames[node] = self._pipeline(node, detail is None or node in detail).feed(
                part, timeline)
            self._last[node] = (same, frames[node])
        for gone in [n for n in self._last if n not in frames]:
            del self._last[gone]
        derived = [with_node(r, node) for node, fr in frames.items() for r in fr.derived
                   if r.key in FLEET_RULE_KEYS]
        # the cross-node rules compare every node: not run on the worst few (aggregate mode)
        fleet = (self.fleet_diagnoser.evaluate(self._empty, relabel(snap, FLEET_RULE_KEYS),
                                               derived)
                 if self.fleet_diagnoser is not None and overview is None else [])
        findings = list(fleet)
        if prom is not None:
            findings += [f for fs in prom.values() for f in fs]
        else:
            for node, fr in frames.items():
                findings += node_findings_shown(node, fr.findings, fleet)
        findings.sort(key=order_key)
        history = next(iter(frames.values())).history if frames else self._empty
        return FleetFrame(snap, [], history, findings, self.window, nodes=frames,
                          fleet_findings=list(fleet), prometheus_findings=prom,
                          overview=overview)


def diagnoser_factory(config=None) -> Callable[[bool], Evaluator]:
    """Diagnosers for ``FleetPipeline``: every per-node rule for a node, the FLT rules alone
    for the fleet (a node never sees another node's readings; the fleet's whole Frame would
    mix GPUs of the same index from different nodes)."""
    from .rules.engine import Diagnoser

    def make(fleet: bool):
        return Diagnoser(config, fleet=fleet)
    return make


def node_summary(frame: Frame) -> dict[str, float | None]:
    """The engines-table numbers of one node's Frame (None where it has none)."""
    def val(key: str, **labels: str) -> float | None:
        vals = [r.value for r in frame.by_key(key) if has_value(r) and
                all(r.label(k) == v for k, v in labels.items())]
        return max(vals) if vals else None

    def total(key: str) -> float | None:
        vals = [r.value for r in frame.by_key(key) if has_value(r) and not r.label("quantile")]
        return sum(vals) if vals else None

    return {
        "ttft_p99": val("latency.ttft_seconds", quantile="0.99"),
        "itl_p50": val("latency.itl_seconds", quantile="0.5"),
        "kv": val("kv.usage_ratio"),
        "running": total("server.requests_running"),
        "waiting": total("server.requests_waiting"),
        "tok_s": total("throughput.generation_tokens_per_second"),
        "errors": val("server.error_ratio"),
        "gpus": float(len({r.label("gpu") for r in frame.by_key("gpu.info")})),
    }


def sources_down(frame: Frame) -> list[str]:
    """Names of a node's sources that failed this tick (never 'healthy' when unread)."""
    return [n for n, s in frame.snapshot.samples.items() if s.status is Status.ERROR]
