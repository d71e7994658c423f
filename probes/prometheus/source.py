"""A fleet as one SnapshotSource: every node's GPUs and servers, read from Prometheus.

Each refresh asks Prometheus three things at once: the active targets (health, last
scrape, scrape interval), one instant query for every DCGM field infertop maps, and one
for every server family the dialect tables know.  Raw values only, as from a direct
scrape: counters stay cumulative and histograms keep their buckets, so History derives
rates and windowed quantiles exactly as for one box, and a recording of a fleet replays
through today's rules.

Samples are named ``<source>@<node>`` (``nvml@node-03``, ``server:10.0.0.3:8000@node-03``,
``prometheus@node-03``) with ``meta["node"]``; ``infertop.fleet.split_nodes`` turns one
fleet Snapshot back into one ordinary Snapshot per node, which the six panes and every
rule read unchanged.  A node is the target label ``node`` when the targets carry one, else
the host part of ``instance`` (dcgm-exporter on :9400 and the server on :8000 of one host
are one node).

Prometheus refreshes a value once per scrape interval; asking more often re-reads the same
numbers, so the source re-queries at about half the shortest scrape interval and hands out
the previous answer in between (each value's age is ``node.scrape_age_seconds``).  A
refresh asks only for the series of targets scraped since the last one (an ``instance``
filter; all of them when nearly all changed) and keeps the rest, whose unchanged values map to
the very Samples of before (``SampleCache``), which the fleet pipeline does not re-feed.
The timing uses the target's lastScrape against this machine's clock: a skewed clock only
makes a target asked again (or, skewed the other way by more than a scrape, one scrape late).

All of the above is series mode.  While ``infertop rules export``'s rules are loaded in
Prometheus (``mode="auto"``), the source reads their alerts and what the screen shows,
computed there, instead (aggregate mode: ``aggregates.py``).
"""

from __future__ import annotations

import asyncio
import socket
import time
from dataclasses import replace
from typing import Any

from infertop.dcgm import DCGM_NAMES, families_from_series, gpu_readings
from infertop.dialects import GENERIC, readings_from_families
from infertop.meta import NvmlMeta, PrometheusMeta, ServerMeta
from infertop.model import Capability, Reading, Sample, Snapshot, Status, make_labels
from infertop.promql import re_literal
from infertop.servers import registry
from infertop.source import SnapshotSource

from .aggregates import ALERTS_SAMPLE, AggregateFetcher, RulesCheck, alerts_sample
from .client import PrometheusClient, PrometheusError, Target, clean_text

NODE_LABEL = "node"


def node_of(labels: dict[str, str]) -> str:
    """The node a series or target belongs to (see the module doc)."""
    node = labels.get(NODE_LABEL)
    if node:
        return node
    inst = labels.get("instance", "")
    if inst.startswith("["):
        return inst[1:].split("]", 1)[0]
    return inst.rsplit(":", 1)[0] if ":" in inst else inst


def server_name_regex() -> str:
    """Every family name a dialect table reads, with its exposition suffixes, as one RE2
    alternation (anchored by Prometheus): the query returns what infertop maps, nothing
    else, which keeps a 64-node answer small."""
    fams: set[str] = set()
    for d in registry.dialects().values():   # every server kind's table (infertop/servers)
        for rule in d.rules:
            fams.update(rule.families)
        fams.update(d.extra_families)   # what the dialect's extras read
    fams.update(f for rule in GENERIC for f in rule.families)
    parts = sorted(fams)
    return "|".join(f"{re_literal(f)}(_total|_bucket|_sum|_count)?" for f in parts)


