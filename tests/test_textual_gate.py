"""Textual's private parts sit behind one gate (tui/textual_gate.py): only the versions it
knows get the fast paths; any other Textual, a missing private name or a changed signature
gives stock Textual, and the app runs there too (its snapshots are the same)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from textual._compositor import Compositor
from textual._styles_cache import StylesCache
from textual.drivers.linux_driver import LinuxDriver

from helpers.tui_demo import demo_app, screen_lines
from infertop.tui import textual_gate
from infertop.tui.app import quiet_driver_class
from infertop.tui.compositor import LeanCompositor
from infertop.tui.driver import QuietLinuxDriver
from infertop.tui.panes.styles_cache import PaneStylesCache

ROOT = Path(__file__).resolve().parent.parent
PINNED = next(iter(sorted(textual_gate.KNOWN_VERSIONS)))


def test_the_pinned_textual_opens_the_gate():
    assert textual_gate.check(PINNED) == ""


def test_another_version_closes_the_gate():
    assert "9.0.0" in textual_gate.check("9.0.0")
    assert "not found" in textual_gate.check(None)


def test_a_missing_private_name_closes_the_gate():
    def resolve(dotted):
        if dotted.startswith("textual._compositor"):
            raise ImportError("No module named 'textual._compositor'")
        return textual_gate._resolve(dotted)
    reason = textual_gate.check(PINNED, resolve=resolve)
    assert "textual._compositor" in reason and "ImportError" in reason


def test_a_changed_signature_closes_the_gate():
    expected = dict(textual_gate._EXPECTED)
    expected["textual.widget.Widget.refresh"] = ("self", "regions", "repaint", "layout")
    reason = textual_gate.check(PINNED, expected=expected)
    assert "Widget.refresh" in reason and "recompose" in reason


def test_the_environment_forces_stock_textual():
    code = "from infertop.tui import textual_gate as g; print(g.FAST, '|', g.REASON)"
    env = {**os.environ, textual_gate.STOCK_ENV: "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True, cwd=ROOT).stdout
    assert out.startswith("False |") and textual_gate.STOCK_ENV in out


def test_no_private_textual_module_is_imported_outside_the_gate():
    pattern = re.compile(r"^\s*(from|import)\s+textual\._", re.M)
    offenders = []
    for top in ("tui", "cli", "probes", "infertop"):
        for path in (ROOT / top).rglob("*.py"):
            if path.name != "textual_gate.py" and pattern.search(path.read_text()):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def test_the_driver_follows_the_gate(monkeypatch):
    monkeypatch.delenv("TEXTUAL_DRIVER", raising=False)
    app = demo_app("healthy")
    monkeypatch.setattr(textual_gate, "FAST", True)
    assert quiet_driver_class(app) is QuietLinuxDriver
    monkeypatch.setattr(textual_gate, "FAST", False)
    assert quiet_driver_class(app) is LinuxDriver


@pytest.mark.slow
@pytest.mark.parametrize("fast", [True, False])
async def test_the_app_runs_on_the_parts_the_gate_gives(monkeypatch, fast):
    monkeypatch.setattr(textual_gate, "FAST", fast)
    app = demo_app("healthy")
    async with app.run_test(size=(120, 36)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        await pilot.pause()
        first = screen_lines(app)
        for _ in range(3):
            await app._poll()
        await pilot.pause()
        compositor = app.screen._compositor
        caches = {type(pane._styles_cache) for pane in app.panes}
        if fast:
            assert isinstance(compositor, LeanCompositor)
            assert caches == {PaneStylesCache}
        else:
            assert type(compositor) is Compositor
            assert caches == {StylesCache}
        # the screen keeps following the source: the ticks reached it
        assert screen_lines(app) != first


@pytest.mark.slow
def test_the_snapshots_hold_on_stock_textual():
    """Every SVG snapshot, rendered with the gate closed (a subprocess: the gate decides
    at import), matches the fast path's."""
    env = {**os.environ, textual_gate.STOCK_ENV: "1"}
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/test_tui_snapshots.py", "tests/test_tui_capture_snapshots.py"],
        env=env, capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout


def test_every_private_name_the_quiet_driver_uses_is_checked_by_the_gate() -> None:
    """tui/driver.py's private Textual names (methods and attributes Textual sets in its
    __init__) are each in the gate's checks, and all hold on the pinned Textual."""
    source = (ROOT / "tui" / "driver.py").read_text()
    used = set(re.findall(r"(?:self|writer)\.(_[a-z][a-z_]*)", source))
    own = set(re.findall(r"self\.(_[a-z][a-z_]*)\s*(?::[^=\n]*)?=", source)) - {"_file"}
    own |= set(re.findall(r"def (_[a-z][a-z_]*)", source)) - {
        "_sigtstp_application", "_sigcont_application"}
    checked = {dotted.rsplit(".", 1)[-1] for dotted in [*textual_gate._EXPECTED,
                                                        *textual_gate._EXPECTED_DRIVER_METHODS]}
    checked |= {name for names in textual_gate._EXPECTED_INIT_ATTRIBUTES.values()
                for name in names}
    assert used - own, used
    assert (used - own) <= checked, sorted((used - own) - checked)
    assert textual_gate.check(PINNED, textual_gate._EXPECTED_DRIVER_METHODS) == ""
    assert textual_gate.check_init_attributes() == ""


def test_an_init_that_no_longer_sets_an_attribute_closes_the_gate() -> None:
    class Writer:
        def __init__(self) -> None:
            self.queue: list[str] = []     # renamed from _queue

    def resolve(dotted: str) -> object:
        if dotted.startswith("textual.drivers._writer_thread"):
            return Writer.__init__
        return textual_gate._resolve(dotted)
    reason = textual_gate.check_init_attributes(resolve=resolve)
    assert "WriterThread" in reason and "self._queue" in reason


def test_the_installed_version_is_read_beside_the_package() -> None:
    """The gate reads Textual's version from its dist-info's METADATA, not through
    importlib.metadata (its import and search of sys.path cost 10-30 ms of the start,
    issue 35); the two agree, and a fresh interpreter's gate leaves importlib.metadata
    unimported."""
    from importlib.metadata import version
    assert textual_gate._installed() == version("textual")
    code = ("import sys; from infertop.tui import textual_gate as g; "
            "print(g.FAST, 'importlib.metadata' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k != textual_gate.STOCK_ENV}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT, env=env).stdout
    assert out.split() == ["True", "False"]


def test_the_version_comes_from_the_one_dist_info(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import textual
    (tmp_path / "textual").mkdir()
    monkeypatch.setattr(textual, "__file__", str(tmp_path / "textual" / "__init__.py"))
    info = tmp_path / "textual-9.9.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: textual\nVersion: 9.9.9\n")
    assert textual_gate._installed() == "9.9.9"
    # two of them (a stale one left behind): importlib.metadata decides, as before
    (tmp_path / "textual-1.0.0.dist-info").mkdir()
    from importlib.metadata import version
    assert textual_gate._installed() == version("textual")
