"""Architecture rules: the core imports no I/O library; probes import nothing from tui."""

import ast
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):   # as infertop/config.py: a test mypy can follow
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN_IN_CORE = {"textual", "rich", "pynvml", "psutil", "httpx", "h11", "aiofiles",
                     "asyncio"}


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0] if not node.module.startswith("infertop.")
                      else node.module)
    return names


def test_core_imports_no_io_library():
    bad = {}
    for f in (ROOT / "infertop").rglob("*.py"):
        if f.name == "__main__.py":  # the `python -m infertop` shim starts the CLI
            continue
        hit = {n for n in imports_of(f) if n in FORBIDDEN_IN_CORE
               or n.startswith(("infertop.probes", "infertop.tui", "infertop.cli"))}
        if hit:
            bad[str(f.relative_to(ROOT))] = sorted(hit)
    assert not bad, bad


def test_demo_adapters_do_not_import_tui():
    """The demo's adapters live beside the other sources and commands (the demo source in
    probes/sources/demo.py, demo-server in cli/demo_server.py): headless, no Textual."""
    for rel in ("probes/sources/demo.py", "cli/demo_server.py"):
        hit = {n for n in imports_of(ROOT / rel) if n.startswith("infertop.tui") or n == "textual"}
        assert not hit, (rel, hit)


def test_headless_commands_do_not_import_tui():
    """snapshot, doctor, record, demo-server: no Textual at module level or lazily, except
    the one module that starts the screen."""
    bad = {}
    for f in (ROOT / "cli").rglob("*.py"):
        if f.name == "interactive.py":
            continue
        hit = {n for n in imports_of(f) if n.startswith("infertop.tui") or n in ("textual", "rich")}
        if hit:
            bad[f.name] = sorted(hit)
    assert not bad, bad


def test_tui_is_textual_only():
    """tui/ holds the screen: no argument parsing or headless command lives there."""
    for f in (ROOT / "tui").rglob("*.py"):
        assert "argparse" not in imports_of(f), f


def test_probes_do_not_import_tui():
    bad = {str(f.relative_to(ROOT)): sorted(n for n in imports_of(f) if n.startswith("infertop.tui")
                                            or n == "textual")
           for f in (ROOT / "probes").rglob("*.py")}
    assert not {k: v for k, v in bad.items() if v}


def test_core_import_loads_no_io_module_at_runtime():
    code = ("import sys, infertop.model, infertop.history, infertop.derive, infertop.pipeline, "
            "infertop.keys; bad=[m for m in ('textual','rich','pynvml','psutil','httpx','h11') "
            "if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_package_folder_is_listed_in_pyproject():
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(cfg["packages"])
    roots = {v: k for k, v in cfg["package-dir"].items()}
    found = set()
    for folder, pkg in roots.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((pkg, *rel)))
    assert found <= listed, found - listed
