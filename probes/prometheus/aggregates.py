"""What the fleet screen shows, computed by Prometheus: the worst nodes, quantiles, counts.

Fetching every node's series costs infertop in proportion to the fleet (64 nodes x 8 GPUs:
~20k series a refresh).  The screen shows a few dozen rows: the worst nodes by each
column.  So in aggregate mode Prometheus computes, in one instant query, for each column
of the engines table the ``topk`` nodes (``max by (node, instance)`` of the same
quantity infertop derives), the fleet's quantiles of it, and the counts (nodes, targets,
targets down, GPUs); a second round asks the shown nodes' values of every column and
their GPUs' DCGM fields (a filter on those nodes).  What infertop receives grows with the
number of rows shown, not with the fleet.

The quantities are ``infertop rules export``'s recording rules (``infertop:kv_usage:ratio``,
``infertop:ttft_seconds:p99_60s`` ...): read by name when the exported rules are loaded,
else their expressions inlined (``inline``), the same definitions either way.

Judging: when the exported alerting rules are loaded (their group ``infertop-findings`` is
in ``/api/v1/rules``), the source also reads their active alerts, firing and pending, from
the rules API (it carries the annotations: title, value against threshold, remedy, which
the ``ALERTS`` series do not) and hands them on as one ``prometheus-alerts`` sample;
``alert_findings`` turns them into findings per node, labelled as Prometheus's.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from typing import Any

import msgspec

# the fleet-wide samples (no @node): the alerts; the quantiles and counts
from infertop.fleet import AGGREGATES_SAMPLE, ALERTS_SAMPLE
from infertop.keys import SPECS
from infertop.meta import AlertsMeta, FleetOverviewMeta, ServerMeta
from infertop.model import Reading, Sample, Status, make_labels
from infertop.textclean import one_line

VIA_AGGREGATES = "prometheus aggregates"   # meta["via"] of a node sample built from them

MAX_ALERTS = 5000        # alerts read from one rules answer (a storm is still bounded)
KEY_LABEL = "infertop_key"
Q_LABEL = "infertop_q"
QUANTILES = (0.5, 0.99)                   # the summary line's p50/p99 across nodes
# of these columns only: each quantile is one more evaluation over the fleet (at 512 nodes
# the GPUs' quantiles, over 4096 series each, were most of the overview's 240 ms of
# Prometheus CPU, for numbers the screen did not show)
QUANTILE_COLUMNS = ("kv", "ttft_p99", "itl_p50")

# engines-table column -> (recording rule or expression, reading key, unit (as the key's
# spec), extra labels, how one node's series combine).  ``tok_s`` has no recording rule:
# its rate is generated (``_tok``) from every kind's dialect over the recording rules'
# window in force (``rate_window``: 60 s unless the export was made with another);
# ``_TOK`` stands for it in the table.
_TOK = "<generated: rate of server.generation_tokens_total>"


def _tok(matcher: str, window: str = "60s") -> str:
    """The generation token rate of every kind over ``window`` (a PromQL duration), each
    from its own dialect's series for ``server.generation_tokens_total`` (as promrules
    writes the recording rules), so a new kind's tokens/s column fills without an edit
    here.  Made once per node matcher, window and set of kinds (the fleet asks every
    refresh; a plug-in may add a kind)."""
    from infertop.servers import registry
    return _tok_of(matcher, window, tuple(registry.names()))


@functools.lru_cache(maxsize=64)
def _tok_of(matcher: str, window: str, kinds: tuple[str, ...]) -> str:
    from infertop.promrules import union
    return union("server.generation_tokens_total",
                 lambda r: f"rate({r.selector(matcher)}[{window}])").replace("\n  or ", " or ")


SERVER_KEYS: dict[str, tuple[str, str, str, tuple[tuple[str, str], ...], str]] = {
    "kv": ("infertop:kv_usage:ratio", "kv.usage_ratio", "ratio", (), "max"),
    "ttft_p99": ("infertop:ttft_seconds:p99_60s", "latency.ttft_seconds", "s",
                 (("quantile", "0.99"),), "max"),
    "itl_p50": ("infertop:itl_seconds:p50_60s", "latency.itl_seconds", "s",
                (("quantile", "0.5"),), "max"),
    "running": ("infertop:requests_running:count", "server.requests_running", "count", (),
                "sum"),
    "waiting": ("infertop:requests_waiting:count", "server.requests_waiting", "count", (),
                "sum"),
    "tok_s": (_TOK, "throughput.generation_tokens_per_second", "tokens/s", (), "sum"),
    "errors": ("infertop:error:ratio60s", "server.error_ratio", "ratio", (), "max"),
}
# the GPU fields of the shown nodes (the GPU table: per-GPU util/SM, memory, temp, power)
GPU_FIELDS = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_FB_USED",
              "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE")


_WINDOWED = re.compile(r"^(infertop:[a-zA-Z0-9_:]+?)(\d+m?s)$")


def column_names(recorded: frozenset[str] | None) -> dict[str, str | None]:
    """Column -> the recording rule to read for it, from the names Prometheus has loaded
    in the export's recording group: the windowed ones under the window in force (an
    export made with ``--config`` ``window = 120`` records ``infertop:ttft_seconds:p99_120s``,
    not ``..._60s``); None when none is loaded (the column is then computed from the raw
    series, never left blank).  ``recorded`` None (the group is not listed): the defaults."""
    out: dict[str, str | None] = {}
    for col, (expr, *_rest) in SERVER_KEYS.items():
        if expr is _TOK:
            continue
        if recorded is None or expr in recorded:
            out[col] = expr
            continue
        m = _WINDOWED.match(expr)
        got = sorted(n for n in recorded if m and n.startswith(m.group(1))
                     and re.fullmatch(r"\d+m?s", n[len(m.group(1)):]))
        out[col] = got[0] if len(got) == 1 else None
    return out


def rate_window(names: dict[str, str | None] | None) -> str:
    """The window in force of the exported recording rules, as a PromQL duration: the
    suffix of the loaded windowed rule of TTFT, ITL or errors (``..._p99_120s``: ``120s``;
    the export writes them all over ``diagnosis.window``), so the generated tokens/s rate
    covers the span the other columns do.  None of them loaded (or ``names`` unknown): the
    default recordings' window, which is what the columns computed from the raw series
    use."""
    default = ""
    for col in ("ttft_p99", "itl_p50", "errors"):
        m = _WINDOWED.match(SERVER_KEYS[col][0])
        if m is None:
            continue
        default = default or m.group(2)
        got = (names or {}).get(col)
        if got is not None and got.startswith(m.group(1)):
            return got[len(m.group(1)):]
    return default


def recorded_names(data: Any, group: str) -> frozenset[str] | None:
    """The record names of ``group`` in a ``/api/v1/rules`` answer; None when the answer
    does not list the group (filtered to alerts, or a Prometheus without it)."""
    if not isinstance(data, RulesData):
        try:
            data = rules_data(data)
        except ValueError:
            return None
    for g in data.groups:
        if g.name == group:
            return frozenset(r.name for r in g.rules
                             if isinstance(r.name, str) and len(r.name) <= 200)
    return None


@functools.cache
def _recordings() -> dict[str, str]:
    from infertop.promrules import build
    return {r.record: r.expr for r in build().recordings}


_RECORD = re.compile(r"infertop:[a-zA-Z0-9_:]+")


def inline(expr: str) -> str:
    """``expr`` with every recording rule it names replaced by its expression (recursively),
    for a Prometheus that has not loaded the export.  A record used under a range or an
    ``offset`` cannot be inlined (PromQL would need a subquery): ValueError."""
    recs = _recordings()

    def sub(m: re.Match) -> str:
        name = m.group(0)
        if name not in recs:
            return name
        after = expr[m.end():m.end() + 8].lstrip()
        if after.startswith("[") or after.startswith("offset"):
            raise ValueError(f"{name} is used under a range or offset: not inlinable")
        return f"({inline(recs[name])})"
    return _RECORD.sub(sub, expr)


def per_node(column: str, records: bool, matcher: str = "",
             names: dict[str, str | None] | None = None) -> str:
    """One column's value per node and server (``node, instance``): a node whose server has
    several series (engines, tp ranks) is its worst (or, for counts, their sum).
    ``matcher`` (records only) selects the nodes at the source: Prometheus reads those
    nodes' series alone.  ``names``: the recording rules loaded (``column_names``); a
    column without one is computed from the raw series, as without the rules."""
    expr, _key, _unit, _labels, how = SERVER_KEYS[column]
    sel = f"{{{matcher}}}" if matcher else ""
    name = expr if names is None else names.get(column, expr)
    if expr is _TOK:
        expr = _tok(matcher, rate_window(names if records else None))
    elif records and name is not None:
        expr = name + sel
    else:
        expr = inline(expr)
    return f"{how} by (node, instance) ({expr})"


def _tag(expr: str, key: str, q: float | None = None) -> str:
    out = f'label_replace({expr}, "{KEY_LABEL}", "{key}", "", "")'
    if q is not None:
        out = f'label_replace({out}, "{Q_LABEL}", "{q:g}", "", "")'
    return out


def overview_query(k: int, records: bool, names: dict[str, str | None] | None = None) -> str:
    """One instant query: per column the ``k`` worst nodes and the fleet's quantiles (of
    ``QUANTILE_COLUMNS``); the counts; up to ``k`` targets down.  Every part is tagged with
    ``infertop_key`` (and ``infertop_q``) so one answer carries them all."""
    parts = []
    for col in SERVER_KEYS:
        e = per_node(col, records, names=names)
        parts.append(_tag(f"topk({k}, {e})", col))
        if col in QUANTILE_COLUMNS:
            parts += [_tag(f"quantile({q:g}, {e})", col, q) for q in QUANTILES]
    host = 'label_replace(up, "infertop_host", "$1", "instance", "(.*):[0-9]+")'
    parts += [_tag(f"count(count by (node, infertop_host) ({host}))", "nodes"),
              _tag("count(up)", "targets"),
              _tag("count(up == 0) or vector(0)", "targets_down"),
              _tag("count(DCGM_FI_DEV_GPU_UTIL)", "gpus"),
              _tag(f"bottomk({k}, up) == 0", "down")]
    return " or ".join(parts)


def node_matcher(nodes: dict[str, bool]) -> str:
    """A label matcher for these nodes: ``node=~"a|b"`` for nodes named by a ``node`` label
    (value True), ``instance=~"(h1|h2)(:.*)?"`` for nodes that are an instance's host."""
    from infertop.promql import re_literal
    labelled = sorted(n for n, by_label in nodes.items() if by_label)
    hosts = sorted(n for n, by_label in nodes.items() if not by_label)

    def alt(names: list[str]) -> str:
        return "|".join(re_literal(n).replace("\\", "\\\\") for n in names)
    out = []
    if labelled:
        out.append(f'node=~"{alt(labelled)}"')
    if hosts:
        out.append(f'instance=~"({alt(hosts)})(:.*)?"')
    return ", ".join(out)


