#!/usr/bin/env python3
"""Run mypy over the installed package's layout: `make typecheck`.

The package maps folders onto import names (pyproject.toml's package-dir: probes/ is
infertop.probes, cli/ infertop.cli, ...) and mypy cannot follow setuptools' editable
finder, so it would see `probes.base` and `infertop.probes.base` as two modules.  This
builds the import layout as a tree of symlinks under build/typecheck/, runs mypy there
(configured in pyproject.toml's [tool.mypy]) and prints the errors with the files' real
paths, so an editor jumps to them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "build" / "typecheck"
# import folder under infertop/ -> the repository folder it comes from
MAPPED = {"probes": "probes", "cli": "cli", "tui": "tui", "themes": "themes"}


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
    m = re.match(r"infertop/(\w+)/", line)
    if m and m.group(1) in MAPPED:
        return MAPPED[m.group(1)] + "/" + line[m.end():]
    return line


def main() -> int:
    tree = build_tree()
    cmd = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
           "--cache-dir", str(ROOT / "build" / "mypy_cache"), "infertop", *sys.argv[1:]]
    run = subprocess.run(cmd, cwd=tree, capture_output=True, text=True)
    for line in (run.stdout + run.stderr).splitlines():
        print(real_path(line))
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
