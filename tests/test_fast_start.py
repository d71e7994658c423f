"""`--version`, `--help` and the screen's no-terminal error answer without importing
Textual (about half a second of imports on a small box: issue 35's instant start).  Each
case runs in a fresh interpreter and reports which modules it loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import contextlib, io, json, sys
from infertop.cli.main import main
out, err = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
        code = main(sys.argv[1:])
    except SystemExit as e:
        code = e.code
heavy = sorted({m.split('.')[0] for m in sys.modules} & {'textual', 'rich', 'pynvml', 'psutil', 'httpx'})
print(json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue(),
                  "heavy": heavy, "modules": len(sys.modules)}))
"""


def run(*args: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True,
                          text=True, cwd=ROOT, stdin=subprocess.DEVNULL, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_version_imports_nothing_heavy():
    r = run("--version")
    assert r["code"] == 0 and r["out"].startswith("infertop ")
    assert r["heavy"] == []


def test_help_imports_no_textual():
    r = run("--help")
    assert r["code"] == 0 and "--url" in r["out"]
    assert "textual" not in r["heavy"]


@pytest.mark.parametrize("args", [[], ["demo", "healthy"]])
def test_the_no_terminal_error_imports_no_textual(args):
    r = run(*args)
    assert r["code"] == 2 and "needs a terminal" in r["err"], r
    assert "textual" not in r["heavy"]


def test_a_bad_theme_is_still_named_before_the_terminal():
    r = run("--theme", "nope", "--source", "demo")
    assert r["code"] == 2 and "unknown theme 'nope'" in r["err"], r
