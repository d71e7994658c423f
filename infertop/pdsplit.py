"""The split of TTFT across a disaggregated prefill/decode pair (derived, pure).

With disaggregated serving a request's first token waits on three things in turn: the
prefill instance (queue + prefill of the prompt; the router sends it there first with
max_tokens=1, so that instance's TTFT is the prefill side), the KV transfer to the decode
instance (vLLM's NIXL ``nixl_xfer_time_seconds``, SGLang's transfer histograms), and the
decode instance itself (its queue and first step).  The decode instance's own TTFT
includes the transfer: its request waits for the remote KV before it is scheduled
(vLLM's ``WAITING_FOR_REMOTE_KVS``), so the decode side is its TTFT less the transfer.

Why means, not percentiles: the three histograms have different bucket layouts (vLLM's
TTFT buckets against NIXL's transfer buckets), and percentiles do not add up in any case
(p99(a + b) is not p99(a) + p99(b)).  A mean over the window is sum / count of the
bucket deltas: exact whatever the buckets, and additive, which is what "the share of the
first token's wait" asks.  Each part that cannot be measured is a NODATA reading that
says why, never a zero: a pane that shows "prefill side: not measured (no prefill
instance read)" tells the truth, a 0 would not.

Output: ``pd.ttft_split_seconds`` per decode-instance TTFT series, label ``part``:
``prefill``, ``transfer``, ``decode``, ``total`` (the client's TTFT: the three together).
"""

from __future__ import annotations

from collections.abc import Iterable

from .history import History, Series
from .keys import SPECS
from .model import Labels, Reading, Status, make_labels

KEY = "pd.ttft_split_seconds"
PARTS = ("prefill", "transfer", "decode", "total")
ROLES = ("prefill", "decode")


def roles(history: History) -> dict[str, str]:
    """instance -> 'prefill' / 'decode' (/ 'both' / 'unified'): the server's own label
    (SGLang engine_type, the demo's per-instance role, a local --url's command line read
    by its server probe: probes/server/roles.py) or, with exactly one server
    instance in view, the command line's (vLLM --kv-transfer-config kv_role): a host-wide
    setting cannot say which of several instances it belongs to."""
    out: dict[str, str] = {}
    for s in history.find("server.disagg_role"):
        if s.text:
            out.setdefault(s.label("instance"), s.text)
    instances = {s.label("instance") for s in history.find("server.requests_running")} | \
        {s.label("instance") for s in history.find("latency.ttft_seconds")}
    instances.discard("")
    if len(instances) == 1:
        inst = next(iter(instances))
        if inst not in out:
            for s in history.find("server.setting", name="disagg_role"):
                if s.text:
                    out[inst] = s.text
    return out


def unknown_roles(history: History) -> dict[str, str]:
    """instance -> why its role is unknown (a server.disagg_role with no text: a remote
    vLLM in a P/D pair, whose page carries no role and whose command line is not here)."""
    return {s.label("instance"): s.reason for s in history.find("server.disagg_role")
            if not s.text and s.reason and s.label("instance")}


def _pooled_mean(series: Iterable[Series], window: float) -> tuple[float | None, float]:
    """(sum / count over the window of these histograms together, count)."""
    total = n = 0.0
    for s in series:
        d = s.hist_delta(window)
        if d is None or d.total <= 0:
            continue
        total += d.sum
        n += d.total
    return (total / n if n > 0 else None), n


def _r(labels: Labels, value: float | None, reason: str = "") -> Reading:
    spec = SPECS[KEY]
    status = Status.OK if value is not None else Status.NODATA
    return Reading(KEY, value, spec.unit, labels, status, reason if value is None else "",
                   spec.kind)


def derive_split(history: History, window: float) -> list[Reading]:
    """The split for every decode instance's TTFT series ([] with no P/D pair in view:
    no decode role and no KV-transfer histogram)."""
    role = roles(history)
    xfer = history.find("latency.kv_transfer_seconds")
    ttft = history.find("latency.ttft_seconds")
    # the decode side: a decode role, or an instance that receives KV (a transfer
    # histogram) and is not a prefill instance
    decode = {i for i, r in role.items() if r == "decode"} | \
        {s.label("instance") for s in xfer if role.get(s.label("instance")) != "prefill"}
    if not decode:
        return []
    prefill = sorted(i for i, r in role.items() if r == "prefill")
    # instances whose role is unknown (remote): why the prefill side is not measured
    unknown_all = {} if prefill else \
        {i: why for i, why in unknown_roles(history).items() if i not in role}
    out: list[Reading] = []
    for s in ttft:
        inst = s.label("instance")
        if inst not in decode:
            continue
        base = s.labels
        pl = make_labels(base, prefill=",".join(prefill)) if prefill else base
        d_mean, _ = _pooled_mean((s,), window)
        if d_mean is None:
            why = "no first token on this decode instance in the window"
            out += [_r(make_labels(pl, part=p), None, why) for p in PARTS]
            continue
        # the transfer: this engine's histogram, else the instance's, else (SGLang may
        # count it on the sender) the prefill instances'
        mine = [x for x in xfer if x.labels == base] or \
            [x for x in xfer if x.label("instance") == inst] or \
            [x for x in xfer if x.label("instance") in prefill]
        t_mean, _ = _pooled_mean(mine, window)
        model = s.label("model")
        p_series = [x for x in ttft if x.label("instance") in prefill
                    and (not model or not x.label("model") or x.label("model") == model)]
        p_mean, _ = _pooled_mean(p_series, window)

        unknown = {i: why for i, why in unknown_all.items() if i != inst}
        if not prefill and unknown:
            other = sorted(unknown)[0]
            p_why = f"not measured: {other}'s {unknown[other]}"
        elif not prefill:
            p_why = ("not measured: no prefill instance in view (its TTFT is the prefill "
                     "side; add its /metrics with --url)")
        elif p_mean is None:
            p_why = "not measured: the prefill instance read no first token in the window"
        else:
            p_why = ""
        out.append(_r(make_labels(pl, part="prefill"), p_mean, p_why))
        if t_mean is None:
            why = ("not measured: no KV-transfer histogram (vLLM nixl_xfer_time_seconds, "
                   "SGLang kv_transfer_latency_ms) with observations in the window")
            out.append(_r(make_labels(pl, part="transfer"), None, why))
            out.append(_r(make_labels(pl, part="decode"), None,
                          "not split: the decode instance's TTFT includes the transfer, "
                          "which is not measured"))
            dec = None
        else:
            out.append(_r(make_labels(pl, part="transfer"), t_mean))
            dec = d_mean - t_mean
            if dec < 0:
                out.append(_r(make_labels(pl, part="decode"), None,
                              f"not split: the mean transfer ({t_mean:.3g} s) exceeds the "
                              f"decode instance's mean TTFT ({d_mean:.3g} s): transfers "
                              "overlap time outside its TTFT"))
                dec = None
            else:
                out.append(_r(make_labels(pl, part="decode"), dec))
        missing = [name for name, v in (("prefill", p_mean), ("transfer", t_mean),
                                        ("decode", dec)) if v is None]
        if p_mean is not None and t_mean is not None and dec is not None:
            out.append(_r(make_labels(pl, part="total"), p_mean + t_mean + dec))
        else:
            out.append(_r(make_labels(pl, part="total"), None,
                          f"not measured: the {' and '.join(missing)} part"
                          f"{'s are' if len(missing) > 1 else ' is'} not"))
    return out

