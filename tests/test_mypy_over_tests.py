"""scripts/typecheck.py --tests: mypy over the test files as pytest imports them, and with
FILES only those files' errors (issue 34 item 6).  The filter and the arguments are
checked here without mypy; one run of mypy on two small files checks the whole path."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

sys.path.insert(0, str(ROOT / "scripts"))
try:
    import typecheck
finally:
    sys.path.remove(str(ROOT / "scripts"))


def test_paths_come_out_repository_relative() -> None:
    assert typecheck.real_path(f"{ROOT}/tests/test_x.py:3: error: no") == \
        "tests/test_x.py:3: error: no"
    assert typecheck.real_path("infertop/probes/base.py:1: error: no") == \
        "probes/base.py:1: error: no"
    assert typecheck.real_path("infertop/model.py:1: error: no") == \
        "infertop/model.py:1: error: no"


def test_only_the_listed_files_errors_are_shown_and_counted() -> None:
    lines = ["tests/test_a.py:3: error: A  [union-attr]",
             "tests/test_a.py:3: note: about A",
             "tests/helpers/h.py:9: error: H  [arg-type]",
             "tests/test_b.py:1: error: B  [misc]",
             "Found 3 errors in 3 files (checked 5 source files)"]
    shown, errors, other = typecheck.only_listed(lines, {"tests/test_a.py"})
    assert shown == lines[:2] and errors == 1
    assert other == {"tests/helpers/h.py", "tests/test_b.py"}
    assert typecheck.only_listed(lines, {"tests/test_c.py"})[:2] == ([], 0)


def test_every_test_file_is_checked_with_tests() -> None:
    files = typecheck.all_test_files()
    assert Path(__file__) in files and ROOT / "tests" / "conftest.py" in files
    assert ROOT / "tests" / "helpers" / "snapkit.py" in files
    assert all(f.suffix == ".py" and f.is_file() for f in files)


def test_file_arguments_without_tests_or_missing_are_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert typecheck.main(["tests/conftest.py"]) == 2
    assert "need --tests" in capsys.readouterr().err
    assert typecheck.main(["--tests", "tests/no_such_test.py"]) == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.slow   # mypy over the package and two files (seconds warm, ~30 s cold)
def test_the_listed_files_errors_set_the_exit_status(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("mypy")
    # names of their own each run: mypy's incremental cache keys a module by its name, and
    # a file of the same name and text in another tmp folder is taken from the cache with
    # the error under the earlier run's path (the second local run failed)
    tag = uuid.uuid4().hex[:12]
    clean = tmp_path / f"typed_ok_{tag}.py"
    clean.write_text("from helpers.snapkit import must\n\n\n"
                     "def test_x() -> None:\n    assert must(1) == 1\n")
    bad = tmp_path / f"typed_bad_{tag}.py"
    bad.write_text("from infertop.model import Snapshot\n\n\n"
                   "def test_y(s: Snapshot) -> None:\n"
                   "    assert s.process_meta().tree == ()\n")   # Optional read unnarrowed
    assert typecheck.main(["--tests", str(clean)]) == 0
    assert "0 errors in the 1 listed files" in capsys.readouterr().out
    assert typecheck.main(["--tests", str(clean), str(bad)]) == 1
    out = capsys.readouterr().out
    assert f"{bad}:5: error:" in out and "[union-attr]" in out
    assert "1 errors in the 2 listed files" in out