class PrometheusSource(SnapshotSource):
    kind = "live"
    fleet = True   # the screen shows the fleet view (tui/modes.py FleetApp)

    def __init__(self, url: str, *, timeout: float = 5.0, refresh: float | None = None,
                 transport=None, max_bytes: int | None = None, mode: str = "auto",
                 rows: int = 8) -> None:
        kw = {"timeout": timeout, "transport": transport}
        if max_bytes:
            kw["max_bytes"] = max_bytes
        self.client = PrometheusClient(url, **kw)
        self.label = f"prometheus {self.client.base}"
        self.fixed_refresh = refresh
        self._server_query = f'{{__name__=~"{server_name_regex()}"}}'
        self._dcgm_query = f'{{__name__=~"{"|".join(DCGM_NAMES)}"}}'
        self._tick = 0
        self._last_fetch = 0.0
        self._cached: tuple[list[Target], list, list, dict[str, Sample]] | None = None
        self.capabilities: dict[str, Capability] = {}
        self.refresh_interval = refresh or 0.0   # learnt from the targets' scrape interval
        self.last_error = ""
        self.fetch_seconds = 0.0
        self.cache = SampleCache()
        self._by_instance: dict[str, tuple[list, list]] = {}   # instance -> (dcgm, server)
        self._seen: dict[str, float] = {}    # instance -> last scrape its series are from
        self.asked = 0                       # targets whose series the last fetch asked for
        self._retry_at = 0.0                 # after a failed fetch, not before this time
        # "series": every series, judged here; "aggregate": what the screen shows, computed
        # by Prometheus (aggregates.py); "auto": aggregate while the exported rules are loaded
        self.mode = mode
        self.mode_in_use = "series"
        self.rules = RulesCheck(node_of)
        self.aggregates = AggregateFetcher(rows, self._dcgm_query, self._server_query)
        self.pinned: set[str] = set()        # nodes read whole in aggregate mode (the open one)

    async def start(self) -> dict[str, Capability]:
        await self.client.open()
        return {}

    async def stop(self) -> None:
        await self.client.close()

    async def fetch(self) -> tuple[list[Target], list, list]:
        """Targets, then the DCGM and server series (two queries, concurrent) of only the
        targets Prometheus scraped since the last fetch; the others' series are the ones
        kept from before (their values cannot have changed).  When most targets changed,
        or at the first fetch, everything is asked for."""
        started = time.perf_counter()
        targets = await self.client.targets()
        now = time.time()
        scraped = {t.instance: t for t in targets}
        changed = [i for i, t in scraped.items()
                   if t.last_scrape is None or self._seen.get(i) != t.last_scrape]
        # at one refresh per half scrape interval about half the targets changed: filter
        # unless nearly all did (then the filter only lengthens the query)
        if not self._by_instance or len(changed) * 4 > len(scraped) * 3:
            dcgm, servers = await asyncio.gather(self.client.query(self._dcgm_query),
                                                 self.client.query(self._server_query))
            self._by_instance = {}
            asked = set(scraped)
        else:
            asked = set(changed)
            dcgm, servers = [], []
            if changed:
                # inside a PromQL string a regex backslash is written twice
                only = "|".join(re_literal(i).replace("\\", "\\\\") for i in sorted(changed))
                dcgm, servers = await asyncio.gather(
                    self.client.query(self._dcgm_query[:-1] + f',instance=~"{only}"}}'),
                    self.client.query(self._server_query[:-1] + f',instance=~"{only}"}}'))
        for inst in asked:
            self._by_instance[inst] = ([], [])
        for which, series in ((0, dcgm), (1, servers)):
            for labels, value in series:
                got = self._by_instance.setdefault(labels.get("instance", ""), ([], []))
                got[which].append((labels, value))
        for inst in [i for i in self._by_instance if i not in scraped]:
            del self._by_instance[inst]
        for inst in asked:
            t = scraped.get(inst)
            # a scrape that began moments ago may not be committed yet: ask again next time
            if t is not None and t.last_scrape is not None and \
                    now - t.last_scrape > (t.scrape_duration or 0.0) + 1.0:
                self._seen[inst] = t.last_scrape
            else:
                self._seen.pop(inst, None)
        self.asked = len(asked)
        self.fetch_seconds = time.perf_counter() - started
        dcgm_all = [x for d, _ in self._by_instance.values() for x in d]
        server_all = [x for _, sv in self._by_instance.values() for x in sv]
        return targets, dcgm_all, server_all

    async def next(self) -> Snapshot:
        self._tick += 1
        now = time.time()
        due = self._cached is None or now - self._last_fetch >= self.refresh_interval
        if due and now < self._retry_at:
            due = False   # it failed moments ago: say so again rather than wait again
        if due:
            try:
                self._cached = await self._read(now)
                self._last_fetch = now
                self.last_error = ""
                if self.fixed_refresh is None:
                    self.refresh_interval = _half_scrape(self._cached[0])
            except PrometheusError as e:
                self.last_error = str(e)
                # a hung Prometheus costs a timeout a try: not one per tick (a 6 s doctor
                # took 29 s), one per timeout
                self._retry_at = time.time() + self.client.timeout
                self._cached = None
                self._by_instance, self._seen = {}, {}   # start over when it answers
        if self._cached is None:
            s = Sample("prometheus", now, (), Status.ERROR, self.last_error,
                       PrometheusMeta(url=self.client.base))
            return Snapshot(now, {"prometheus": s}, self._tick,
                            {"prometheus": Capability("prometheus", False, self.last_error)})
        # mapping ~20k series takes a few hundred ms: in a thread, off the event loop
        samples = await asyncio.to_thread(build_samples, *self._cached[:3], now=now,
                                          cache=self.cache)
        # every target and series dropped (null or list labels), or none; aggregate mode's
        # rows are nodes too
        if not samples and not any("@" in n for n in self._cached[3]):
            why = (f"Prometheus at {self.client.base} answered {len(self._cached[0])} usable "
                   "targets and no usable series (labels must be strings)")
            samples = {"prometheus": Sample("prometheus", now, (), Status.ERROR, why,
                                            PrometheusMeta(url=self.client.base))}
        else:
            samples.update(self._cached[3])   # aggregate rows, overview, alerts: built already
        caps = {n: Capability(n, True) for n in samples}
        self.capabilities = caps
        return Snapshot(now, samples, self._tick, caps)

    async def _read(self, now: float) -> tuple[list[Target], list, list, dict[str, Sample]]:
        """One refresh in the mode in use; the alerts whenever the rules are loaded."""
        aggregate = self.mode == "aggregate" or (self.mode == "auto" and self.rules.loaded)
        if not aggregate:   # are the rules loaded now?  (then aggregates from this refresh)
            await self.rules.check(self.client, now)
            aggregate = self.mode == "auto" and self.rules.loaded
            checked = True
        else:
            checked = False   # asked below at once with the overview
        extra: dict[str, Sample] = {}
        if aggregate:
            self.mode_in_use = "aggregate"
            started = time.perf_counter()
            targets, dcgm, servers, extra = await self.aggregates.fetch(
                self.client, set(self.pinned), self.rules, not checked, now, node_of)
            self.fetch_seconds = time.perf_counter() - started
        else:
            self.mode_in_use = "series"
            targets, dcgm, servers = await self.fetch()
        extra[ALERTS_SAMPLE] = alerts_sample(self.rules.loaded, self.rules.alerts, now,
                                             self.rules.why)
        return targets, dcgm, servers, extra

    def describe(self) -> dict[str, Any]:
        return {"source": "prometheus", "label": self.label, "url": self.client.base,
                "host": socket.gethostname(), "fleet": True}


