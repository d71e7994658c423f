"""Every reading key the code names is declared in infertop/keys.py.

A key is a string: a typo in a pane, the report or compare (``"gpu.util_ratoi"``) would
read nothing and show a dash, silently.  This scans the source of every package for
string literals shaped like a key (``<namespace>.<name>`` with a namespace of keys.py)
and fails on any that keys.py does not declare (SPECS, or EVIDENCE_KEYS for the names
only a rule's evidence carries).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from infertop.keys import EVIDENCE_KEYS, NAMESPACES, SPECS

ROOT = Path(__file__).resolve().parent.parent
# every package that names keys: panes and screens, the commands, the core (report,
# compare, htmlreport, rules, derive, the demo) and the probes that emit them
SCANNED = ("tui", "cli", "infertop", "probes")
KEY_SHAPE = re.compile(r"(%s)\.[a-z][a-z0-9_]*[a-z0-9]" % "|".join(sorted(NAMESPACES)))
DECLARED = set(SPECS) | set(EVIDENCE_KEYS)
# a file name is not a key ("server.py", "process.json")
FILE_SUFFIXES = {"py", "json", "jsonl", "toml", "md", "html", "txt", "gz", "tcss", "svg"}


def undeclared_keys(source: str, filename: str = "<snippet>") -> list[tuple[int, str]]:
    """(line, literal) of each key-shaped string literal in ``source`` keys.py lacks."""
    out = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and KEY_SHAPE.fullmatch(node.value) and node.value not in DECLARED \
                and node.value.rsplit(".", 1)[1] not in FILE_SUFFIXES:
            out.append((node.lineno, node.value))
    return sorted(out)


def test_a_planted_typo_is_caught():
    snippet = ('def render(ctx):\n'
               '    util = ctx.value("gpu.util_ratio")\n'        # declared: fine
               '    sm = ctx.value("gpu.sm_actve_ratio")\n'      # the typo
               '    kv = frame.history.get(("kv.usage_ratio", ()))\n'
               '    return f"{util} {sm} {kv}", "server.py", "latency."\n')
    assert undeclared_keys(snippet) == [(3, "gpu.sm_actve_ratio")]


def test_evidence_only_names_are_declared_but_not_readings():
    assert undeclared_keys('Evidence("server.downtime_seconds")') == []
    assert not EVIDENCE_KEYS & set(SPECS)


def test_every_key_literal_in_the_code_is_declared():
    bad = []
    for top in SCANNED:
        for f in sorted((ROOT / top).rglob("*.py")):
            for line, key in undeclared_keys(f.read_text(), str(f)):
                bad.append(f"{f.relative_to(ROOT)}:{line}: {key!r}")
    assert not bad, "undeclared reading keys (declare them in infertop/keys.py):\n" + \
        "\n".join(bad)


def test_the_scan_sees_the_panes_report_and_compare():
    """The scan is not vacuous: the files the issue names do use declared keys."""
    for rel in ("tui/panes/memory.py", "tui/panes/decoding.py", "infertop/report.py",
                "infertop/compare.py"):
        tree = ast.parse((ROOT / rel).read_text())
        keys = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
                and isinstance(n.value, str) and KEY_SHAPE.fullmatch(n.value)}
        assert keys, rel
