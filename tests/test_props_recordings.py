"""Property: any recording someone hands you (values at the float limits, NaN/Inf, odd
times, labels of the wrong type, deep nesting, corrupt and blank lines) goes through every
writer that reads one (the HTML and markdown report, compare text/JSON, doctor
--source replay: text/JSON/markdown, snapshot --json) and either works or is one line and
exit 2; never an exception, a raw control byte or a number nobody can read."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.props import LIMITS, check_json, check_output, props, text, tried
from infertop.cli.main import main

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


_BASE: list[bytes] = []


def base_lines(tmp_path_factory) -> list[bytes]:
    """A real recording (the healthy demo, 4 ticks): header + snapshot lines (made once;
    not a fixture, so a failing example's report does not print 80 KB of it)."""
    if not _BASE:
        path = tmp_path_factory.mktemp("rec") / "good.jsonl"
        with contextlib.redirect_stderr(io.StringIO()):
            assert main(["record", "-o", str(path), "--source", "demo:healthy",
                         "--duration", "4"]) == 0
        _BASE.extend(path.read_bytes().splitlines())
    return _BASE


def json_num(v: float):
    """As our writer spells it (strings for non-finite), or sometimes as a bare literal."""
    if math.isfinite(v):
        return v
    return "NaN" if v != v else ("+Inf" if v > 0 else "-Inf")


# hostile JSON values: Any by design (numbers, strings, null, lists, objects)
hostile_value: st.SearchStrategy[Any] = st.one_of(
    st.sampled_from(LIMITS).map(json_num),
    st.sampled_from(["NaN", "Inf", "-Inf", "x", "", None, True, [], {}]),
    st.integers(-10**400, 10**400))
hostile_time: st.SearchStrategy[Any] = st.one_of(
    st.sampled_from([1e308, -1e308, 0, -1, 1e12, 4e9, "soon", None, [], "1e999", True]),
    st.floats(allow_nan=False, allow_infinity=False))
hostile_label = st.one_of(text, st.sampled_from([None, [], {}, ["a"], {"a": "b"}, 1, 1e308]))


@st.composite
def mutation(draw):
    kind = draw(st.sampled_from(["value", "series", "series", "time", "label", "nest",
                                 "garbage", "blank", "bucket"]))
    return kind, draw(st.integers(0, 10**6)), draw(st.data())


def mutate(lines: list[bytes], kind: str, seed: int, data) -> list[bytes]:
    out = list(lines)
    if kind == "series":   # one reading hostile on every line: a series compare bootstraps
        value = data.draw(hostile_value)
        for i in range(1, len(out)):
            out = mutate_line(out, i, "value", seed, data, value)
        return out
    return mutate_line(out, 1 + seed % (len(out) - 1), kind, seed, data)


def mutate_line(out: list[bytes], i: int, kind: str, seed: int, data,
                value: object = None) -> list[bytes]:
    out = list(out)
    if kind == "garbage":
        out[i] = data.draw(st.binary(max_size=200) | st.just(b"{" * 5000) |
                           st.just(b'{"time": 1, "samples": {"x": 1}}'))
        return out
    if kind == "blank":
        out.insert(i, b"\n" * data.draw(st.integers(1, 200_000)))
        return out
    if kind == "nest":
        depth = data.draw(st.sampled_from([50, 900, 5000, 200_000]))
        out[i] = out[i][:-1] + b',"deep":' + b"[" * depth + b"]" * depth + b"}"
        return out
    try:
        snap = json.loads(out[i])
    except (ValueError, RecursionError):   # an earlier mutation made it unreadable
        return out
    readings = [r for s in snap["samples"].values() for r in s["readings"]]
    r = readings[seed % len(readings)]
    if kind == "value":
        r["value"] = data.draw(hostile_value) if value is None else value
    elif kind == "bucket" and r.get("buckets"):
        b = r["buckets"][seed % len(r["buckets"])]
        b[1] = data.draw(hostile_value)
    elif kind == "time":
        snap["time"] = data.draw(hostile_time)
    else:
        labels = r.setdefault("labels", {})
        name = data.draw(st.sampled_from(["engine", "model", "gpu", "x"]))
        labels[name] = data.draw(hostile_label)
    # NaN/Infinity literals and huge ints as the json module writes them
    out[i] = json.dumps(snap, separators=(",", ":")).encode()
    return out


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def check_run(rc: int, out: str, err: str, where: str, *, as_json: bool = False) -> None:
    check_output(err, where + " stderr")
    if rc == 2:   # refused: one line, nothing else
        assert err.count("\n") == 1 and err.startswith("infertop: "), (where, err)
        return
    assert rc in (0, 1, 3), (where, rc, err)
    (check_json if as_json else check_output)(out, where)


@props(25)
@given(muts=st.lists(mutation(), min_size=1, max_size=3))
def test_any_recording_goes_through_every_writer(tmp_path_factory, muts):
    lines = base = base_lines(tmp_path_factory)
    for kind, seed, data in muts:
        lines = mutate(lines, kind, seed, data)
    d = tmp_path_factory.mktemp("p")
    bad, good = d / "bad.jsonl", d / "good.jsonl"
    bad.write_bytes(b"\n".join(lines) + b"\n")
    good.write_bytes(b"\n".join(base) + b"\n")
    reader = "recording"
    for fmt in ("html", "markdown"):
        rc, out, err = run(["report", str(bad), "--format", fmt, "-o", "-"])
        check_run(rc, out, err, f"report {fmt}")
        tried(reader, f"report {fmt}")
    for fmt in ("text", "json"):
        rc, out, err = run(["compare", str(good), str(bad), "--format", fmt])
        check_run(rc, out, err, f"compare {fmt}", as_json=fmt == "json")
        tried(reader, f"compare {fmt}")
    for fmt in ("text", "json", "markdown"):
        rc, out, err = run(["doctor", "--source", f"replay:{bad}", "--format", fmt,
                            "--duration", "3"])
        check_run(rc, out, err, f"doctor replay {fmt}", as_json=fmt == "json")
        tried(reader, f"doctor {fmt}")
    rc, out, err = run(["snapshot", "--json", "--source", f"replay:{bad}", "--window", "3"])
    check_run(rc, out, err, "snapshot --json replay", as_json=True)
    tried(reader, "snapshot --json")
    os.unlink(bad)