def rows_queries(nodes: dict[str, bool], records: bool,
                 names: dict[str, str | None] | None = None) -> dict[str, str]:
    """The shown nodes' values of every column, their GPUs' fields and their targets'
    health and last scrape (one query each; several matchers are asked as an ``or``)."""
    matchers = []
    labelled: dict[str, bool] = {n: v for n, v in nodes.items() if v}
    hosts: dict[str, bool] = {n: v for n, v in nodes.items() if not v}
    for part in (labelled, hosts):
        if part:
            matchers.append(node_matcher(part))
    if not matchers:
        return {}

    def each(fmt: str) -> str:
        return " or ".join(fmt.format(m=m) for m in matchers)
    up = each("up{{{m}}}")
    if records:   # the recording rules' series of the shown nodes alone (a column whose
        # rule is not loaded: computed for all, kept for the shown nodes)
        missing = [c for c in SERVER_KEYS if names is not None and c in names
                   and names[c] is None]
        values = " or ".join(
            [_tag(per_node(col, True, m, names), col)
             for col in SERVER_KEYS if col not in missing for m in matchers]
            + [_tag(f"({per_node(col, False)}) and on (instance) ({up})", col)
               for col in missing])
    else:         # inlined expressions: computed for all, kept for the shown nodes
        values = " or ".join(
            _tag(f"({per_node(col, False)}) and on (instance) ({up})", col)
            for col in SERVER_KEYS)
    # the model a server serves (vLLM/TRT-LLM: model_name; SGLang/TGI/llama.cpp: model)
    running = SERVER_KEYS["running"][0]
    model = (" or ".join(f"group by (node, instance, model_name, model) ({running}{{{m}}})"
                         for m in matchers) if records else
             f"group by (node, instance, model_name, model) ({inline(running)}) "
             f"and on (instance) ({up})")
    gpus = each('{{__name__=~"' + "|".join(GPU_FIELDS) + '", {m}}}')
    seen = each("timestamp(up{{{m}}})")
    took = each("scrape_duration_seconds{{{m}}}")
    return {"values": values, "model": model, "gpus": gpus, "up": up, "seen": seen,
            "took": took}


