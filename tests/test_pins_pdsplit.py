"""infertop/pdsplit.py pinned part by part (tools/mutate.py, issue 31 item 8): which
instance is which side, which transfer histogram counts for a decode engine, the means
over the window, and the reason each unmeasured part gives.  History is filled directly
(two scrapes ten seconds apart), no pipeline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from helpers.rulekit import Hist, HistValue, make_reading
from infertop.history import History
from infertop.model import Reading, Status, make_labels
from infertop.pdsplit import KEY, derive_split, roles, unknown_roles

P, D = "p:8000", "d:8000"
TTFT, XFER = "latency.ttft_seconds", "latency.kv_transfer_seconds"


def _lab(spec: str) -> tuple[tuple[str, str], ...]:
    return make_labels(dict(p.split("=", 1) for p in spec.split(","))) if spec else ()


def _info(key: str, labels: str, text: str, reason: str = "") -> Reading:
    r = make_reading(key, _lab(labels), text)
    if not text:   # a role that is not known: no text, a reason
        r = Reading(key, None, r.unit, r.labels, Status.NODATA, reason, r.kind)
    return r


def _hists(means: Mapping[tuple[str, str], tuple[float, float]]) -> dict[tuple[str, str], list]:
    """(key, labels) -> (mean, observations in the window): two cumulative values, the
    second after the window's observations."""
    out = {}
    for sid, (mean, n) in means.items():
        h = Hist()
        h.observe(5.0, 3)   # before the window: the baseline is not part of the mean
        first = h.value()
        if n:
            h.observe(mean, n)
        out[sid] = [first, h.value()]
    return out


def _history(means: Mapping[tuple[str, str], tuple[float, float]],
             infos: Sequence[Reading] = (), running: tuple[str, ...] = ()) -> History:
    h = History()
    series = _hists(means)
    for i, t in enumerate((1000.0, 1010.0)):
        rs = [make_reading(key, _lab(lab), vals[i]) for (key, lab), vals in series.items()]
        rs += [make_reading("server.requests_running", _lab(lab), 1.0) for lab in running]
        h.add_readings(t, [*rs, *infos])
    return h


def _split(h: History) -> dict[str, Reading]:
    out = {}
    for r in derive_split(h, 60.0):
        assert r.key == KEY
        out[r.label("part")] = r
    return out


ROLES = [_info("server.disagg_role", f"instance={P}", "prefill"),
         _info("server.disagg_role", f"instance={D}", "decode")]


# ---- roles -------------------------------------------------------------------------------
def test_roles_come_from_the_servers_label_and_the_single_instances_command_line() -> None:
    h = _history({}, [*ROLES, _info("server.disagg_role", "instance=x:1", "")])
    assert roles(h) == {P: "prefill", D: "decode"}
    # one instance in view: its command line's setting gives its role
    one = _history({(TTFT, f"instance={D}"): (1.0, 4)},
                   [_info("server.setting", "name=disagg_role", "decode")])
    assert roles(one) == {D: "decode"}
    # two instances: a host-wide setting cannot say whose it is
    two = _history({}, [_info("server.setting", "name=disagg_role", "decode")],
                   running=(f"instance={P}", f"instance={D}"))
    assert roles(two) == {}
    # the server's own label wins over the command line's
    own = _history({}, [_info("server.disagg_role", f"instance={D}", "decode"),
                        _info("server.setting", "name=disagg_role", "prefill")],
                   running=(f"instance={D}",))
    assert roles(own) == {D: "decode"}


def test_an_unknown_role_keeps_its_reason() -> None:
    h = _history({}, [_info("server.disagg_role", f"instance={P}", "", "remote: no cmdline"),
                      _info("server.disagg_role", f"instance={D}", "decode")])
    assert unknown_roles(h) == {P: "remote: no cmdline"}


# ---- the split ----------------------------------------------------------------------------
def test_no_decode_side_no_split() -> None:
    assert derive_split(_history({(TTFT, f"instance={P}"): (0.5, 4)}), 60.0) == []
    # a prefill instance that observes transfers is not a decode side either
    h = _history({(TTFT, f"instance={P}"): (0.5, 4), (XFER, f"instance={P}"): (0.1, 4)},
                 [ROLES[0]])
    assert derive_split(h, 60.0) == []


def test_the_three_parts_of_a_pair_add_up_to_the_total() -> None:
    h = _history({(TTFT, f"instance={P},model=m"): (0.5, 4),
                  (TTFT, f"instance={D},model=m"): (1.0, 4),
                  (XFER, f"instance={D},model=m"): (0.25, 4)}, ROLES)
    got = _split(h)
    assert got["prefill"].value == pytest.approx(0.5)
    assert got["transfer"].value == pytest.approx(0.25)
    assert got["decode"].value == pytest.approx(0.75)
    assert got["total"].value == pytest.approx(1.5)
    assert all(r.ok and r.reason == "" for r in got.values())
    assert got["total"].label("prefill") == P and got["total"].label("instance") == D


def test_a_single_observation_in_the_window_is_a_mean() -> None:
    h = _history({(TTFT, f"instance={P}"): (0.5, 1), (TTFT, f"instance={D}"): (1.0, 1),
                  (XFER, f"instance={D}"): (0.25, 1)}, ROLES)
    assert _split(h)["total"].value == pytest.approx(1.5)


