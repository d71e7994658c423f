"""Recording headers decoded into a typed structure (issue 36 item 2, case 10): a header
field of the wrong type (``"interval": "abc"``, ``"host": {...}``, ``"started": NaN``) is
one line and exit code 2 in every reader, never a traceback."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from infertop.cli.main import main
from infertop.probes.sources.replay import ReplaySource
from infertop.recording import RecordingError


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    path = tmp_path_factory.mktemp("rec") / "good.jsonl"
    with contextlib.redirect_stderr(io.StringIO()):
        assert main(["record", "-o", str(path), "--source", "demo:healthy",
                     "--duration", "3"]) == 0
    return path


BAD = [("interval", "abc"), ("interval", -1.0), ("interval", float("nan")),
       ("host", {"a": 1}), ("host", ["h"]), ("started", float("nan")), ("started", "x"),
       ("started", 1e308), ("gpus", 5), ("gpus", ["x"]), ("server", 5),
       ("server", {"kind": 5}), ("source", "x"), ("source", {"capabilities": 5}),
       ("source", {"fleet": "yes"}), ("part", "x"), ("infertop", 3)]


def edited(good, tmp_path, key, value) -> str:
    header, *lines = good.read_bytes().splitlines()
    h = json.loads(header)
    h[key] = value
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"\n".join([json.dumps(h).encode(), *lines]) + b"\n")
    return str(path)


@pytest.mark.parametrize("key,value", BAD)
def test_a_header_field_of_the_wrong_type_is_one_line(good, tmp_path, key, value):
    bad = edited(good, tmp_path, key, value)
    with pytest.raises(RecordingError) as e:
        ReplaySource(bad)
    msg = str(e.value)
    assert "\n" not in msg and "header" in msg and key in msg and len(msg) < 300


@pytest.mark.parametrize("key,value", [("interval", "abc"), ("host", {"a": 1}),
                                       ("started", float("nan")), ("source", {"fleet": 2})])
def test_every_reader_refuses_it_with_exit_2(good, tmp_path, key, value):
    bad = edited(good, tmp_path, key, value)
    for argv in (["report", bad, "-o", "-"], ["report", bad, "--format", "markdown"],
                 ["compare", str(good), bad], ["compare", bad, str(good)],
                 ["doctor", "--source", f"replay:{bad}"],
                 ["snapshot", "--source", f"replay:{bad}", "--json"],
                 ["rules", "promtool-input", bad]):
        rc, out, err = run(*argv)
        assert rc == 2, (argv, rc, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, (argv, err)
        assert "header" in err, (argv, err)


def test_a_good_header_still_replays(good):
    src = ReplaySource(str(good))
    assert isinstance(src.header["host"], str) and src.header["host"] and len(src) >= 2