@dataclass
class Overview:
    """The overview query's answer, sorted out."""

    worst: dict[str, list[tuple[dict[str, str], float]]] = field(default_factory=dict)
    quantiles: dict[str, dict[str, float]] = field(default_factory=dict)   # key -> q -> v
    counts: dict[str, float] = field(default_factory=dict)
    down: list[dict[str, str]] = field(default_factory=list)

    @classmethod
    def parse(cls, series: list[tuple[dict[str, str], float]]) -> Overview:
        out = cls()
        for labels, value in series:
            key = labels.get(KEY_LABEL, "")
            q = labels.get(Q_LABEL)
            rest = {k: v for k, v in labels.items() if k not in (KEY_LABEL, Q_LABEL)}
            if math.isnan(value) and key != "down":
                continue   # NaN: a quantile of an empty window, 0/0: says nothing
            if q is not None:
                out.quantiles.setdefault(key, {})[q] = value
            elif key in SERVER_KEYS:
                out.worst.setdefault(key, []).append((rest, value))
            elif key == "down":
                out.down.append(rest)
            elif key:
                out.counts[key] = value
        return out


def shown_nodes(ov: Overview, alerts: list[dict], pinned: set[str], k: int,
                node_of, known: dict[str, bool] | None = None) -> dict[str, bool]:
    """node -> named by a ``node`` label: the worst by each column, up to ``k`` nodes with
    alerts (critical first) and ``k`` down, and the pinned ones (the open node's: named as
    ``known`` saw it last, else by label)."""
    out: dict[str, bool] = {}

    def add(labels: dict[str, str]) -> None:
        node = node_of(labels)
        if node and node not in out:
            out[node] = bool(labels.get("node"))
    for rows in ov.worst.values():
        for labels, _ in rows:
            add(labels)
    for labels in ov.down[:k]:
        add(labels)
    ranked = sorted(alerts, key=lambda a: (a.get("labels", {}).get("severity") != "crit",
                                           a.get("state") != "firing"))
    added = 0
    for a in ranked:
        if added >= k:
            break
        before = len(out)
        add(a.get("labels", {}))
        added += len(out) - before
    for node in sorted(pinned):
        out.setdefault(node, (known or {}).get(node, True))
    return out


