"""Shared test helpers: build Snapshots from plain dicts, locate fixtures."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# `make test-fast` runs with --hypothesis-profile=fast: each property of the fault suite
# tries this many inputs instead of its own count (tests/helpers/props.py); `make test`
# keeps the default profile and the full counts.
FAST_EXAMPLES = 5
settings.register_profile("fast", max_examples=FAST_EXAMPLES)

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


@contextlib.contextmanager
def python_workload_tree(lifetime: int = 90) -> Iterator[tuple[int, int]]:
    """A real Python parent + child with CPU-bound threads (tests/helpers/py_workload.py),
    yielding (parent pid, child pid); skips when py-spy is missing or ptrace is refused."""
    from infertop.probes.capture.pyspy import find_pyspy
    pyspy = find_pyspy()
    if pyspy is None:
        pytest.skip("py-spy not installed")
    workload = Path(__file__).resolve().parent / "helpers" / "py_workload.py"
    proc = subprocess.Popen([sys.executable, str(workload), "--lifetime", str(lifetime)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None   # both piped above
    try:
        words = proc.stdout.readline().split()
        assert words and words[0] == "READY", words
        parent, child = int(words[1]), int(words[2])
        probe = subprocess.run([pyspy, "dump", "--pid", str(parent)], capture_output=True,
                               text=True, env={**os.environ, "RUST_BACKTRACE": "0"})
        if probe.returncode != 0 and "ermission" in probe.stderr:
            pytest.skip(f"ptrace not permitted here: {probe.stderr.strip()[:120]}")
        yield parent, child
    finally:
        try:
            proc.stdin.close()
            proc.wait(10)
        except Exception:
            proc.kill()


def pytest_terminal_summary(terminalreporter):
    """The property suite's count of inputs tried per reader x writer (tests/helpers/props.py)."""
    props = sys.modules.get("helpers.props")
    tried = getattr(props, "TRIED", None)
    if not tried:
        return
    terminalreporter.section("property suite: inputs tried per reader x writer")
    for (reader, writer), n in sorted(tried.items()):
        terminalreporter.write_line(f"{reader:>22} -> {writer:<22} {n}")
