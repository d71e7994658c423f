#!/usr/bin/env python3
"""The differential table of docs/alerts.md: both engines' verdicts on each recording.

For every recording of tests/corpus and the demo scenarios tests/test_promrules.py plays,
infertop's own diagnosis (code: first raised, worst severity) beside what the exported
rules fired in ``promtool test rules`` on the same converted series (code: first firing,
worst severity).  The Prometheus side is read back from promtool's own report: one
expression per run whose expected value is left empty, so promtool prints what it got.

    python tools/promtool_table.py            # Markdown rows on stdout
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from infertop.probes.sources.demo import DemoSource  # noqa: E402
from infertop.promrules import export_text  # noqa: E402
from infertop.promtool_asserts import episodes  # noqa: E402
from infertop.promtool_input import convert_snapshots, render  # noqa: E402
from infertop.recording import decode, iter_snapshots  # noqa: E402

DEMOS = ["healthy", "mem-kv-pressure", "mem-oom-creep", "dec-spec-collapse",
         "dec-error-restart", "hw-busy-not-working", "hw-gpu-lost", "krn-below-roofline"]
RANK = {"notice": 1, "warn": 2, "crit": 3}


def prometheus_side(snaps, host: str, kind: str) -> dict[str, tuple[float, str]]:
    """code -> (first firing, seconds after the first snapshot; worst severity fired)."""
    series = convert_snapshots(snaps, 1.0, host, kind)
    end = series.steps - 1
    expr = (f"min_over_time((timestamp(ALERTS{{alertstate=\"firing\"}}))[{end}s:1s])")
    tests = (f"    promql_expr_test:\n      - expr: '{expr}'\n        eval_time: {end}s\n"
             "        exp_samples: []\n")
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "rules.yml").write_text(export_text())
        (Path(d) / "t.yml").write_text(render(series, ["rules.yml"], tests))
        r = subprocess.run(["promtool", "test", "rules", str(Path(d) / "t.yml")],
                           capture_output=True, text=True, timeout=600)
    out: dict[str, tuple[float, str]] = {}
    for labels, value in re.findall(r"\{([^{}]*)\} ([0-9.eE+-]+)", r.stdout + r.stderr):
        lab = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        code, sev = lab.get("alertname"), lab.get("severity", "")
        if not code:
            continue
        t = float(value)
        old = out.get(code)
        first = t if old is None else min(old[0], t)
        worst = sev if old is None or RANK.get(sev, 0) > RANK.get(old[1], 0) else old[1]
        out[code] = (first, worst)
    return out


def row(name: str, snaps, host: str, kind: str) -> str:
    eps, _t0, _n = episodes(snaps)
    prom = prometheus_side(snaps, host, kind)

    def ours() -> str:
        return ", ".join(f"{c} {e.first:.0f} {e.worst.value}" for c, e in
                         sorted(eps.items(), key=lambda kv: kv[1].first)) or "none"

    def theirs() -> str:
        return ", ".join(f"{c} {t:.0f} {s}" for c, (t, s) in
                         sorted(prom.items(), key=lambda kv: kv[1][0])) or "none"
    return f"| {name} | {ours()} | {theirs()} |"


def main() -> int:
    corpus = ROOT / "tests" / "corpus"
    names = json.loads((corpus / "corpus.json").read_text())
    print("| recording | infertop: code, first raised (s), worst | Prometheus: code, "
          "first firing (s), worst |")
    print("|---|---|---|")
    for name in sorted(names):
        path = corpus / f"{name}.jsonl.gz"
        dec = decode(path.read_bytes(), path.name)
        snaps = list(iter_snapshots(dec))
        print(row(name, snaps, str(dec.header.get("host")),
                  str(dec.header["server"].get("kind"))), flush=True)
    for name in DEMOS:
        src = DemoSource(name, loop=False)
        snaps = []
        while (snap := src.next_sync()) is not None:
            snaps.append(snap)
        print(row(f"demo {name}", snaps, "demo", ""), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
