"""The code in docs/servers.md and docs/contributing.md runs (issue 34 item 1): the example
kind module is registered and passes the kit, the example key line is a KeySpec, the
example probe module registers, reads and passes the kit, and mypy accepts both modules.
A change to the registry, the specs or the kit that the pages do not follow fails here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from infertop import keys, testing
from infertop.probes import flags as probe_flags
from infertop.probes import registry as probe_registry
from infertop.probes.server.discovery import classify
from infertop.servers import registry as kind_registry

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^( *)```python\n(.*?)^\1```", re.S | re.M)


def blocks(page: str) -> list[str]:
    text = (ROOT / "docs" / page).read_text()
    return [textwrap.dedent(m.group(2)) for m in FENCE.finditer(text)]


def module_of(name: str, code: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__file__ = f"<{name}>"
    sys.modules[name] = mod   # dataclasses and annotations look their module up
    exec(compile(code, mod.__file__, "exec"), mod.__dict__)
    return mod


def _kind_block() -> str:
    (code,) = [b for b in blocks("servers.md") if "KIND = ServerKind(" in b]
    return code


def _probe_blocks() -> tuple[str, str]:
    found = blocks("contributing.md")
    key_line = next(b for b in found if b.lstrip().startswith("_k("))
    module = next(b for b in found if "SPEC = register(ProbeSpec(" in b)
    return key_line, module


def test_the_example_kind_registers_and_passes_the_kit():
    mod = module_of("docs_example_kind", _kind_block())
    try:
        kind_registry.register(mod.KIND)
        testing.check_kind(mod.KIND)
        assert classify("toyserve", ["toyserve", "serve", "--model", "m"]) == \
            ("toyserve", "server")
        assert classify("toyserve", ["toyserve", "bench"]) == ("unknown", "")
    finally:
        kind_registry.unregister(mod.KIND.name)
        sys.modules.pop("docs_example_kind", None)


def _flags_entry() -> dict:
    (entry,) = [b for b in blocks("contributing.md") if b.lstrip().startswith('"uptime": (')]
    return eval("{" + entry + "}", vars(probe_flags))   # as probes/flags.py's table holds it


def test_the_example_probe_registers_reads_and_passes_the_kit(monkeypatch):
    key_line, code = _probe_blocks()
    spec = eval(key_line, vars(keys))            # the line as keys.py's table holds it
    assert isinstance(spec, keys.KeySpec)
    monkeypatch.setitem(keys.SPECS, spec.key, spec)
    for name, flags in _flags_entry().items():
        monkeypatch.setitem(probe_flags.BUILTIN_FLAGS, name, flags)
    mod = module_of("docs_example_probe", code)
    try:
        assert mod.SPEC in probe_registry.probe_specs()
        testing.check_probe_spec(mod.SPEC, probe_registry.probe_specs())
        if os.path.exists("/proc/uptime"):
            probe = mod.UptimeProbe()
            try:
                got = testing.check_samples(mod.SPEC, [probe.collect_blocking()])
            finally:
                probe.close_blocking()
            assert got == {spec.key}
    finally:
        probe_registry.unregister(mod.SPEC.name)
        sys.modules.pop("docs_example_probe", None)


def test_mypy_accepts_the_example_modules(tmp_path):
    pytest.importorskip("mypy")
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import typecheck  # the package's import layout (folders mapped onto names)
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    tree = typecheck.build_tree()
    files = []
    for name, code in (("docs_example_kind", _kind_block()),
                       ("docs_example_probe", _probe_blocks()[1])):
        f = tmp_path / f"{name}.py"
        f.write_text(code)
        files.append(str(f))
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(ROOT / "build" / "mypy_cache"), *files],
        cwd=tree, capture_output=True, text=True, env={**os.environ, "MYPYPATH": str(tree)})
    assert run.returncode == 0, run.stdout + run.stderr
