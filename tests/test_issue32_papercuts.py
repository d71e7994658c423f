"""Issue 32 item 7: the smaller things seen on real servers."""

from __future__ import annotations

from pathlib import Path

from helpers.inproc import run_main
from infertop.htmlreport import episode_title

CORPUS = Path(__file__).parent / "corpus"


def test_markdown_timeline_rows_carry_each_episodes_own_title():
    """vllm-slow-restart has two DEC-001 episodes (980 ms before the outage, 585 ms after):
    each timeline row says its own, not the last one's twice."""
    out = run_main("report", str(CORPUS / "vllm-slow-restart.jsonl.gz"),
                   "--format", "markdown").stdout
    rows = [line for line in out.splitlines() if line.startswith("| DEC-001 |")]
    assert len(rows) == 2
    assert "TTFT p99 980 ms over the 200 ms SLO |" in rows[0]
    assert "TTFT p99 585 ms over the 200 ms SLO: caused by SCH-004" in rows[1]


def test_episode_title_cuts_the_evidence_not_a_caused_by():
    s = ("DEC-001 TTFT p99 585 ms over the 200 ms SLO: caused by SCH-004 host CPU saturated: "
         "latency.ttft_seconds{engine=0,quantile=0.99} 585 ms > 200 ms")
    assert episode_title("DEC-001", s) == ("TTFT p99 585 ms over the 200 ms SLO: caused by "
                                           "SCH-004 host CPU saturated")
    assert episode_title("DEC-005", "DEC-005 server restarted") == "server restarted"