def aggregate_samples(rows: dict[str, list], node_of, now: float) -> dict[str, Sample]:
    """The shown nodes' ``server:<instance>@<node>`` samples from the values query (the
    readings the engines table reads, computed by Prometheus); the GPUs are mapped by the
    caller through ``build_samples`` as from any DCGM answer."""
    per_server: dict[tuple[str, str], list[Reading]] = {}
    models: dict[str, str] = {}
    for labels, _ in rows.get("model", ()):
        models[labels.get("instance", "")] = labels.get("model_name") or labels.get("model", "")
    for labels, value in rows.get("values", ()):
        col = labels.get(KEY_LABEL, "")
        if col not in SERVER_KEYS:
            continue
        _expr, key, _unit, extra, _how = SERVER_KEYS[col]
        unit = SPECS[key].unit    # the unit the screen and a recording expect of the key
        node, inst = node_of(labels), labels.get("instance", "")
        lab = make_labels(dict(extra)) if extra else ()
        ok = math.isfinite(value)
        per_server.setdefault((node, inst), []).append(Reading(
            key, value if ok else None, unit, lab, Status.OK if ok else Status.NODATA,
            "" if ok else "no value in the window"))
    out = {}
    for (node, inst), readings in per_server.items():
        name = f"server:{inst}@{node}"
        out[name] = Sample(name, now, tuple(readings), Status.OK, "",
                           ServerMeta(node=node, via=VIA_AGGREGATES, model=models.get(inst, "")))
    return out


