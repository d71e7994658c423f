"""Property (issue 36, item 4: the resources dimension): each reader, under a memory limit
with hostile input of drawn sizes, ends with a one-line refusal or a reading, within a
bounded peak RSS and without a hang.

Each reader runs in a child (tests/helpers/resource_child.py) whose address space is
capped at ``LIMIT_MB`` (RLIMIT_AS): one that holds what it should stream, or builds what
it should refuse, dies of MemoryError there instead of swapping the box.  The inputs: a
/metrics page of 40-60k series, an 8 MB label, 2M open braces, 600k comment lines; a
recording that is a gzip bomb (150-300 MB of one line), one spanning 1970-2950 and one
with a 40 MB line (replay and `rules promtool-input`); a 100k-deep TOML array and a 10 MB
config; a KV batch of a million hashes, a nested hash and 200k nested lists; Prometheus
answers of 60-120k series, 1M open brackets and a 60 MB string.  Peaks measured
2026-12-03: 47-280 MB.  The child's timeout only catches a hang; no speed is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.props import props, tried

CHILD = Path(__file__).resolve().parent / "helpers" / "resource_child.py"
LIMIT_MB = 1536      # the address space each reader gets
PEAK_MB = 512        # the RSS it may reach (measured peaks 47-280 MB)
HANG_S = 300         # no reader takes a minute of these on two busy cores


@pytest.mark.slow
@pytest.mark.parametrize("reader", ["metrics", "recording", "config", "kv", "prometheus"])
@props(1)
@given(seed=st.integers(0, 2 ** 32 - 1))
def test_each_reader_stays_in_its_budget_on_hostile_input(reader, seed):
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    got = subprocess.run([sys.executable, str(CHILD), reader, str(seed), str(LIMIT_MB)],
                         capture_output=True, text=True, timeout=HANG_S, env=env)
    assert got.returncode == 0, got.stderr[-3000:]
    report = json.loads(got.stdout.strip().splitlines()[-1])
    print(f"\n{reader} (seed {seed}): peak {report['peak_rss_mb']} MB: {report['outcomes']}")
    assert report["peak_rss_mb"] < PEAK_MB, report
    for name, outcome in report["outcomes"].items():
        assert outcome and "\n" not in outcome, (name, outcome)
    tried(f"{reader} under {LIMIT_MB} MB", "its reader")