def test_the_prefill_side_is_the_same_models_ttft() -> None:
    h = _history({(TTFT, f"instance={P},model=m"): (0.5, 4),
                  (TTFT, f"instance={P},model=other"): (3.0, 4),
                  (TTFT, f"instance={D},model=m"): (1.0, 4),
                  (XFER, f"instance={D},model=m"): (0.25, 4)}, ROLES)
    assert _split(h)["prefill"].value == pytest.approx(0.5)
    # a prefill series without a model label counts for any model
    h = _history({(TTFT, f"instance={P}"): (0.5, 4),
                  (TTFT, f"instance={D},model=m"): (1.0, 4),
                  (XFER, f"instance={D},model=m"): (0.25, 4)}, ROLES)
    assert _split(h)["prefill"].value == pytest.approx(0.5)


def test_the_transfer_is_the_engines_own_then_the_instances_then_the_senders() -> None:
    base = {(TTFT, f"instance={P}"): (0.5, 4), (TTFT, f"instance={D},engine=0"): (1.0, 4)}
    own = _history({**base, (XFER, f"instance={D},engine=0"): (0.25, 4),
                    (XFER, f"instance={D},engine=1"): (0.5, 4),
                    (XFER, f"instance={P}"): (0.125, 4)}, ROLES)
    assert _split(own)["transfer"].value == pytest.approx(0.25)
    inst = _history({**base, (XFER, f"instance={D},engine=1"): (0.5, 4),
                     (XFER, f"instance={P}"): (0.125, 4)}, ROLES)
    assert _split(inst)["transfer"].value == pytest.approx(0.5)
    sender = _history({**base, (XFER, f"instance={P}"): (0.125, 4)}, ROLES)
    assert _split(sender)["transfer"].value == pytest.approx(0.125)


def test_a_decode_instance_with_no_first_token_says_so_for_every_part() -> None:
    h = _history({(TTFT, f"instance={P}"): (0.5, 4), (TTFT, f"instance={D}"): (1.0, 0),
                  (XFER, f"instance={D}"): (0.25, 4)}, ROLES)
    got = derive_split(h, 60.0)
    assert [r.label("part") for r in got] == ["prefill", "transfer", "decode", "total"]
    assert all(r.value is None and r.status is Status.NODATA for r in got)
    assert all(r.reason == "no first token on this decode instance in the window"
               for r in got)


def test_why_the_prefill_side_is_not_measured() -> None:
    xfer = {(TTFT, f"instance={D}"): (1.0, 4), (XFER, f"instance={D}"): (0.25, 4)}
    alone = _split(_history(xfer, [ROLES[1]]))
    assert alone["prefill"].value is None
    assert "no prefill instance in view" in alone["prefill"].reason
    assert alone["total"].reason == "not measured: the prefill part is not"
    assert alone["transfer"].value == pytest.approx(0.25) and alone["transfer"].reason == ""
    remote = _split(_history(xfer, [ROLES[1], _info("server.disagg_role", f"instance={P}",
                                                     "", "its command line is remote")]))
    assert remote["prefill"].reason == f"not measured: {P}'s its command line is remote"
    quiet = _split(_history({**xfer, (TTFT, f"instance={P}"): (0.5, 0)}, ROLES))
    assert quiet["prefill"].value is None
    assert quiet["prefill"].reason == ("not measured: the prefill instance read no first "
                                       "token in the window")


def test_without_a_transfer_the_decode_side_is_not_split() -> None:
    h = _history({(TTFT, f"instance={P}"): (0.5, 4), (TTFT, f"instance={D}"): (1.0, 4)},
                 ROLES)
    got = _split(h)
    assert got["prefill"].value == pytest.approx(0.5)
    assert got["transfer"].value is None and "no KV-transfer histogram" in got["transfer"].reason
    assert got["decode"].value is None and got["decode"].reason.startswith("not split")
    assert got["total"].reason == "not measured: the transfer and decode parts are not"


def test_a_transfer_longer_than_the_ttft_is_not_split_and_an_equal_one_leaves_zero() -> None:
    longer = _split(_history({(TTFT, f"instance={P}"): (0.5, 4),
                              (TTFT, f"instance={D}"): (1.0, 4),
                              (XFER, f"instance={D}"): (2.0, 4)}, ROLES))
    assert longer["decode"].value is None and "exceeds" in longer["decode"].reason
    assert longer["total"].reason == "not measured: the decode part is not"
    equal = _split(_history({(TTFT, f"instance={P}"): (0.5, 4),
                             (TTFT, f"instance={D}"): (1.0, 4),
                             (XFER, f"instance={D}"): (1.0, 4)}, ROLES))
    assert equal["decode"].value == 0.0 and equal["decode"].ok
    assert equal["total"].value == pytest.approx(1.5)


def test_a_histogram_whose_count_did_not_move_adds_nothing() -> None:
    # two transfer series pooled for the instance (the decode TTFT has no engine label);
    # one is hostile: its sum moved, its count did not.  Its sum must not join the mean.
    h = _history({(TTFT, f"instance={P}"): (0.5, 4), (TTFT, f"instance={D}"): (1.0, 4),
                  (XFER, f"instance={D},engine=0"): (0.25, 4)}, ROLES)
    for t, total in ((1000.0, 15.0), (1010.0, 99.0)):
        h.add_readings(t, [make_reading(XFER, _lab(f"instance={D},engine=1"),
                                        HistValue(((0.01, 0.0), (float("inf"), 3.0)), 3.0,
                                                  total))])
    assert _split(h)["transfer"].value == pytest.approx(0.25)