# ---- the exported alerting rules, as Prometheus evaluates them -----------------------------
class _Rule(msgspec.Struct):
    alerts: list[Any] = []     # each alert checked by _alert: a bad one is skipped alone
    # a recording rule's name (recorded_names) and an alert's for: in seconds; checked
    # where read, so one odd rule is skipped alone
    name: Any = None
    duration: Any = None


class _Group(msgspec.Struct):
    name: str = ""
    rules: list[_Rule] = []


class RulesData(msgspec.Struct):
    """``/api/v1/rules``'s data, typed: ``"rules": 5`` or ``"alerts": 5`` (case 7) are
    refused with one line instead of a TypeError in whoever iterates them."""

    groups: list[_Group]


def rules_data(data: Any) -> RulesData:
    """Already-parsed rules data (a test, a recording) as RulesData; ValueError (one line)
    when it is not that shape."""
    try:
        return msgspec.convert(data, RulesData)
    except (msgspec.ValidationError, RecursionError) as e:
        raise ValueError(f"not a rules answer: {one_line(e, 160)}") from None


def alerting_groups(data: Any, group: str, node_of) -> tuple[bool, list[dict]]:
    """From ``/api/v1/rules?type=alert``'s data (RulesData, or plain values checked into
    it): whether ``group`` is loaded, and its active alerts (labels, annotations, state,
    activeAt, value, the node), cleaned and capped.  Not that shape: (False, [])."""
    if not isinstance(data, RulesData):
        try:
            data = rules_data(data)
        except ValueError:
            return False, []
    loaded = False
    alerts: list[dict] = []
    for g in data.groups:
        if g.name != group:
            continue
        loaded = True
        for rule in g.rules:
            for a in rule.alerts:
                if len(alerts) >= MAX_ALERTS:
                    break
                got = _alert(a)
                if got is not None:
                    got["node"] = node_of(got["labels"])
                    hold = rule.duration   # the rule's for: (raised = activeAt + for)
                    if isinstance(hold, (int, float)) and not isinstance(hold, bool) \
                            and math.isfinite(hold) and hold >= 0:
                        got["for_s"] = float(hold)
                    alerts.append(got)
    return loaded, alerts


