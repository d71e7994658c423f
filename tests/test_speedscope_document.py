"""speedscope_document names every sampled thread, also one py-spy listed no profile for."""

from infertop.probes.capture.flamegraph import speedscope_document
from infertop.probes.capture.pyspy_dump import StackFrame
from infertop.probes.capture.pyspy_record import RecordResult, ThreadProfile


def test_thread_without_a_profile_is_named_by_pid():
    # py-spy sampled thread 0x2 of pid 7, but its thread table lists only 0x1: the document
    # is still written (it used to raise AttributeError on the missing profile's role)
    result = RecordResult(pids=[(7, "engine")], seconds=1.0, sampled_seconds=1.0, rate=100)
    result.frames = [StackFrame("step", "/srv/engine.py", 10)]
    result.threads = [ThreadProfile(7, "engine", "0x1", "MainThread", active=1)]
    result.ordered = {(7, "0x1"): [(0,)], (7, "0x2"): [(0,), (0,)]}
    doc = speedscope_document(result)
    names = sorted(p["name"] for p in doc["profiles"])
    assert names == ['engine 7 / Thread 0x1 "MainThread"', 'pid 7 / Thread 0x2 ""']
