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


@pytest.mark.slow
def test_minimise_keeps_what_the_merge_picks_and_drops_the_rest(tmp_path: Path) -> None:
    """`make fuzz-minimise` (run.py --minimise): libFuzzer's -merge=1 through the wrapper
    script (atheris' own argv[0], run.py, neither runs alone nor names the target: before,
    every merge attempt failed with 'Permission denied' and kept nothing).  On a copy of the
    toml_config seeds with a duplicate and a few redundant copies of one seed added."""
    pytest.importorskip("atheris")
    import shutil
    root = tmp_path / "corpus"
    shutil.copytree(CORPUS / "toml_config", root / "toml_config")
    seed = sorted((root / "toml_config").iterdir())[0]
    (root / "toml_config" / "zz-duplicate").write_bytes(seed.read_bytes())
    for i in range(3):   # the same config with trailing blank lines: no new coverage
        (root / "toml_config" / f"padded-{i}").write_bytes(seed.read_bytes() + b"\n" * (i + 1))
    before = {p.name for p in (root / "toml_config").iterdir()}
    got = subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import run; "
         "sys.exit(run.minimise(['toml_config'], root=sys.argv[2]))",
         str(RUN.parent), str(root)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert got.returncode == 0, got.stderr[-3000:]
    after = {p.name for p in (root / "toml_config").iterdir()}
    assert after and after < before
    assert not {"zz-duplicate", "padded-0", "padded-1", "padded-2"} & after
    assert re.search(r"toml_config: \d+ inputs, \d+ bytes -> \d+ inputs, \d+ bytes", got.stdout)