def _alert(a: Any) -> dict | None:
    """One active alert of /api/v1/rules, checked; None when it is not one.  Its labels
    are checked as every series' (checked_labels: strings only, capped and cleaned, as
    they reach the screen): an alert with a label that is not a string is no alert."""
    from .client import _rfc3339, checked_labels
    if not isinstance(a, dict):
        return None
    labels = checked_labels(a.get("labels"), True)
    got = a.get("annotations")
    notes: dict = got if isinstance(got, dict) else {}
    state = a.get("state") if a.get("state") in ("firing", "pending") else None
    if state is None or labels is None or not labels.get("alertname"):
        return None
    value: float | None
    try:
        value = float(a.get("value"))  # type: ignore[arg-type]  # hostile: any JSON
    except (TypeError, ValueError, OverflowError):
        value = None
    if value is not None and not math.isfinite(value):
        value = None    # recordings keep this dict; their writer refuses NaN and inf
    return {"labels": labels, "state": state, "value": value,
            "active_at": _rfc3339(a.get("activeAt")),
            "annotations": {k: one_line(v, 300) for k, v in notes.items()
                            if isinstance(k, str) and isinstance(v, str)}}


def alerts_sample(loaded: bool, alerts: list[dict], now: float, why: str = "") -> Sample:
    """The alerts as one fleet-wide sample (``meta``: loaded, alerts); recordings keep it."""
    return Sample(ALERTS_SAMPLE, now, (), Status.OK, "",
                  AlertsMeta(loaded=loaded, alerts=tuple(alerts), why=why))


def overview_sample(ov: Overview, now: float, meta: FleetOverviewMeta) -> Sample:
    """Fleet-wide counts and quantiles (the header and summary line); ``meta``: the mode,
    how many nodes are shown, which in detail."""
    rs = [Reading(f"fleet.{k}", v, "") for k, v in sorted(ov.counts.items())
          if math.isfinite(v)]
    for key, qs in sorted(ov.quantiles.items()):
        for q, v in sorted(qs.items()):
            rs.append(Reading(f"fleet.{key}", v, "", make_labels(quantile=q)))
    return Sample(AGGREGATES_SAMPLE, now, tuple(rs), Status.OK, "", meta)


# ---- one refresh in aggregate mode ------------------------------------------------------------
class RulesCheck:
    """Whether the exported alerting rules are loaded, and their active alerts.  Asked every
    refresh while they are loaded; while they are not, again every ``recheck`` seconds (a
    Prometheus without a rules API, or without the rules, costs one request then)."""

    def __init__(self, node_of, recheck: float = 30.0) -> None:
        from infertop.promrules import ALERTING_GROUP
        self.group = ALERTING_GROUP
        self.node_of = node_of
        self.recheck = recheck
        from infertop.promrules import RECORDING_GROUP
        self.record_group = RECORDING_GROUP
        self.loaded = False
        self.alerts: list[dict] = []
        self.why = "not asked yet"
        # column -> the recording rule loaded for the window in force (None: not loaded)
        self.names: dict[str, str | None] | None = None
        self._next = 0.0

    async def check(self, client, now: float) -> tuple[bool, list[dict]]:
        from .client import PrometheusError, PrometheusUnreachable
        if not self.loaded and now < self._next:
            return self.loaded, self.alerts
        try:
            # both groups: the alerts, and the recording rules' names for the window
            data = await client.get("/api/v1/rules", {}, into=RulesData)
        except PrometheusUnreachable:
            raise                                  # Prometheus itself is down: the fleet error
        except PrometheusError as e:               # no rules API (an old or foreign server)
            self.loaded, self.alerts, self.why = False, [], str(e)
        else:
            self.loaded, self.alerts = alerting_groups(data, self.group, self.node_of)
            self.names = column_names(recorded_names(data, self.record_group))
            self.why = "" if self.loaded else (
                f"the rule group {self.group} is not loaded (infertop rules export)")
            absent = sorted(c for c, n in self.names.items() if n is None)
            if self.loaded and absent:   # said, not blank: computed from the raw series
                self.why = (f"recording rules of {self.record_group} not loaded for "
                            f"{', '.join(absent)}: computed from the raw series")
        self._next = now + self.recheck
        return self.loaded, self.alerts


