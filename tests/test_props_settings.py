"""Property: settings and command lines.  Any config document (values of every type and
at the float limits, unknown keys and sections) is a valid config or one ConfigError,
never an exception, and a valid one diagnoses a demo tick; any command line of the
headless commands over hostile paths, sources and numbers ends in an exit code with
at most one line on stderr, never a traceback or a raw control byte."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math

from hypothesis import given
from hypothesis import strategies as st

from helpers.props import LIMITS, check_output, props, text, tried
from infertop.cli.main import main
from infertop.config import SECTIONS, ConfigError, config_from_dict
from infertop.rules.engine import Diagnoser

KEYS = {name: [f.name for f in dataclasses.fields(cls)] for name, cls in SECTIONS.items()}
# numbers most of the time (a config of words is refused at its first key)
value = st.one_of(st.sampled_from(LIMITS), st.floats(0, 2), st.integers(0, 1000),
                  st.integers(-10**30, 10**30), text, st.booleans(),
                  st.lists(st.sampled_from(["DEC-001", "x", "MEM-003", ""]), max_size=3),
                  st.dictionaries(text, st.integers(), max_size=2))


@st.composite
def config_doc(draw) -> dict:
    doc: dict = {}
    for section in draw(st.lists(st.sampled_from([*KEYS, *KEYS, "rules", "ui", "bogus"]),
                                 max_size=3, unique=True)):
        if section == "rules":
            doc["rules"] = {draw(st.sampled_from(["DEC-001", "MEM-003", "XYZ-9", ""])):
                            {draw(st.sampled_from(["enabled", "severity", "x"])): draw(value)}}
        elif section in KEYS:
            doc[section] = {draw(st.sampled_from(KEYS[section] * 8 + ["bogus"])): draw(value)
                            for _ in range(draw(st.integers(1, 3)))}
        else:
            doc[section] = draw(value)
    return doc


@props(150)
@given(doc=config_doc())
def test_any_config_is_valid_or_one_config_error(doc):
    try:
        cfg = config_from_dict(doc)
    except ConfigError as e:
        assert "\n" not in str(e)
        tried("settings", "config error")
        return
    for section in KEYS:
        for f in dataclasses.fields(getattr(cfg, section)):
            v = getattr(getattr(cfg, section), f.name)
            if isinstance(v, float):
                assert math.isfinite(v), (section, f.name, v)
    Diagnoser(cfg)
    tried("settings", "diagnoser")


number = st.sampled_from(["0", "-1", "nan", "inf", "1e308", "1e-320", "x", "", "0x10", "1_0"])
path = st.sampled_from(["/nonexistent/r.jsonl", "/dev/null", "/", "/etc/passwd", "-",
                        "/proc/self/mem"]) | text.filter(lambda t: "\x00" not in t)
argv = st.one_of(
    st.tuples(st.just("snapshot"), st.just("--json"), st.just("--source"),
              st.sampled_from(["replay:", "demo:", "live:", "bogus", "demo:nosuch"]).flatmap(
                  lambda p: path.map(lambda x: p + x)),
              st.sampled_from(["--window", "--interval"]), number),
    st.tuples(st.just("doctor"), st.just("--source"), path.map(lambda x: "replay:" + x),
              st.sampled_from(["--format", "--duration"]),
              st.sampled_from(["json", "html", "", "markdown\x1b"]) | number),
    st.tuples(st.just("compare"), path, path, st.sampled_from(["--min-change", "--resamples",
                                                                "--window"]), number),
    st.tuples(st.just("report"), path, st.sampled_from(["--format", "--baseline", "--window"]),
              st.sampled_from(["html", "pdf"]) | path | number),
    st.tuples(st.sampled_from(["doctor", "snapshot"]), st.just("--config"), path),
).map(list)


@props(60)
@given(args=argv)
def test_any_headless_command_line_is_an_exit_code_and_one_line(args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(args)
        except SystemExit as e:   # argparse: its usage and one error line
            rc = e.code if isinstance(e.code, int) else 2
    tried("command line", "exit code + stderr")
    check_output(err.getvalue(), "stderr")
    check_output(out.getvalue(), "stdout")
    assert rc in (0, 1, 2, 3), (args, rc)
    if rc == 2 and not err.getvalue().startswith("usage:"):
        assert err.getvalue().count("\n") == 1, err.getvalue()
