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

from dataclasses import dataclass, field, replace
from typing import Callable

from .findings import Finding
from .history import History
from .model import Capability, Reading, Sample, Snapshot, Status, make_labels
from .pipeline import Frame, Pipeline
from .units import natural_key

FLEET_CODE_PREFIX = "FLT-"


def node_of(name: str, sample: Sample | None = None) -> str | None:
    """The node of a fleet sample: ``meta["node"]``, else the part after ``@``."""
    if sample is not None and sample.meta.get("node"):
        return str(sample.meta["node"])
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


def with_node(r: Reading, node: str) -> Reading:
    return replace(r, labels=make_labels(r.labels, node=node))


def tag_finding(f: Finding, node: str) -> Finding:
    return replace(f, subject=make_labels(f.subject, node=node))


@dataclass
class FleetFrame(Frame):
    """The whole fleet as one Frame, plus each node's own Frame."""

    nodes: dict[str, Frame] = field(default_factory=dict)
    fleet_findings: list[Finding] = field(default_factory=list)

    def node_findings(self, node: str) -> list[Finding]:
        """A node's own findings and the cross-node ones about it, worst first."""
        own = self.nodes[node].findings if node in self.nodes else []
        cross = [f for f in self.fleet_findings if dict(f.subject).get("node") == node]
        return sorted(own + cross, key=lambda f: -f.severity.rank)


class FleetPipeline:
    """Per-node Pipelines and a Diagnoser that runs only the cross-node rules.

    ``make_diagnoser(fleet)`` builds a Diagnoser: ``fleet=False`` for a node (every rule but
    the FLT ones), ``fleet=True`` for the cross-node rules alone."""

    def __init__(self, make_diagnoser: Callable[[bool], object] | None = None,
                 window: float = 60.0, max_points: int = 900) -> None:
        self.make_diagnoser = make_diagnoser
        self.window = window
        self.max_points = max_points
        self.pipelines: dict[str, Pipeline] = {}
        self.fleet_diagnoser = make_diagnoser(True) if make_diagnoser else None
        self._empty = History(max_points=2)
        self.timeline = None

    @property
    def diagnoser(self):
        return self.fleet_diagnoser

    @property
    def history(self) -> History:
        """A node's History (ticks are the same for every node; doctor counts them)."""
        return next(iter(self.pipelines.values())).history if self.pipelines else self._empty

    def reset(self) -> None:
        for p in self.pipelines.values():
            p.reset()
        if self.fleet_diagnoser is not None and hasattr(self.fleet_diagnoser, "reset"):
            self.fleet_diagnoser.reset()

    def _pipeline(self, node: str) -> Pipeline:
        p = self.pipelines.get(node)
        if p is None:
            diag = self.make_diagnoser(False) if self.make_diagnoser else None
            p = self.pipelines[node] = Pipeline(diag, window=self.window,
                                                max_points=self.max_points)
        return p

    def feed(self, snap: Snapshot, timeline=None) -> FleetFrame:
        if timeline != self.timeline:
            self.timeline = timeline
            self.reset()
        frames = {node: self._pipeline(node).feed(part, timeline)
                  for node, part in split_nodes(snap).items()}
        samples: dict[str, Sample] = {}
        for name, s in snap.samples.items():
            node = node_of(name, s)
            if node is None:   # Prometheus itself failing: no node to name
                samples[name] = s
                continue
            samples[name] = replace(s, readings=tuple(with_node(r, node) for r in s.readings))
        derived = [with_node(r, node) for node, fr in frames.items() for r in fr.derived]
        whole = Snapshot(snap.time, samples, snap.tick, dict(snap.capabilities))
        fleet = (self.fleet_diagnoser.evaluate(self._empty, whole, derived)
                 if self.fleet_diagnoser is not None else [])
        findings = list(fleet)
        for node, fr in frames.items():
            findings += [tag_finding(f, node) for f in fr.findings]
        findings.sort(key=lambda f: (-f.severity.rank, f.layer.index, f.code, f.subject))
        history = next(iter(frames.values())).history if frames else self._empty
        return FleetFrame(whole, derived, history, findings, self.window, nodes=frames,
                          fleet_findings=list(fleet))


def diagnoser_factory(config=None) -> Callable[[bool], object]:
    """Diagnosers for ``FleetPipeline``: every per-node rule for a node, the FLT rules alone
    for the fleet (a node never sees another node's readings; the fleet's whole Frame would
    mix GPUs of the same index from different nodes)."""
    from .rules.engine import Diagnoser

    def make(fleet: bool):
        d = Diagnoser(config)
        d.rules = tuple(r for r in d.rules if r.code.startswith(FLEET_CODE_PREFIX) == fleet)
        return d
    return make


def node_summary(frame: Frame) -> dict[str, float | None]:
    """The engines-table numbers of one node's Frame (None where it has none)."""
    def val(key: str, **labels: str) -> float | None:
        vals = [r.value for r in frame.by_key(key) if r.ok and
                all(r.label(k) == v for k, v in labels.items())]
        return max(vals) if vals else None

    def total(key: str) -> float | None:
        vals = [r.value for r in frame.by_key(key) if r.ok and not r.label("quantile")]
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
