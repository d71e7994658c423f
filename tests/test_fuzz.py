"""A short coverage-guided run of each fuzz target (tools/fuzz, atheris): seconds each,
from the seed corpus in the repo; `make fuzz` runs them for long.  A target fails when
the parser raises anything but its one-line refusal (tools/fuzz/targets.py says what each
accepts).  What a run finds becomes a plain regression test beside the parser's tests.
The count of inputs each ran is printed (pytest -s), never asserted: it depends on load."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "tools" / "fuzz" / "run.py"
CORPUS = ROOT / "tools" / "fuzz" / "corpus"
SECONDS = 3     # each; the whole file stays under a minute on two shared cores
TARGETS = ["metrics_text", "recording_lines", "kv_batch", "prometheus_answer", "toml_config",
           "command_line"]


def test_every_target_has_a_seed_corpus_and_is_listed():
    sys.path.insert(0, str(RUN.parent))
    try:
        from targets import TARGETS as listed
    finally:
        sys.path.remove(str(RUN.parent))
    assert sorted(listed) == sorted(TARGETS)
    for name in TARGETS:
        assert any((CORPUS / name).iterdir()), name


@pytest.mark.slow
@pytest.mark.parametrize("name", TARGETS)
def test_a_short_fuzz_run_finds_nothing(name, tmp_path):
    pytest.importorskip("atheris")
    scratch = tmp_path / "corpus"
    scratch.mkdir()
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    got = subprocess.run(
        [sys.executable, str(RUN), name, f"-max_total_time={SECONDS}", "-timeout=20",
         "-rss_limit_mb=1536", f"-artifact_prefix={tmp_path}/", str(scratch),
         str(CORPUS / name)],
        capture_output=True, text=True, timeout=SECONDS + 120, env=env, cwd=tmp_path)
    runs = re.findall(r"Done (\d+) runs in (\d+) second", got.stderr)
    print(f"\nfuzz {name}: {runs[-1][0] if runs else '?'} inputs in "
          f"{runs[-1][1] if runs else '?'} s")
    crashes = [p.name for p in tmp_path.iterdir() if p.name.startswith(("crash-", "timeout-",
                                                                         "oom-", "leak-"))]
    assert got.returncode == 0 and not crashes, (crashes, got.stderr[-4000:])
