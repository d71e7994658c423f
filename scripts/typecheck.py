#!/usr/bin/env python3
"""Run mypy over the installed package's layout: `make typecheck`.

The package maps folders onto import names (pyproject.toml's package-dir: probes/ is
infertop.probes, cli/ infertop.cli, ...) and mypy cannot follow setuptools' editable
finder, so it would see `probes.base` and `infertop.probes.base` as two modules.  This
builds the import layout as a tree of symlinks under build/typecheck/, runs mypy there
(configured in pyproject.toml's [tool.mypy]) and prints the errors with the files' real
paths, so an editor jumps to them.

    scripts/typecheck.py                  the package (and the tests when CHECK_TESTS)
    scripts/typecheck.py --tests          the package and every test file (TEST_GLOBS)
    scripts/typecheck.py --tests FILES..  the package and those test files; only the
                                          errors in FILES are printed (and set the exit
                                          status), the others are counted on one line

The tests are checked as pytest imports them: tests/ is on the path (mypy_path), so
`helpers.x` and `conftest` resolve; each test file is a top-level module (TEST_PATH).  Other
arguments (those starting with "-") go to mypy as they are.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "build" / "typecheck"
TESTS = ROOT / "tests"
# import folder under infertop/ -> the repository folder it comes from
MAPPED = {"probes": "probes", "cli": "cli", "tui": "tui", "themes": "themes"}

# THE SWITCH (issue 34 item 6): True once every file of TEST_GLOBS is clean; then a plain
# `make typecheck` (and so .ci/run) checks the tests too.
CHECK_TESTS = True
# the test files `--tests` (and CHECK_TESTS) check, relative to tests/
# (the plug-in fixture package and the corpus's load tools are Python the tests run too)
TEST_GLOBS = ("*.py", "helpers/*.py", "fixtures/plugins/*/*.py", "corpus/tools/*.py")
# import roots of the tests: tests/ (helpers.x, conftest) and the folders tests add to sys.path
TEST_PATH = (TESTS, ROOT / "tools" / "fuzz", ROOT / "scripts")


def build_tree() -> Path:
    pkg = TREE / "infertop"
    pkg.mkdir(parents=True, exist_ok=True)
    want = {p.name: p for p in (ROOT / "infertop").iterdir() if p.name != "__pycache__"}
    want.update({name: ROOT / src for name, src in MAPPED.items()})
    for entry in pkg.iterdir():   # drop links to files since removed or renamed
        if entry.name not in want or os.readlink(entry) != str(want[entry.name]):
            entry.unlink()
    for name, src in want.items():
        if not (pkg / name).is_symlink():
            (pkg / name).symlink_to(src)
    return TREE


def real_path(line: str) -> str:
    """The error line with the repository-relative path of its file."""
    root = str(ROOT) + os.sep
    if line.startswith(root):      # a test file: mypy names it by its absolute path
        return line[len(root):]
    m = re.match(r"infertop/(\w+)/", line)
    if m and m.group(1) in MAPPED:
        return MAPPED[m.group(1)] + "/" + line[m.end():]
    return line


def all_test_files() -> list[Path]:
    return sorted(p for g in TEST_GLOBS for p in TESTS.glob(g))


def mypy_command(test_files: list[Path], mypy_args: list[str]) -> tuple[list[str], dict[str, str]]:
    cmd = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")]
    env = dict(os.environ)
    if not test_files:
        cmd += ["--cache-dir", str(ROOT / "build" / "mypy_cache"), "infertop"]
        return cmd + mypy_args, env
    # tests/ as pytest puts it on sys.path, and the folders tests put there themselves
    # (the fuzz targets' list, this script); a cache of its own, since the search path
    # differs from the package-only run's
    env["MYPYPATH"] = os.pathsep.join(str(p) for p in TEST_PATH)
    cmd += ["--cache-dir", str(ROOT / "build" / "mypy_cache_tests"),
            "--explicit-package-bases", "infertop", *map(str, test_files)]
    return cmd + mypy_args, env


def only_listed(lines: list[str], names: set[str]) -> tuple[list[str], int, set[str]]:
    """The output lines (errors and their notes) of the files named, how many errors they
    are, and the other files with errors: a helper's or another file's are not theirs."""
    shown, other = [], set()
    for line in lines:
        path = line.split(":", 1)[0]
        if path in names:
            shown.append(line)
        elif ": error:" in line:
            other.add(path)
    return shown, sum(": error:" in line for line in shown), other


def main(argv: list[str]) -> int:
    mypy_args = [a for a in argv if a.startswith("-") and a != "--tests"]
    listed = [Path(a).resolve() for a in argv if not a.startswith("-")]
    if listed and "--tests" not in argv:
        print("typecheck: file arguments need --tests (they are test files)", file=sys.stderr)
        return 2
    missing = [p for p in listed if not p.is_file()]
    if missing:
        print(f"typecheck: no such file: {missing[0]}", file=sys.stderr)
        return 2
    tests = listed or (all_test_files() if "--tests" in argv or CHECK_TESTS else [])
    cmd, env = mypy_command(tests, mypy_args)
    run = subprocess.run(cmd, cwd=build_tree(), env=env, capture_output=True, text=True)
    lines = [real_path(line) for line in (run.stdout + run.stderr).splitlines()]
    if not listed:
        print("\n".join(lines))
        return run.returncode
    names = {str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p) for p in listed}
    shown, errors, other = only_listed(lines, names)
    if shown:
        print("\n".join(shown))
    print(f"typecheck: {errors} errors in the {len(names)} listed files"
          + (f"; errors in {len(other)} files not listed (--tests alone shows all)" if other else ""))
    if run.returncode not in (0, 1):   # mypy itself failed (a crash, a bad option)
        print("\n".join(lines[-5:]), file=sys.stderr)
        return run.returncode
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
