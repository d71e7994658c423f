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


def test_vllm_preemptions_per_request_cached_prompt_tokens_and_inference_time_are_read():
    from helpers.rulekit import Feed, Hist
    from infertop.dialects import readings_from_exposition
    page = (Path(__file__).parent / "fixtures" / "metrics" / "vllm-0.32-busy.prom").read_text()
    rs = readings_from_exposition(page, "v").readings
    keys = {r.key: r for r in rs}
    assert keys["request.preemptions"].value == 138.0          # 138 finished, none preempted
    assert keys["latency.inference_seconds"].value == 138.0
    assert keys["kv.prompt_tokens_cached_total"].value == 0.0
    # derived over the window: the mean preemptions per request and the cached share
    f = Feed()
    lab = "engine=0,instance=v,model=m"
    h = Hist(bounds=(0, 1, 2))
    for n in range(5):
        h.observe(0, 3).observe(1, 1)
        f.tick({"request.preemptions": {lab: h.value()},
                "server.prompt_tokens_total": {lab: 1000.0 * n},
                "kv.prompt_tokens_cached_total": {lab: 250.0 * n}})
    from infertop.derive import derive
    got = {r.key: r.value for r in derive(f.history)}
    assert got["request.preemptions_mean"] == 0.25
    assert got["kv.prompt_cached_ratio"] == 0.25


def test_kv_pressure_without_gpu_readings_does_not_say_add_gpus():
    from helpers.rulekit import Feed
    lab = "instance=s,model=m"
    f = Feed()
    f.run(lambda: {"kv.usage_ratio": {lab: 0.97}, "server.requests_waiting": {lab: 4}}, 30)
    (got,) = f.active("MEM-001")
    assert "add GPUs" not in got.remedy and "--max-num-seqs" in got.remedy
    g = Feed()
    g.run(lambda: {"kv.usage_ratio": {lab: 0.97}, "server.requests_waiting": {lab: 4},
                   "gpu.util_ratio": {"gpu=0": 0.9}}, 30)
    assert "add GPUs" in g.active("MEM-001")[0].remedy


def test_pyspy_summary_counts_the_samples_the_svg_and_speedscope_count():
    """On-CPU samples without a Python frame (native code: 16 of 76 here) are in the SVG
    and the speedscope file; the summary said 60 (2,239 vs 2,255 on a real record)."""
    import collections
    import re

    from infertop.probes.capture import pyspy
    from infertop.probes.capture.pyspy import RecordResult, StackFrame, ThreadProfile
    frames = [StackFrame("main", "/srv/app.py", 1), StackFrame("step", "/srv/core.py", 10)]
    r = RecordResult([(10, "engine")], 1, 1.0, 100, frames=frames)
    r.threads = [ThreadProfile(10, "engine", "10", "MainThread", active=76, gil=60)]
    r.intervals = {10: 100}
    r.stacks = {(10, "10"): collections.Counter({(0, 1): 60, (): 16})}
    s = pyspy.summarize(r)
    doc = pyspy.speedscope_document(r)
    svg = pyspy.flamegraph_svg(r)
    assert s.samples == sum(len(p["samples"]) for p in doc["profiles"]) == 76
    assert re.search(r"flame graph: 76 on-CPU samples", svg)
    assert "76 on-CPU samples" in pyspy.summary_lines(s)[0]


def test_a_queue_p99_above_the_ttft_p99_says_why():
    """Bucket resolution: TTFT's buckets are fine, the queue's coarse (vLLM's start at
    0.3 s and go 0.5, 0.8 ...): the same ~0.6 s waits interpolate to a higher queue p99."""
    from helpers.rulekit import Feed, Hist
    lab = "engine=0,instance=v,model=m"
    ttft, queue = Hist(bounds=(0.5, 0.6, 0.7, 1.0)), Hist(bounds=(0.3, 0.5, 0.8, 1.0))
    f = Feed()
    for _ in range(40):
        ttft.observe(0.62, 2)
        queue.observe(0.6, 2)
        f.tick({"latency.ttft_seconds": {lab: ttft.value()},
                "latency.queue_seconds": {lab: queue.value()}})
    (got,) = f.active("DEC-001")
    ttft_ev, queue_ev = got.evidence[0], got.evidence[1]
    assert isinstance(queue_ev.value, float) and isinstance(ttft_ev.value, float)
    assert queue_ev.value > ttft_ev.value
    assert "above the TTFT p99, which includes it" in queue_ev.note
    assert "window means: queue 600 ms, TTFT 620 ms" in queue_ev.note