class AggregateFetcher:
    """One aggregate-mode refresh: the overview (one query), then the shown nodes' rows
    (values, model, GPUs, targets: concurrent queries) and the pinned nodes' full series
    (the open node's six panes need them).  Returns what ``build_samples`` takes, plus the
    samples it cannot build (the rows' server samples, the overview)."""

    TARGETS_EVERY = 300.0   # the scrape interval, from /api/v1/targets (O(fleet)): rarely

    def __init__(self, rows: int, dcgm_query: str, server_query: str) -> None:
        self.rows = rows
        self.dcgm_query, self.server_query = dcgm_query, server_query
        self.interval: float | None = None
        self._interval_at = -math.inf
        self.shown = 0
        self._named: dict[str, bool] = {}   # node -> named by a label (else a host)

    async def fetch(self, client, pinned: set[str], rules: RulesCheck, check: bool,
                    now: float, node_of) -> tuple[list, list, list, dict[str, Sample]]:
        """``check``: ask the rules API too, at once with the overview (which reads the
        recording rules when they were loaded at the last check)."""
        import asyncio

        from .client import Target
        if now - self._interval_at >= self.TARGETS_EVERY:
            self._interval_at = now
            ivals = [t.scrape_interval for t in await client.targets() if t.scrape_interval]
            self.interval = min(ivals) if ivals else None
        ask = client.query(overview_query(self.rows, rules.loaded, rules.names))
        if check:
            _, series = await asyncio.gather(rules.check(client, now), ask)
        else:
            series = await ask
        ov = Overview.parse(series)
        records, alerts = rules.loaded, rules.alerts
        shown = shown_nodes(ov, alerts, pinned, self.rows, node_of, self._named)
        self._named.update(shown)
        if len(self._named) > 100_000:   # bounded: a fleet that keeps renaming its nodes
            self._named = dict(shown)
        self.shown = len(shown)
        rows = rows_queries({n: v for n, v in shown.items() if n not in pinned}, records,
                            rules.names)
        detail = {n: v for n, v in shown.items() if n in pinned}
        asks = dict(rows)
        if detail:
            m = node_matcher(detail)
            asks["detail_dcgm"] = self.dcgm_query[:-1] + f", {m}}}"
            asks["detail_server"] = self.server_query[:-1] + f", {m}}}"
            asks["detail_up"] = f"up{{{m}}}"
            asks["detail_seen"] = f"timestamp(up{{{m}}})"
        names = list(asks)
        got = dict(zip(names, await asyncio.gather(*(client.query(asks[n]) for n in names))))
        seen = {lab.get("instance", ""): v for lab, v in
                got.get("seen", []) + got.get("detail_seen", [])}
        took = {lab.get("instance", ""): v for lab, v in got.get("took", [])}
        targets = [Target(lab.get("instance", ""), lab.get("job", ""),
                          {k: v for k, v in lab.items() if k != "__name__"}, v == 1.0,
                          seen.get(lab.get("instance", "")), self.interval,
                          "" if v == 1.0 else "up == 0 in Prometheus", "",
                          took.get(lab.get("instance", "")))
                   for lab, v in got.get("up", []) + got.get("detail_up", [])]
        dcgm = got.get("gpus", []) + got.get("detail_dcgm", [])
        extra = aggregate_samples(got, node_of, now)
        extra[AGGREGATES_SAMPLE] = overview_sample(
            ov, now, FleetOverviewMeta(mode="aggregate", shown=len(shown),
                                       detail=tuple(sorted(detail)), rows_per_column=self.rows))
        return targets, dcgm, got.get("detail_server", []), extra
