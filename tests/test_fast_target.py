"""`make test-fast` (the quick loop: not slow, not integration) still tries every module.

A test module whose tests are all marked slow or integration drops out of the quick loop
entirely; that is right only for modules that are about the whole app or outside
programs (listed here, with why).  Every other module keeps at least one test there, so
a change to what it covers fails in the loop a contributor runs often.  Read from the
source (decorators and ``pytestmark``), not by collecting the suite: this runs in the
quick loop too.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
LEFT_OUT = {"slow", "integration"}

# modules that are the whole app or outside programs through and through
WHOLE = {
    "test_tui_snapshots.py": "SVG snapshots of the whole app",
    "test_tui_capture_snapshots.py": "SVG snapshots of the capture screens, in the whole app",
    "test_tui_scale.py": "20,000 series and 64 GPUs through the whole app",
    "test_tui_repaint.py": "repaints measured through the whole app",
    "test_tui_modes.py": "demo and replay apps driven key by key",
    "test_tui_history_plot.py": "the history plot driven through the whole app",
    "test_tui_fleet.py": "the fleet screen driven through the whole app",
    "test_tui_demo_captures.py": "demo apps driven key by key",
    "test_tui_captures.py": "captures driven through the whole app",
    "test_zoom_table.py": "zoomed tables driven through the whole app",
    "test_replay_clocks.py": "replay and demo clocks through the whole app",
    "test_pane_line_strips.py": "every pane line against Textual's own render",
    "test_scenario_findings.py": "every scenario played to its findings",
    "test_faults_signals.py": "signals sent to real infertop processes",
    "test_faults_terminal_loss.py": "real infertop processes on ptys and in tmux",
    "test_nsys.py": "a stand-in nsys run as a subprocess",
    "test_fleet_prometheus.py": "a real Prometheus scraping a demo fleet",
    "test_promrules_prometheus.py": "a real Prometheus scraping a demo server",
    "test_tui_messages.py": "the typed messages between screens and the app, in the app",
    "test_netns_servers.py": "real network and PID namespaces with veth pairs (root)",
    "test_props_resources.py": "each reader in a child process under a memory limit",
    "test_export_defects.py": "each export defect as a real promtool run",
}


def _marks(node: ast.expr) -> set[str]:
    """Names of pytest.mark.X in a decorator or a pytestmark value (lists included)."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute) and \
                n.value.attr == "mark":
            out.add(n.attr)
    return out


def _module_marks(tree: ast.Module) -> set[str]:
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "pytestmark" for t in stmt.targets):
            return _marks(stmt.value)
    return set()


def fast_tests(path: Path) -> list[str]:
    """Test functions of a module that `make test-fast` runs (decorators by name: a mark
    bound to a module-level name such as PLAYS_ONE counts as what it is bound to)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    if _module_marks(tree) & LEFT_OUT:
        return []
    aliases = {t.id: _marks(stmt.value) for stmt in tree.body if isinstance(stmt, ast.Assign)
               for t in stmt.targets if isinstance(t, ast.Name)}
    out = []
    for fn in tree.body:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or \
                not fn.name.startswith("test_"):
            continue
        marks: set[str] = set()
        for d in fn.decorator_list:
            marks |= _marks(d)
            if isinstance(d, ast.Name):
                marks |= aliases.get(d.id, set())
        if not marks & LEFT_OUT:
            out.append(fn.name)
    return out


def test_every_module_but_the_whole_app_ones_keeps_a_fast_test():
    modules = sorted(p for p in TESTS.glob("test_*.py"))
    assert len(modules) > 50
    gone = [p.name for p in modules if not fast_tests(p) and p.name not in WHOLE]
    assert not gone, f"all of their tests are slow/integration: keep one fast, or list " \
                     f"the module in WHOLE with why: {gone}"
    stale = [name for name in WHOLE if (TESTS / name).exists() and fast_tests(TESTS / name)]
    assert not stale, f"listed as whole-app but has fast tests: {stale}"
    assert all((TESTS / name).exists() for name in WHOLE), "WHOLE names a removed module"


def test_the_reader_sees_marks_as_pytest_does(tmp_path):
    p = tmp_path / "test_x.py"
    p.write_text("import pytest\nSLOWLY = pytest.mark.slow\n\n"
                 "@pytest.mark.slow\ndef test_a(): pass\n\n"
                 "@SLOWLY\ndef test_b(): pass\n\n"
                 "@pytest.mark.integration   # why\nasync def test_c(): pass\n\n"
                 "@pytest.mark.parametrize('x', [1])\ndef test_d(x): pass\n\n"
                 "def helper(): pass\n")
    assert fast_tests(p) == ["test_d"]
    p.write_text("import pytest\npytestmark = [pytest.mark.skipif(True, reason=''),\n"
                 "              pytest.mark.integration]\n\ndef test_a(): pass\n")
    assert fast_tests(p) == []
