"""Run the exported rules on converted recordings with the real ``promtool``.

Debian's ``prometheus`` package ships ``promtool`` (.ci/run installs it); without it the
callers skip with ``PROMTOOL_HINT``.  Each check plays the same snapshots through
infertop's own Pipeline/Diagnoser (what ``doctor`` raises, and when) and writes one
promtool test whose expectations are those episodes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from infertop.promtool_input import InputSeries, render

PROMTOOL_HINT = ("these tests need promtool: `apt-get install prometheus` (Debian/Ubuntu ships "
                 "promtool with it; .ci/run installs it), or put `promtool` on PATH")


def promtool_binary() -> str | None:
    return os.environ.get("INFERTOP_PROMTOOL") or shutil.which("promtool")


def run_promtool_test(workdir: Path, rules: str, series: InputSeries,
                      tests: list[str]) -> subprocess.CompletedProcess:
    (workdir / "rules.yml").write_text(rules)
    body = "    promql_expr_test:\n" + "\n".join(tests) + "\n"
    (workdir / "test.yml").write_text(render(series, ["rules.yml"], body))
    binary = promtool_binary()
    assert binary is not None
    return subprocess.run([binary, "test", "rules", str(workdir / "test.yml")],
                          capture_output=True, text=True, timeout=600)


def check_alerts(tmp_path: Path, series: InputSeries,
                 checks: list[tuple[str, int, bool]]) -> None:
    """``promtool test rules`` of infertop's export on ``series``.  ``checks``: (an
    ``ALERTS`` selector body, eval time in s, whether exactly one such alert fires)."""
    from infertop.promrules import export_text
    (tmp_path / "rules.yml").write_text(export_text())
    tests = []
    for sel, at, want in checks:
        samples = ("\n        exp_samples:\n          - labels: '{}'\n            value: 1"
                   if want else "\n        exp_samples: []")
        tests.append(f"      - expr: 'count(ALERTS{{{sel}, alertstate=\"firing\"}})'\n"
                     f"        eval_time: {at}s{samples}")
    body = "    promql_expr_test:\n" + "\n".join(tests) + "\n"
    (tmp_path / "t.yml").write_text(render(series, ["rules.yml"], body))
    binary = promtool_binary()
    assert binary is not None, PROMTOOL_HINT
    r = subprocess.run([binary, "test", "rules", str(tmp_path / "t.yml")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
