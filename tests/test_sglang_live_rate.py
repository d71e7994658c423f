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

import pytest

from infertop.dialects import readings_from_exposition
from infertop.keys import ON_FINISH

from helpers.rulekit import Feed, make_reading, _labels
from helpers.snapkit import sample, snap

PAGE = (Path(__file__).parent / "fixtures" / "metrics" / "sglang-0.5.23-busy.prom").read_text()
INST = "127.0.0.1:30000"
DECODE = re.compile(r'^(sglang:realtime_tokens_total\{[^}]*mode="decode"[^}]*\}) \S+$', re.M)
FINISHED = re.compile(r'^(sglang:generation_tokens_total\{[^}]*\}) \S+$', re.M)
REALTIME_LINES = re.compile(r"^.*sglang:realtime_tokens_total.*\n", re.M)

# the scheduler pinned at one core, three busy threads: SCH-001's other conditions hold
PROCS = {"process.info": {"pid=100,ppid=1,name=sglang::scheduler,role=scheduler,kind=sglang":
                          "python -m sglang.launch_server"},
         "process.cpu_ratio": {"pid=100,name=sglang::scheduler": 1.0},
         "thread.cpu_ratio": {f"pid=100,tid={100 + i},name=python": v
                              for i, v in enumerate((0.45, 0.35, 0.2))}}


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
    slow = [FINISHED.sub(lambda m, i=i: f"{m.group(1)} {8.0 + 2400.0 * 60 + 800.0 * (i - 59)}",
                         page(0, realtime=False)) for i in range(60, 80)]
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
