"""`infertop rules promtool-input` writes a test that can fail (issue 31 items 3-4).

Before, the file held input series only: `promtool test rules` printed SUCCESS for any
recording and any rules.  Now it holds the expectations of infertop's own diagnosis of
the recording (infertop.promtool_asserts): the codes, layers, raise times and worst
severities both engines must agree on; a file that would assert nothing is refused
unless --no-asserts.
"""

from __future__ import annotations

import gzip
import subprocess
from pathlib import Path

import pytest

from helpers.inproc import run_main
from helpers.promtool_kit import PROMTOOL_HINT, promtool_binary
from infertop.promrules import export_text

CORPUS = Path(__file__).parent / "corpus"
KV = CORPUS / "vllm-kv-exhaustion.jsonl.gz"


def test_the_test_file_asserts_what_infertop_raised():
    r = run_main("rules", "promtool-input", str(KV), "--rules", "r.yml")
    assert r.returncode == 0, r.stderr
    assert "promql_expr_test:" in r.stdout
    assert 'alertname="MEM-001", layer="memory"' in r.stdout
    assert 'alertname="DEC-001", severity="crit"' in r.stdout
    # MEM-001 reached warn on this recording (57 preemptions in 100 s): crit must not fire
    assert ('ALERTS{alertstate="firing", alertname="MEM-001", severity=~"crit"}[100s]))\'\n'
            "        eval_time: 100s\n        exp_samples: []") in r.stdout


def test_no_asserts_writes_the_input_series_alone():
    r = run_main("rules", "promtool-input", str(KV), "--no-asserts")
    assert r.returncode == 0, r.stderr
    assert "input_series:" in r.stdout and "promql_expr_test" not in r.stdout


def _short(tmp_path: Path, ticks: int) -> Path:
    lines = gzip.decompress(KV.read_bytes()).decode().splitlines(keepends=True)
    out = tmp_path / "short.jsonl.gz"
    out.write_bytes(gzip.compress("".join(lines[:1 + ticks]).encode()))
    return out


def test_a_test_that_would_assert_nothing_is_refused_unless_no_asserts(tmp_path):
    short = _short(tmp_path, 3)
    r = run_main("rules", "promtool-input", str(short))
    assert r.returncode == 2, r.stdout[-500:]
    assert "assert nothing" in r.stderr and "--no-asserts" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run_main("rules", "promtool-input", str(short), "--no-asserts")
    assert r.returncode == 0 and "input_series:" in r.stdout


@pytest.mark.integration
@pytest.mark.skipif(promtool_binary() is None, reason=PROMTOOL_HINT)
def test_promtool_passes_with_the_export_and_fails_with_rules_that_disagree(tmp_path):
    r = run_main("rules", "promtool-input", str(KV), "--rules", "rules.yml")
    assert r.returncode == 0, r.stderr
    (tmp_path / "t.yml").write_text(r.stdout)

    binary = promtool_binary()
    assert binary is not None

    def promtool(rules: str) -> subprocess.CompletedProcess:
        (tmp_path / "rules.yml").write_text(rules)
        return subprocess.run([binary, "test", "rules", str(tmp_path / "t.yml")],
                              capture_output=True, text=True, timeout=300)

    good = promtool(export_text())
    assert good.returncode == 0, (good.stdout + good.stderr)[-2000:]
    # the export with MEM-001's critical level firing at any preemption: promtool fails
    rate = "infertop:preemptions:rate60s >= "
    lifted = export_text().replace(rate + "1", rate + "0.01")
    bad = promtool(lifted)
    assert bad.returncode != 0 and "MEM-001" in bad.stdout + bad.stderr
    empty = promtool("groups: []\n")
    assert empty.returncode != 0


# ---- the expectations themselves (no promtool) ------------------------------------------
def _kv_run():
    from infertop.promtool_input import convert_snapshots
    from infertop.recording import decode, iter_snapshots
    dec = decode(KV.read_bytes(), KV.name)
    snaps = list(iter_snapshots(dec))
    return snaps, convert_snapshots(snaps, 1.0, "vm", "vllm")


