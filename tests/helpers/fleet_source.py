"""A fleet made of demo nodes, computed at once (no HTTP, no Prometheus): each node is a
DemoSource whose samples are renamed ``<name>@<node>`` like PrometheusSource's, so the
fleet pipeline, rules and screen can be tested fast and deterministically."""

from __future__ import annotations

from dataclasses import replace

from infertop.model import Snapshot
from infertop.probes.sources.demo import DemoSource
from infertop.source import SnapshotSource


class DemoFleetSource(SnapshotSource):
    kind = "demo"
    fleet = True
    label = "demo fleet"

    def __init__(self, nodes: int = 4, bad: dict[int, tuple[str, int]] | None = None) -> None:
        """``bad``: node index -> (scenario, ticks to fast-forward)."""
        self.nodes = []
        for i in range(nodes):
            name, skip = (bad or {}).get(i, ("healthy", 0))
            src = DemoSource(name, seed=100 + i, loop=True, instance=f"10.0.0.{i + 1}:8000")
            for _ in range(skip):
                src.step_frame()
            self.nodes.append((f"node-{i + 1:02d}", src))
        self.tick = 0

    async def next(self) -> Snapshot:
        self.tick += 1
        samples, t = {}, 0.0
        for node, src in self.nodes:
            snap = src.next_sync()
            assert snap is not None, f"{node}: the demo scenario ended"
            t = max(t, snap.time)
            for name, s in snap.samples.items():
                if name == "process":
                    continue   # Prometheus knows no process tree: the fleet has none either
                samples[f"{name}@{node}"] = replace(s, source=f"{name}@{node}",
                                                    meta=replace(s.meta, node=node))
        return Snapshot(t, samples, self.tick)