def _half_scrape(targets: list[Target]) -> float:
    ivals = [t.scrape_interval for t in targets if t.scrape_interval]
    return max(0.25, min(ivals) / 2) if ivals else 0.0


class SampleCache:
    """Prometheus answers the same values until it scrapes a target again: a node's group
    of series whose values did not change maps to the very Sample of last time (mapping a
    vLLM server's ~300 series is the costly part of a refresh), which also tells the fleet
    pipeline that the node has nothing new."""

    def __init__(self) -> None:
        self._by_group: dict[tuple, tuple[tuple, Sample]] = {}
        self.hits = self.misses = 0

    def get(self, group: tuple, series: list, make) -> Sample:
        fp = tuple(v for _, v in series)
        got = self._by_group.get(group)
        if got is not None and got[0] == fp:
            self.hits += 1
            return got[1]
        self.misses += 1
        s = make()
        self._by_group[group] = (fp, s)
        return s

    def keep_only(self, groups: set) -> None:
        for g in [g for g in self._by_group if g not in groups]:
            del self._by_group[g]


def build_samples(targets: list[Target], dcgm: list, servers: list, *,
                  now: float, cache: SampleCache | None = None) -> dict[str, Sample]:
    """One fleet tick's Samples from Prometheus's three answers (pure: tests call it)."""
    samples: dict[str, Sample] = {}
    cache = cache if cache is not None else SampleCache()
    by_instance = {t.instance: t for t in targets}
    # ---- GPUs: one "nvml" sample per node, from DCGM --------------------------------------
    per_node: dict[str, list] = {}
    dcgm_instances: dict[str, set[str]] = {}
    for labels, value in dcgm:
        node = node_of(labels)
        per_node.setdefault(node, []).append((labels, value))
        dcgm_instances.setdefault(node, set()).add(labels.get("instance", ""))
    for node, series in per_node.items():
        def gpu_sample(node=node, series=series) -> Sample:
            readings, meta = gpu_readings(series)
            meta = replace(meta, node=node, via="prometheus dcgm-exporter",
                           instances=tuple(sorted(dcgm_instances[node])))
            return Sample(f"nvml@{node}", now, tuple(readings), Status.OK, "", meta)
        samples[f"nvml@{node}"] = cache.get(("nvml", node), series, gpu_sample)
    # ---- servers: one "server:<instance>" sample per server target -----------------------
    per_server: dict[tuple[str, str], list] = {}
    for labels, value in servers:
        per_server.setdefault((node_of(labels), labels.get("instance", "")), []).append(
            (labels, value))
    for (node, inst), series in per_server.items():
        def server_sample(node=node, inst=inst, series=series) -> Sample:
            expo = readings_from_families(families_from_series(series), inst)
            t = by_instance.get(inst)
            meta = replace(expo.meta, node=node, url=t.url if t else "", via="prometheus")
            name = f"server:{inst}@{node}"
            return Sample(name, now, tuple(expo.readings), Status.OK, "", meta)
        samples[f"server:{inst}@{node}"] = cache.get(("server", node, inst), series,
                                                     server_sample)
    cache.keep_only({("nvml", n) for n in per_node} |
                    {("server", n, i) for n, i in per_server})
    # ---- every target: up and age; a failing server target is an ERROR sample ------------
    seen_instances = {i for _, i in per_server} | {i for s in dcgm_instances.values() for i in s}
    per_node_targets: dict[str, list[Reading]] = {}
    for t in targets:
        node = node_of(t.labels)
        if t.up and t.instance not in seen_instances:
            continue  # a healthy target that is neither a GPU nor a server (Prometheus itself)
        lab = make_labels(instance=t.instance, job=t.job)
        rs = per_node_targets.setdefault(node, [])
        why = "" if t.up else (f"Prometheus cannot scrape {t.instance} (job {t.job})"
                               + (f": {t.error}" if t.error else ""))
        rs.append(Reading("node.up", 1.0 if t.up else 0.0, "", lab, text=why or None))
        if t.last_scrape is not None:
            rs.append(Reading("node.scrape_age_seconds", max(0.0, now - t.last_scrape), "s",
                              lab))
        if not t.up:
            reason = (f"Prometheus cannot scrape {t.url or t.instance}: "
                      f"{t.error or 'target down'}")
            is_gpu = "dcgm" in t.job.lower() or t.instance.endswith(":9400")
            name = f"nvml@{node}" if is_gpu else f"server:{t.instance}@{node}"
            if name not in samples:
                meta = NvmlMeta(node=node, url=t.url, via="prometheus") if is_gpu else \
                    ServerMeta(node=node, url=t.url, via="prometheus")
                samples[name] = Sample(name, now, (), Status.ERROR, clean_text(reason), meta)
    for node, rs in per_node_targets.items():
        name = f"prometheus@{node}"
        samples[name] = Sample(name, now, tuple(rs), Status.OK, "", PrometheusMeta(node=node))
    return dict(sorted(samples.items()))
