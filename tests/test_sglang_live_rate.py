"""SGLang's live generation rate (issue 32 items 1-2): its tokenizer counter
``generation_tokens_total`` moves only when requests finish (steps of a batch's whole
output, ~60 s apart under a steady load) while the scheduler's ``realtime_tokens_total``
climbs on every log interval.

The pages are the real SGLang 0.5.23 busy page (tests/fixtures/metrics, captured from the
server) with those two counters rewritten tick by tick as the real server moves them:
a recording of that shape, built from the real page's families (no live capture of the
flat-while-climbing pair was made).  The scheduler process is pinned at one core with
busy threads, so SCH-001 fires as soon as the throughput trend falls below its peak."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from helpers.rulekit import Feed, _labels, make_reading
from helpers.snapkit import sample, snap
from infertop.dialects import readings_from_exposition
from infertop.keys import ON_FINISH

PAGE = (Path(__file__).parent / "fixtures" / "metrics" / "sglang-0.5.23-busy.prom").read_text()
INST = "127.0.0.1:30000"
DECODE = re.compile(r'^(sglang:realtime_tokens_total\{[^}]*mode="decode"[^}]*\}) \S+$', re.M)
FINISHED = re.compile(r'^(sglang:generation_tokens_total\{[^}]*\}) \S+$', re.M)
REALTIME_LINES = re.compile(r"^.*sglang:realtime_tokens_total.*\n", re.M)

# the scheduler pinned at one core, three busy threads: SCH-001's other conditions hold
PROCS: dict[str, dict[str, Any]] = {
    "process.info": {"pid=100,ppid=1,name=sglang::scheduler,role=scheduler,kind=sglang":
                     "python -m sglang.launch_server"},
    "process.cpu_ratio": {"pid=100,name=sglang::scheduler": 1.0},
    "thread.cpu_ratio": {f"pid=100,tid={100 + i},name=python": v
                         for i, v in enumerate((0.45, 0.35, 0.2))}}


def finished_count(text: str) -> float:
    """The page's sglang:generation_tokens_total (it counts at each request's finish)."""
    m = FINISHED.search(text)
    assert m is not None, "no generation_tokens_total on the page"
    return float(m.group(0).split()[-1])


def page(i: int, realtime: bool = True, finish_every: int = 60) -> str:
    """The busy page at tick ``i``: 8 running decode 40 tokens a second (realtime), and
    generation_tokens_total steps by 8 x 300 when the batch finishes."""
    text = DECODE.sub(lambda m: f"{m.group(1)} {271.0 + 40.0 * i}", PAGE)
    text = FINISHED.sub(lambda m: f"{m.group(1)} {8.0 + 2400.0 * (i // finish_every)}", text)
    return text if realtime else REALTIME_LINES.sub("", text)


def feed(pages) -> tuple[Feed, list[float | None], set[str]]:
    """Each page through the real pipeline one second apart, with the pinned process:
    (the feed, gen tok/s on screen each tick, every finding code raised)."""
    f = Feed()
    procs = [make_reading(k, _labels(lab), v) for k, d in PROCS.items() for lab, v in d.items()]
    rates: list[float | None] = []
    codes: set[str] = set()
    for text in pages:
        rs = readings_from_exposition(text, INST).readings
        out = f.pipe.feed(snap(f.t, sample("server:local", f.t, rs),
                               sample("process", f.t, procs)))
        f.t += f.dt
        codes |= {x.code for x in out.findings}
        got = [r.value for r in out.derived
               if r.key == "throughput.generation_tokens_per_second"]
        rates.append(got[0] if got else None)
    return f, rates, codes


STEADY = Path(__file__).parent / "fixtures" / "metrics" / "sglang-0.5.23-steady-decode.jsonl.gz"


def steady_pages() -> list[tuple[float, str]]:
    """The real SGLang 0.5.23 (scripts/realserver/recipe-sglang.sh, CPU engine) under a
    steady load (8 clients, 300 tokens each, ignore_eos), a /metrics page every ~6 s for
    128 s: (seconds from the first page, page).  Its generation_tokens_total reads 8 until
    the batch finishes at ~113 s (then 2,408: 8 x 300 in one step) while
    realtime_tokens_total{mode="decode"} climbs from 7 to 2,775."""
    import gzip
    import json
    return [(d["t"], d["page"]) for d in
            map(json.loads, gzip.decompress(STEADY.read_bytes()).decode().splitlines())]


def play_steady(pages, procs: bool = False):
    """The pages through the real pipeline at their capture times: per page (derived
    readings by key, finding codes, SGLang's own gen_throughput)."""
    f = Feed()
    t0 = f.t
    extra = [sample("process", 0.0, [make_reading(k, _labels(lab), v)
                                      for k, d in PROCS.items() for lab, v in d.items()])]
    out = []
    for t, text in pages:
        f.t = t0 + t
        rs = readings_from_exposition(text, INST).readings
        samples = [sample("server:local", f.t, rs)] + \
            ([sample("process", f.t, list(extra[0].readings))] if procs else [])
        frame = f.pipe.feed(snap(f.t, *samples))
        own = [r.value for r in rs if r.key == "throughput.server_generation_tokens_per_second"]
        out.append(({r.key: r.value for r in frame.derived if not r.labels or
                     r.key == "throughput.generation_tokens_per_second"},
                    {x.code for x in frame.findings}, own[0] if own else None))
    return f, out


def test_real_sglang_under_steady_load_reads_live_gen_tok_s():
    """The captured pages: gen tok/s from the second page on while the finish counter
    stays at 8; the throughput trend never reads 0 and its peak is never a finish step
    (2,400 tokens in one 10 s step would read 240 tokens/s)."""
    pages = steady_pages()
    finished = [finished_count(p) for _, p in pages]
    assert set(finished[:-3]) == {8.0} and set(finished[-3:]) == {2408.0}   # one finish step
    _, run = play_steady(pages)
    rates = [d.get("throughput.generation_tokens_per_second") for d, _, _ in run]
    assert all(r is not None and r > 5 for r in rates[1:]), rates
    trend = [(d.get("throughput.generation_recent_tokens_per_second"),
              d.get("throughput.generation_peak_tokens_per_second")) for d, _, _ in run]
    assert all(cur > 0 and peak < 100 for cur, peak in trend if cur is not None), trend
    # SGLang's own gen_throughput covers its last log window only (5.8 to 33.8 tokens/s on
    # these pages, gen tok/s's 60 s window 19.5 to 24.4): their means over the steady
    # stretch agree (22.6 and 21.6)
    own = [o for _, _, o in run[5:]]
    ours = rates[5:]
    assert abs(sum(ours) / len(ours) - sum(own) / len(own)) < 0.25 * sum(own) / len(own)


def test_real_sglang_without_the_live_family_holds_sch001_off():
    """The same real pages as an SGLang without realtime_tokens_total would serve them
    (those lines removed), with the scheduler pinned at one core and busy threads: the
    finish counter's flat stretch and its one step are no throughput trend (issue 32: it
    raised SCH-001 with '0 tokens/s <= 192 tokens/s (peak 240)')."""
    pages = [(t, REALTIME_LINES.sub("", p)) for t, p in steady_pages()]
    # and 30 s more scrapes of the last page: the batch after the finish step decodes on,
    # the finish counter stays at 2,408 until it ends (~110 s later on this server)
    t_end, last = pages[-1]
    pages += [(t_end + k, last) for k in range(1, 31)]
    f, run = play_steady(pages, procs=True)
    assert not any("SCH-001" in codes for _, codes, _ in run)
    moves = f.history.find("server.counter_moves", counter="server.generation_tokens_total")
    assert [m.text for m in moves] == [ON_FINISH]


def test_generation_rate_is_live_from_the_first_ticks_and_no_false_gil_finding():
    f, rates, codes = feed(page(i) for i in range(150))
    assert rates[1] is not None and rates[1] > 0          # not "0" until the first finish
    assert all(r is not None and 39.0 <= r <= 41.0 for r in rates[1:])
    assert "SCH-001" not in codes
    # the live counter: nothing says it moves on finish
    assert not f.history.find("server.counter_moves", counter="server.generation_tokens_total")


def test_without_the_realtime_family_the_finish_counter_is_not_a_live_rate():
    """An SGLang without realtime_tokens_total: the finish steps feed gen tok/s, the page
    says so (server.counter_moves 'on finish') and SCH-001 holds off: the dip between two
    finish steps is not a fall from a peak."""
    f, rates, codes = feed(page(i, realtime=False) for i in range(150))
    moves = f.history.find("server.counter_moves", counter="server.generation_tokens_total")
    assert [m.text for m in moves] == [ON_FINISH]
    assert "SCH-001" not in codes


def test_a_finish_counter_with_frequent_finishes_still_judges_a_real_fall():
    """Finishes every tick (many requests, short outputs): the step rates are rates, and a
    real fall to a third raises SCH-001."""
    fast = [page(i, realtime=False, finish_every=1) for i in range(60)]
    def slower(i: int) -> str:   # 800 tokens per finish step after tick 59, not 2,400
        return FINISHED.sub(lambda m: f"{m.group(1)} {8.0 + 2400.0 * 60 + 800.0 * (i - 59)}",
                            page(0, realtime=False))
    slow = [slower(i) for i in range(60, 80)]
    _, _, codes = feed(fast + slow)
    assert "SCH-001" in codes


def test_retraction_is_sglangs_preemption_signal_for_kv_pressure():
    """SGLang 0.5.23 counts no preemptions; a full KV cache while its scheduler retracts
    requests (num_retracted_reqs > 0) is MEM-001's preemption branch, with no queue."""
    f = Feed()
    lab = "instance=s,model=m"
    f.run(lambda: {"kv.usage_ratio": {lab: 0.97}, "server.requests_waiting": {lab: 0},
                   "server.requests_retracted": {lab: 2}}, 30)
    (got,) = f.active("MEM-001")
    assert [e.key for e in got.evidence] == ["kv.usage_ratio", "server.requests_retracted"]
    assert "retracted" in got.evidence[1].note
    # nothing retracted and nothing waiting: a full cache alone is not pressure
    f2 = Feed()
    f2.run(lambda: {"kv.usage_ratio": {lab: 0.97}, "server.requests_waiting": {lab: 0},
                    "server.requests_retracted": {lab: 0}}, 30)
    assert not f2.active("MEM-001")


def test_scheduler_stage_shares_grammar_queue_and_http_in_flight_on_the_real_page():
    """The scheduler's time by stage over the window (the real busy page, its counters
    moved between two ticks as a busy scheduler's do), and the busy page's 8 HTTP
    requests in flight (its own /metrics scrape left out) on the scheduling pane."""
    from helpers.panes import pane_text
    stage = re.compile(r'^(sglang:scheduler_stage_seconds_total\{[^}]*category="(\w+)"[^}]*\}) (\S+)$',
                       re.M)
    grow = {"run_batch": 0.6, "idle": 0.3, "process_input_requests": 0.1}

    def at(i: int) -> str:
        return stage.sub(lambda m: f"{m.group(1)} {float(m.group(3)) + i * grow.get(m.group(2), 0)}",
                         page(i))
    f, _, _ = feed(at(i) for i in range(5))
    shares = {s.label("stage"): s.last() for s in f.history.find("server.scheduler_stage_ratio")}
    assert shares["run_batch"] == pytest.approx(0.6) and shares["idle"] == pytest.approx(0.3)
    frame = f.pipe.feed(snap(f.t, sample("server:local", f.t,
                                         readings_from_exposition(at(5), INST).readings)))
    text = pane_text("scheduling", frame, width=160, height=30)
    assert "http in flight 8" in text and "run batch 60" in text
