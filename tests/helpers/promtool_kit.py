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
from dataclasses import dataclass
from pathlib import Path

from infertop.model import Snapshot
from infertop.pipeline import Pipeline
from infertop.promtool_input import InputSeries, render
from infertop.rules.engine import Diagnoser

PROMTOOL_HINT = ("these tests need promtool: `apt-get install prometheus` (Debian/Ubuntu ships "
                 "promtool with it; .ci/run installs it), or put `promtool` on PATH")


def promtool_binary() -> str | None:
    return os.environ.get("INFERTOP_PROMTOOL") or shutil.which("promtool")


@dataclass(frozen=True)
class Episode:
    code: str
    layer: str
    first: float      # seconds after the first snapshot


def doctor_episodes(snaps: list[Snapshot]) -> dict[str, Episode]:
    """Each code infertop's own diagnosis raised, its layer and when it first was active."""
    pipeline = Pipeline(Diagnoser(fleet=False))
    out: dict[str, Episode] = {}
    t0 = snaps[0].time
    for snap in snaps:
        for f in pipeline.feed(snap).findings:
            if f.code not in out:
                out[f.code] = Episode(f.code, f.layer.value, snap.time - t0)
    return out


def fired_expr(window_s: int, code: str = "", unless: tuple[str, ...] = ()) -> str:
    sel = 'alertstate="firing"' + (f', alertname="{code}"' if code else "")
    if unless:
        sel += f', alertname!~"{"|".join(sorted(unless))}"'
    return f"group by (alertname, layer) (max_over_time(ALERTS{{{sel}}}[{window_s}s]))"


def expr_test(expr: str, at: int, samples: list[tuple[str, str]]) -> str:
    lines = [f"      - expr: '{expr}'", f"        eval_time: {at}s"]
    if not samples:
        return "\n".join(lines + ["        exp_samples: []"])
    lines.append("        exp_samples:")
    for code, layer in samples:
        lines += [f"          - labels: '{{alertname=\"{code}\", layer=\"{layer}\"}}'",
                  "            value: 1"]
    return "\n".join(lines)


def run_promtool_test(workdir: Path, rules: str, series: InputSeries,
                      tests: list[str]) -> subprocess.CompletedProcess:
    (workdir / "rules.yml").write_text(rules)
    body = "    promql_expr_test:\n" + "\n".join(tests) + "\n"
    (workdir / "test.yml").write_text(render(series, ["rules.yml"], body))
    binary = promtool_binary()
    assert binary is not None
    return subprocess.run([binary, "test", "rules", str(workdir / "test.yml")],
                          capture_output=True, text=True, timeout=600)
