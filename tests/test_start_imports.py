"""What `infertop --help` and the screen's no-terminal error import (issue 35: instant
start, under 0.15 s): no Textual, no probe module (they were all imported to call their
``add_flags``: 85-150 ms), no importlib.metadata entry-point scan while no plug-in is
installed (~100 ms on a loaded box), and no source made before the terminal is checked
(a bad argument is still named first: the checks of cli/checks.py).  Each case runs in a
fresh interpreter, which reports the modules it loaded; no timing is asserted (the
numbers: benchmarks/bench_start.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from infertop.probes import registry
from infertop.probes.flags import BUILTIN_FLAGS, ProbeFlag

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
print(json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue(),
                  "modules": sorted(sys.modules)}))
"""


def run(*args: str, pythonpath: str = "") -> dict[str, Any]:
    env = None
    if pythonpath:
        import os
        env = {**os.environ, "PYTHONPATH": pythonpath}
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True,
                          text=True, cwd=ROOT, stdin=subprocess.DEVNULL, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out: dict[str, Any] = json.loads(proc.stdout.splitlines()[-1])
    return out


def over_budget(modules: list[str]) -> list[str]:
    """The modules `--help` and the no-terminal error must not load."""
    probes = set(registry.builtin_modules())
    return [m for m in modules
            if m in probes or m.split(".")[0] in ("textual", "rich", "psutil", "pynvml", "httpx")
            or m in ("importlib.metadata", "infertop.probes.registry", "infertop.pipeline",
                     "infertop.rules.engine", "infertop.probes.sources.hub")]


def test_help_imports_no_probe_and_no_entry_point_scan() -> None:
    r = run("--help")
    assert r["code"] == 0 and "--no-gpu" in r["out"] and "--kv-events" in r["out"]
    assert over_budget(r["modules"]) == []


@pytest.mark.parametrize("args", [[], ["--no-gpu"], ["--or-demo"], ["demo"],
                                  ["demo", "healthy"], ["--source", "demo:healthy"]])
def test_the_no_terminal_error_makes_no_source(args: list[str]) -> None:
    r = run(*args)
    assert r["code"] == 2 and "needs a terminal" in r["err"], r["err"]
    assert over_budget(r["modules"]) == []
    assert "infertop.probes.sources.demo" not in r["modules"]


@pytest.mark.parametrize("args,words", [
    (["demo", "nosuch"], "no scenario named 'nosuch'"),
    (["demo", "par-tp-straggler", "--gpus", "2"], "--gpus 3 or more"),
    (["--url", "ftp://x"], "--url: not an http(s) URL"),
    (["--url", "http://10.0.0.1:8000", "--url", "http://10.0.0.2:8000", "--pid", "4"],
     "--pid is a process of this machine"),
    (["--kv-events", "tcp://h:99999"], "--kv-events 'tcp://h:99999': the port is not"),
    (["--prometheus", "http://p:9090", "--url", "8000"], "drop --url/--pid"),
    (["--source", "foo:bar"], "--source must be live, demo:NAME or replay:FILE"),
    (["replay", "/nonexistent/x.jsonl"], "no such file"),
])
def test_a_bad_argument_is_still_named_before_the_terminal(args: list[str],
                                                           words: str) -> None:
    from helpers.inproc import run_main
    r = run_main(*args)
    assert r.returncode == 2, r
    assert "needs a terminal" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert words in r.stderr, r.stderr


def test_a_bad_config_is_named_before_the_terminal(tmp_path: Path) -> None:
    from helpers.inproc import run_main
    bad = tmp_path / "bad.toml"
    bad.write_text("[thresholds\n")
    r = run_main("--config", str(bad))
    assert r.returncode == 2 and r.stderr.startswith("infertop: config:"), r.stderr


def test_a_builtin_probes_flags_are_its_table_entry() -> None:
    """The table --help reads and the specs the Hub builds from agree: a built-in probe
    declares no add_flags (its module is not imported for --help: the flag would vanish)
    and its ``flags`` are its BUILTIN_FLAGS entry, in the probes' order."""
    import importlib
    specs = [importlib.import_module(m).SPEC for m in registry.builtin_modules()]
    assert all(s.add_flags is None for s in specs), [s.name for s in specs if s.add_flags]
    declared = {s.name: s.flags for s in specs if s.flags}
    assert declared == BUILTIN_FLAGS
    order = {s.name: s.order for s in specs}
    assert list(BUILTIN_FLAGS) == sorted(BUILTIN_FLAGS, key=order.__getitem__)


def test_a_probe_flag_is_a_switch_or_a_list() -> None:
    with pytest.raises(ValueError):
        ProbeFlag("--level", "a level", action="store")
    with pytest.raises(ValueError):
        ProbeFlag("level", "no dashes")


PLUGIN = '''\
from infertop.model import Capability, Reading, Sample
from infertop.probes.base import Probe
from infertop.probes.registry import ProbeFlag, ProbeSpec, register

SPEC = register(ProbeSpec(name="fans", order=2000, keys=("host.load1",), needs="nothing",
                          flags=(ProbeFlag("--no-fans", "do not read the fans"),)))
'''


def test_an_installed_plugins_flags_are_in_help(tmp_path: Path) -> None:
    """With a plug-in installed, --help loads the entry points (and shows its flags)."""
    (tmp_path / "infertop_fans").mkdir()
    (tmp_path / "infertop_fans" / "__init__.py").write_text(PLUGIN)
    info = tmp_path / "infertop_fans-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: infertop_fans\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[infertop.probes]\nfans = infertop_fans\n")
    r = run("--help", pythonpath=str(tmp_path))
    assert r["code"] == 0 and "--no-fans" in r["out"] and "--no-gpu" in r["out"]
    assert "importlib.metadata" in r["modules"]


def test_may_declare_reads_only_the_group_named(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from infertop.plugins import may_declare
    info = tmp_path / "other-1.0.dist-info"
    info.mkdir()
    (info / "entry_points.txt").write_text("[console_scripts]\nother = other:main\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert not may_declare("infertop.probes")
    (info / "entry_points.txt").write_text("[infertop.probes]\nx = other\n")
    assert may_declare("infertop.probes") and not may_declare("infertop.servers")
    zipped = tmp_path / "site.zip"
    zipped.write_bytes(b"PK\x05\x06" + bytes(18))
    monkeypatch.setattr(sys, "path", [str(zipped)])
    assert may_declare("infertop.servers")     # cannot look inside: the full lookup decides
