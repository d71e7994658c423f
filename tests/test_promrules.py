"""`infertop rules export --format prometheus`: the catalogue as Prometheus rules, proven
with the real promtool on the real-server corpus and on demo scenarios.

The promtool tests convert each recording (``infertop rules promtool-input``'s code) to
the series Prometheus would have scraped, run the exported rules over them, and hold
the alerts to what infertop's own diagnosis raised on the very same snapshots: every
exported finding it raised fires, in the same layer, by its raise time plus the rule's
hold (``for:``) and not long before; nothing else fires; healthy recordings fire none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.inproc import run_main
from helpers.promtool_kit import (
    PROMTOOL_HINT,
    promtool_binary,
    run_promtool_test,
)
from infertop.config import DiagnosisConfig, config_from_dict
from infertop.probes.sources.demo import DemoSource
from infertop.promrules import NOT_EXPORTED, build, export_text
from infertop.promtool_asserts import INHERENT, expectations
from infertop.promtool_input import convert_snapshots
from infertop.recording import decode, iter_snapshots
from infertop.rules.registry import all_rules, codes

CORPUS = Path(__file__).parent / "corpus"
SPECS = {r.code: r.spec for r in all_rules()}
needs_promtool = pytest.mark.skipif(promtool_binary() is None, reason=PROMTOOL_HINT)

# inherent differences (inputs Prometheus cannot have): infertop.promtool_asserts
NEEDS_LOCAL_ONLY = INHERENT


def infertop(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "infertop", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})


# ---- the export itself --------------------------------------------------------------------
def test_every_rule_is_exported_or_listed_with_a_reason():
    export = build()
    alerted = {a.code for a in export.alerts}
    assert alerted | set(export.not_exported) == set(codes())
    assert not alerted & set(export.not_exported)
    for code, why in export.not_exported.items():
        assert why and why == NOT_EXPORTED[code], code
    # the examples: threads, the GIL, py-spy are not in Prometheus
    assert "GIL" in export.not_exported["SCH-001"]
    assert {"MEM-001", "DEC-001", "DEC-006", "HW-001", "HW-005"} <= alerted


def test_alerts_carry_code_severity_layer_timing_and_annotations():
    text = export_text()
    export = build()
    mem = [a for a in export.alerts if a.code == "MEM-001"]
    assert {a.severity.value for a in mem} == {"warn", "crit"}
    assert all(a.layer == "memory" and a.for_s == 3.0 and a.keep_s == 10.0 for a in mem)
    assert '- alert: "MEM-001"' in text
    assert "for: 3s" in text and "keep_firing_for: 10s" in text
    assert 'severity: "crit"' in text and 'layer: "memory"' in text
    # annotations: title, value vs threshold, remedy, the threshold's source
    block = text[text.index('- alert: "MEM-001"'):]
    block = block[:block.index("- alert:", 10)]
    for key in ("title:", "value:", "remedy:", "threshold_source:"):
        assert key in block
    assert "field: a real vLLM with 16 KV blocks" in block   # SOURCES of kv_pressure_ratio
    # not-exported rules are in the file as comments, with the reason
    assert "#   SCH-001: needs per-thread CPU and the GIL" in text


def test_thresholds_and_timing_come_from_the_config():
    cfg = config_from_dict({"thresholds": {"kv_pressure_ratio": 0.7},
                            "slo": {"ttft_p99_seconds": 0.5},
                            "diagnosis": {"window": 30, "hold_margin": 0.2},
                            "rules": {"DEC-001": {"raise_after": 20},
                                      "MEM-002": {"enabled": False}}})
    text = export_text(cfg)
    default = export_text()
    assert "infertop:kv_usage:median10s >= 0.7" in text
    assert "infertop:kv_usage:median10s >= 0.56" in text      # relaxed by the hold margin 0.2
    assert "infertop:kv_usage:median10s >= 0.85" in default
    assert "infertop:ttft_seconds:p99_30s > 0.5" in text and "[30s]" in text
    dec = text[text.index('- alert: "DEC-001"'):]
    assert dec.split("for: ", 1)[1].startswith("20s")
    assert '- alert: "MEM-002"' not in text
    assert "#   MEM-002: disabled in the config" in text


def test_hostile_config_text_cannot_break_the_yaml(tmp_path):
    # finish reasons are free text in the config: they land inside a PromQL regex string
    cfg = config_from_dict({"thresholds": {"error_reasons": ['err"or\n- alert: x', "a.b"]}})
    text = export_text(cfg)
    assert "\n- alert: x" not in text and "\n  - alert: x" not in text
    assert r'finished_reason=~"err\"or\n- alert: x|a\\.b"' in text
    promtool = promtool_binary()
    if promtool is not None:
        (tmp_path / "r.yml").write_text(text)
        check = subprocess.run([promtool, "check", "rules", str(tmp_path / "r.yml")],
                               capture_output=True, text=True, timeout=60)
        assert check.returncode == 0, check.stdout + check.stderr


@needs_promtool
def test_promtool_check_rules_accepts_the_export(tmp_path):
    out = tmp_path / "rules.yml"
    r = infertop("rules", "export", "--format", "prometheus", "-o", str(out))
    assert r.returncode == 0, r.stderr
    promtool = promtool_binary()
    assert promtool is not None
    check = subprocess.run([promtool, "check", "rules", str(out)],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS" in check.stdout


# ---- the CLI ---------------------------------------------------------------------------------
# main() in this process (a child costs ~0.5-1 s): the files, codes and stderr lines are the
# point; test_promtool_check_rules_accepts_the_export runs `rules` as a program.
def test_output_file_is_not_clobbered_without_force(tmp_path):
    out = tmp_path / "rules.yml"
    out.write_text("mine")
    r = run_main("rules", "export", "-o", str(out))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "--force" in r.stderr
    assert out.read_text() == "mine"
    r = run_main("rules", "export", "-o", str(out), "--force")
    assert r.returncode == 0 and out.read_text().startswith("# infertop diagnosis rules")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rules.yml"]  # no temp file left
    assert oct(out.stat().st_mode & 0o044) == oct(0o044)   # readable by a prometheus user


def test_output_through_a_link_or_onto_a_fifo_is_refused(tmp_path):
    """The shared safe writer: a link is not followed, a FIFO is not written (it would
    block), and nothing is left behind."""
    victim = tmp_path / "victim"
    victim.write_text("keep")
    link = tmp_path / "rules.yml"
    link.symlink_to(victim)
    r = run_main("rules", "export", "-o", str(link), "--force")
    assert r.returncode == 2 and "symbolic link" in r.stderr and "Traceback" not in r.stderr
    assert victim.read_text() == "keep" and link.is_symlink()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    r = run_main("rules", "export", "-o", str(fifo), "--force")
    assert r.returncode == 2 and "FIFO" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "rules.yml", "victim"]


def test_bad_config_and_bad_recording_are_one_line_errors(tmp_path):
    bad = tmp_path / "c.toml"
    bad.write_text("[thresholds]\nkv_pressure_ratio = 'high'\n")
    r = run_main("rules", "export", "--config", str(bad))
    assert r.returncode == 2 and "kv_pressure_ratio" in r.stderr and "Traceback" not in r.stderr
    junk = tmp_path / "x.jsonl"
    junk.write_text("not a recording\n")
    r = run_main("rules", "promtool-input", str(junk))
    assert r.returncode == 2 and "not an infertop recording" in r.stderr
    assert "Traceback" not in r.stderr


def test_config_changes_the_exported_file_like_the_screen(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[thresholds]\nkv_pressure_ratio = 0.6\n")
    r = run_main("rules", "export", "--config", str(cfg))
    assert r.returncode == 0
    assert "infertop:kv_usage:median10s >= 0.6" in r.stdout
    assert f"# thresholds: {cfg}" in r.stdout


def test_promtool_input_writes_the_scraped_families(tmp_path):
    r = run_main("rules", "promtool-input", str(CORPUS / "vllm-kv-exhaustion.jsonl.gz"),
                 "--rules", "r.yml")
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert 'rule_files:\n  - "r.yml"' in text
    # vLLM's own names and labels, as Prometheus would have scraped them
    assert 'vllm:kv_cache_usage_perc{engine=\\"0\\",instance=\\"127.0.0.1:8100\\"' in text
    assert 'vllm:num_preemptions_total{' in text
    assert 'vllm:time_to_first_token_seconds_bucket{' in text and 'le=\\"+Inf\\"' in text
    assert 'up{instance=\\"127.0.0.1:8100\\",job=\\"server\\",node=\\"vm\\"}' in text


# ---- promtool on real incidents and on demo scenarios ------------------------------------------
def _check_episodes(tmp_path: Path, snaps, host: str, kind: str = "") -> dict:
    """promtool on the converted run with the expectations ``rules promtool-input`` writes
    (infertop.promtool_asserts): the same codes in the same layers, raised within one
    evaluation interval plus one scrape of infertop's raise plus ``for:``, not long
    before, at the same worst severity; nothing else fires."""
    series = convert_snapshots(snaps, 1.0, host, kind)
    has_gpu = any(k.startswith("DCGM_") for k in series.series)
    got = expectations(snaps, series.interval, series.steps, has_gpu)
    assert got.tests, "the run is too short to assert anything"
    r = run_promtool_test(tmp_path, export_text(), series, got.tests)
    assert r.returncode == 0, (f"doctor raised {sorted(got.expected)}; promtool:\n"
                               + (r.stdout + r.stderr)[-3000:])
    return got.expected


CORPUS_NAMES = json.loads((CORPUS / "corpus.json").read_text())


@needs_promtool
@pytest.mark.integration   # promtool replays each recording against the export
@pytest.mark.parametrize("name", sorted(CORPUS_NAMES))
def test_corpus_episodes_fire_as_alerts(tmp_path, name):
    path = CORPUS / f"{name}.jsonl.gz"
    dec = decode(path.read_bytes(), path.name)
    snaps = list(iter_snapshots(dec))
    expect = _check_episodes(tmp_path, snaps, str(dec.header.get("host")),
                             str(dec.header["server"].get("kind")))
    want = CORPUS_NAMES[name]["expect"]
    # the corpus's own expectation, where Prometheus has the inputs, is among them
    for code, layer in want.items():
        if code in {a.code for a in build().alerts} and code not in NEEDS_LOCAL_ONLY:
            assert expect[code].layer == layer


# one per family of exported rule (KV, GPU memory growth over DCGM, speculative decoding,
# errors + restart + outage, busy-not-working, a lost GPU's Xid) plus a superseded symptom
DEMO_SCENARIOS = ["healthy", "mem-kv-pressure", "mem-oom-creep", "dec-spec-collapse",
                  "dec-error-restart", "hw-busy-not-working", "hw-gpu-lost",
                  "krn-below-roofline"]


@needs_promtool
@pytest.mark.integration   # promtool replays each scenario against the export
@pytest.mark.parametrize("name", DEMO_SCENARIOS)
def test_demo_scenario_episodes_fire_as_alerts(tmp_path, name):
    src = DemoSource(name, loop=False)
    snaps = []
    while (snap := src.next_sync()) is not None:
        snaps.append(snap)
    expect = _check_episodes(tmp_path, snaps, "demo")
    if name == "healthy":
        assert expect == {}
    if name == "mem-kv-pressure":
        assert expect["MEM-001"].layer == "memory"


def test_default_config_object_is_the_screens():
    assert build().config_path == "" and build(DiagnosisConfig()).alerts


# ---- the exported names are the servers' own ----------------------------------------------------
@pytest.mark.parametrize("dialect", ["vllm", "sglang", "tgi", "llamacpp"])
def test_exported_series_names_are_on_each_dialects_page(dialect):
    """The converter and the export share sample_name(), so promtool alone cannot catch a
    wrong name: hold the export's names to the exposition text each dialect serves (the
    demo renders each server's names, suffixes and labels, docs/metrics.md#exposition)."""
    import re

    from infertop.demo.exposition import render as render_page
    from infertop.promrules import raw_series

    src = DemoSource("mem-kv-pressure", loop=False, dialect=dialect)
    frame = None
    for _ in range(40):   # into the scenario: queues, preemptions, finished requests
        frame = src.step_frame()
    assert frame is not None
    page = render_page(frame, dialect)
    names = set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{| )", page, flags=re.M))
    checked = 0
    for key in ("kv.usage_ratio", "server.requests_waiting", "server.requests_running",
                "server.preemptions_total", "latency.ttft_seconds", "latency.itl_seconds",
                "spec.draft_tokens_total", "server.generation_tokens_total"):
        for r in raw_series(key):
            if r.dialect != dialect:
                continue
            family = r.name.rsplit("_bucket", 1)[0] if r.name.endswith("_bucket") else None
            served = r.name in names or (family is not None and f"{family}_bucket" in names)
            fam_on_page = any(n.startswith(r.name.rsplit("_total", 1)[0]) for n in names)
            if fam_on_page:   # the demo serves this family: the exact sample name must match
                assert served, f"{dialect}: export reads {r.name}, page has " \
                               f"{sorted(n for n in names if n.startswith(r.name[:12]))}"
                checked += 1
    assert checked >= 3, f"{dialect}: only {checked} names checked"


def test_every_threshold_in_an_alerts_expression_is_listed_as_its_source():
    """An alert's threshold_source names each threshold its expression compares with
    (SCH-002's `unless` clause took deferred_share_min without recording it)."""
    sch002 = [a for a in build().alerts if a.code == "SCH-002"]
    assert sch002 and all("thresholds.deferred_share_min" in a.sources for a in sch002)