def test_expectations_of_the_kv_exhaustion_recording():
    from infertop.findings import Severity
    from infertop.promtool_asserts import expectations
    snaps, series = _kv_run()
    got = expectations(snaps, series.interval, series.steps, False)
    assert got.judged and got.skipped == {}
    assert {c: e.worst for c, e in got.expected.items()} == {
        "MEM-001": Severity.WARN, "DEC-001": Severity.CRIT}   # SCH-004: not exported
    text = got.yaml()
    assert text.startswith("    promql_expr_test:\n")
    # MEM-001's worst is warn: warn fired, crit did not; DEC-001's crit has no level above
    assert ('alertname="MEM-001", severity=~"warn"}[100s]))\'\n        eval_time: 100s\n'
            '        exp_samples:\n          - labels: \'{alertname="MEM-001", '
            'severity="warn"}\'') in text
    assert 'alertname="MEM-001", severity=~"crit"}[100s]))\'\n        eval_time: 100s\n' \
           '        exp_samples: []' in text
    assert 'alertname="DEC-001", severity=~"crit"' in text
    assert 'alertname="DEC-001", severity=~"' + "warn" not in text
    # raised by infertop's raise (28.9 s) + for (3 s: median-judged) + one interval and one
    # scrape, and not 10 s before
    assert 'alertname="MEM-001"}[34s]))\'\n        eval_time: 34s' in text
    assert 'alertname="MEM-001"}[15s]))\'\n        eval_time: 15s\n        exp_samples: []' \
        in text


def test_a_code_judged_from_inputs_prometheus_lacks_is_skipped_with_its_reason(monkeypatch):
    import infertop.promtool_asserts as pa
    from helpers.rulekit import tick
    from infertop.promtool_asserts import expectations
    snaps = [tick(1000.0 + i, {"server.requests_waiting": {"engine=0,model=m": 12.0 if i > 20
                                                           else 0.0},
                               "server.requests_running": {"engine=0,model=m": 8.0},
                               "kv.usage_ratio": {"engine=0,model=m": 0.3},
                               "server.setting": {"name=max_num_seqs": "8"}})
             for i in range(60)]
    # since issue 32 both engines read the cap from the page (the batch pinned at 8 while
    # 12 wait): nothing is inherent, so SCH-002 is asserted like any code
    assert pa.INHERENT == {}
    plain = expectations(snaps, 1.0, 60, has_gpu=False)
    assert "SCH-002" in plain.expected and not plain.skipped
    # the mechanism for a code Prometheus cannot judge: skipped with its reason, no GPU only
    monkeypatch.setitem(pa.INHERENT, "SCH-002", "no GPU readings: judged by the cap setting")
    got = expectations(snaps, 1.0, 60, has_gpu=False)
    assert "SCH-002" in got.skipped and "SCH-002" not in got.expected
    assert "cap setting" in got.skipped["SCH-002"]
    assert "SCH-002" not in got.yaml()
    with_gpu = expectations(snaps, 1.0, 60, has_gpu=True)
    assert "SCH-002" in with_gpu.expected and not with_gpu.skipped


def test_a_run_as_long_as_the_rules_need_is_judged_a_shorter_one_is_not():
    from helpers.rulekit import tick
    from infertop.promtool_asserts import episodes, expectations
    from infertop.rules.engine import Diagnoser
    need = int(Diagnoser().judge_after())            # 8 s
    snaps = [tick(1000.0 + i, {"kv.usage_ratio": {"engine=0,model=m": 0.3}})
             for i in range(need + 1)]
    assert expectations(snaps, 1.0, len(snaps), False).judged
    short = expectations(snaps[:-1], 1.0, len(snaps) - 1, False)
    assert not short.judged and short.tests == [] and short.yaml() == ""
    assert episodes([]) == ({}, 0.0, 0.0)


def test_a_window_of_zero_seconds_is_written_as_one():
    from infertop.promtool_asserts import fired_expr
    assert fired_expr(0).endswith("[1s]))")
    assert fired_expr(30, "MEM-001").endswith('alertname="MEM-001"}[30s]))')


def test_the_worst_severity_is_the_highest_the_episode_reached():
    from helpers.rulekit import tick
    from infertop.config import config_from_dict
    from infertop.findings import Severity
    from infertop.promtool_asserts import episodes, fired_expr
    cfg = config_from_dict({"thresholds": {"gpu_hot_seconds": 10, "gpu_very_hot_seconds": 10}})
    snaps = [tick(1000.0 + i, {"gpu.temp_celsius": {"gpu=0": 88.0 if i < 30 else 95.0}})
             for i in range(60)]
    eps, start, length = episodes(snaps, cfg)
    assert eps["HW-006"].worst is Severity.CRIT and start == 1000.0 and length == 59.0
    assert 9 <= eps["HW-006"].first <= 12   # held 10 s (one second of slack: covered())
    assert 'alertname!~"HW-001|KRN-001"' in fired_expr(10, unless=("KRN-001", "HW-001"))
