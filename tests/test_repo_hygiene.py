"""What a clone of the repository holds (issue 34 item 6): every citation resolves inside
it, and no build artefact or duplicate is committed."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tracked() -> list[str]:
    run = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if run.returncode != 0:
        pytest.skip("not a git checkout")
    return [n for n in run.stdout.splitlines() if (ROOT / n).is_file()]


def test_no_citation_points_outside_the_repository(tracked):
    # a clone has no workplace folder beside it: the references live in docs/reference/ (their own
    # citations of the workplace are the copies' history, not a path to follow)
    outside = re.compile(rb"\.\./" + rb"shared/|/work/" + rb"shared/")   # split: not a hit itself
    # the fuzz seeds are inputs, not citations: a seed grown from a fixture page keeps the
    # page's own comment lines, whatever they cite
    bad = [n for n in tracked if not n.startswith(("docs/reference/", "tools/fuzz/corpus/"))
           and outside.search((ROOT / n).read_bytes())]
    assert bad == [], f"cite docs/reference/ or a public link instead: {bad}"


def test_no_wheel_and_no_duplicate_file_is_committed(tracked):
    assert [n for n in tracked if n.endswith((".whl", ".tar.gz", ".egg"))] == []
    seen: dict[bytes, str] = {}
    dups = []
    for n in tracked:
        if n.endswith(".gz"):   # recordings: large, and easily copied twice
            data = (ROOT / n).read_bytes()
            if data in seen:
                dups.append((seen[data], n))
            seen.setdefault(data, n)
    assert dups == []
