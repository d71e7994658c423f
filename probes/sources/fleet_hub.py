"""Several nodes read directly (``--url`` on remote hosts, repeatable), for teams without
Prometheus: the same fleet Snapshot as ``PrometheusSource`` makes, so the same fleet
pipeline, cross-node rules and fleet screen apply.

Each URL is scraped by a ``DirectNodeProbe``: an inference server's /metrics goes through
the dialect tables as usual; a dcgm-exporter page (``DCGM_FI_*`` families) becomes the
node's GPU readings through ``infertop.dcgm``.  A node is ``NAME`` when the URL is given as
``NAME=URL``, else the URL's host.  Each scrape's health is the node's ``node.up`` (1 when
it answered, 0 when it failed), like Prometheus's ``up``.
"""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlsplit

from infertop.dcgm import gpu_readings
from infertop.meta import NoMeta, NvmlMeta, SampleMeta, ServerMeta
from infertop.model import Reading, Sample, Snapshot, Status, make_labels
from infertop.probes.server.metrics import ServerMetricsProbe, normalize_url
from infertop.probes.sources.hub import Hub
from infertop.promtext import parse

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "0.0.0.0")


def split_node(spec: str) -> tuple[str | None, str]:
    """``node-3=http://10.0.0.3:8000`` -> ("node-3", url); a plain URL -> (None, url)."""
    name, sep, rest = spec.partition("=")
    if sep and name and "/" not in name and ":" not in name and "?" not in name:
        return name, rest
    return None, spec


def fleet_nodes(urls: list[str]) -> list[tuple[str, str]] | None:
    """(node, url) per --url when they make a fleet: some URL names its node, or the URLs
    reach two or more hosts of which one is remote.  None: one box (today's behaviour:
    several servers of this machine, its GPUs read through NVML)."""
    parsed = []
    for spec in urls:
        node, url = split_node(spec)
        try:
            host = urlsplit(normalize_url(url)[0]).hostname or ""
        except ValueError:
            host = url
        parsed.append((node, url, host))
    named = any(n for n, _, _ in parsed)
    hosts = {h for _, _, h in parsed}
    remote = [h for h in hosts if h not in LOCAL_HOSTS]
    if not named and not (len(hosts) >= 2 and remote):
        return None
    return [(n or h, u) for n, u, h in parsed]


class DirectNodeProbe(ServerMetricsProbe):
    """One URL of a node: a server's /metrics, or its dcgm-exporter's."""

    def _map(self, text: str, headers) -> tuple[list[Reading], NvmlMeta | ServerMeta]:
        """The same read as a server's (caps, charset, redaction: ServerMetricsProbe); a
        page of ``DCGM_*`` families is the node's GPUs, mapped by infertop/dcgm.py."""
        families = parse(text)
        if any(f.name.startswith("DCGM_") for f in families):
            series = [({**s.labels, "__name__": s.name}, s.value)
                      for f in families for s in f.samples]
            readings, meta = gpu_readings(series)
            return readings, replace(meta, dcgm=True)
        return self._map_families(families, headers)


class FleetHub(Hub):
    """A Hub over DirectNodeProbes whose Snapshot names every sample ``<name>@<node>``."""

    fleet = True

    def __init__(self, nodes: list[tuple[str, str]], *, deadline: float = 0.8) -> None:
        probes: list[DirectNodeProbe] = []
        self.node_of: dict[str, str] = {}
        for node, url in nodes:
            p = DirectNodeProbe(url)
            if p.name in self.node_of:
                continue
            self.node_of[p.name] = node
            probes.append(p)
        super().__init__(probes, deadline=deadline,
                         label=", ".join(f"{n}={u}" for n, u in nodes))

    async def next(self) -> Snapshot:
        snap = await super().next()
        samples: dict[str, Sample] = {}
        ups: dict[str, list[Reading]] = {}
        for name, s in snap.samples.items():
            node = self.node_of.get(name, name)
            is_gpu = isinstance(s.meta, NvmlMeta) and s.meta.dcgm
            plain = "nvml" if is_gpu else name
            new = f"{plain}@{node}"
            samples[new] = replace(s, source=new, meta=_on_node(s, node, is_gpu))
            inst = name.split(":", 1)[1] if ":" in name else name
            down = s.status is Status.ERROR
            # how it was read and why it failed, for FLT-003's evidence (the reason is the
            # probe's: cleaned, its URL's secrets redacted)
            why = (f"infertop's direct scrape of {inst} fails: {s.reason or 'no answer'}"
                   if down else "")
            ups.setdefault(node, []).append(Reading(
                "node.up", 0.0 if down else 1.0, "",
                make_labels(instance=inst, job="dcgm" if is_gpu else "server"),
                text=why or None))
        for node, rs in ups.items():
            samples[f"scrape@{node}"] = Sample(f"scrape@{node}", snap.time, tuple(rs),
                                               meta=NoMeta(node=node))
        caps = {}
        for name, cap in snap.capabilities.items():
            on = self.node_of.get(name)
            caps[f"{name}@{on}" if on else name] = cap
        return Snapshot(snap.time, dict(sorted(samples.items())), snap.tick, caps)

    def describe(self) -> dict:
        d = super().describe()
        d.update(source="fleet", fleet=True)
        return d


def _on_node(s: Sample, node: str, is_gpu: bool) -> SampleMeta:
    """A direct probe's meta, renamed to its node's: a sample that failed before any
    scrape has the empty meta of its first name (server:...); its new name's class."""
    meta = s.meta
    if is_gpu or isinstance(meta, ServerMeta):
        return replace(meta, node=node)
    return ServerMeta(node=node)
