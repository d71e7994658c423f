"""py-spy captures of a server's Python processes: dump (`p`), record (`P`), GIL sampler.

Everything runs py-spy as a child through ``asyncio.create_subprocess_exec`` (never a
shell); arguments are PIDs (validated ints) and validated numbers only.  Failures become a
``CaptureError`` with the exact fix (permissions), or a per-process error (not Python,
exited), never a traceback and never a half-written file.

Decisions (see the reference, docs/reference/metrics.md section 7):

* ``dump`` runs in py-spy's default *blocking* mode: one short pause gives a consistent
  stack and exact thread ids / activity, which is what a one-shot look wants.
* ``record`` runs **--nonblocking** by default: it never pauses the engine's hot loop
  (100 pauses a second would perturb the latencies we are trying to explain).  The cost
  is occasional sampling errors (counted) and, on Python < 3.11 only, idle detection by
  py-spy's stack heuristic instead of the OS thread state.  ``blocking=True`` switches.
* py-spy's output formats carry no per-sample active/GIL flag, and ``--gil`` keeps only
  GIL-holding samples.  So ``record`` runs **two** py-spy children per process, side by
  side (safe in nonblocking mode: no ptrace stops): one records on-CPU ("active")
  samples in speedscope format, the other ``--gil`` samples.  Own time and the flame
  graph come from the first, GIL share from the second; the denominator is the number
  of sampling intervals (duration x rate, exact when the run completes, from the wall
  clock when cancelled or when the target exits).  We then write one merged speedscope
  JSON and draw the SVG flame graph ourselves from the same stacks, so one recording
  gives both files (no second py-spy run, no flamegraph.pl).  Those writers live in
  flamegraph.py and are re-exported here.
* Cancel sends **SIGINT**: py-spy's Ctrl-C handler stops sampling and still writes the
  profile; SIGTERM would kill it without writing anything.
"""

from __future__ import annotations

# The three captures live in their own modules; this one keeps the package's py-spy API in
# one import (``from infertop.probes.capture import pyspy``) for the screen and the tests.
from infertop.probes.capture.files import CaptureError
from infertop.probes.capture.flamegraph import flamegraph_svg, speedscope_document
from infertop.probes.capture.gil_sampler import GilAggregate, GilSample, GilSampler
from infertop.probes.capture.pyspy_dump import (
                                                DumpResult,
                                                ProcessDump,
                                                StackFrame,
                                                ThreadDump,
                                                dump_tree,
                                                parse_dump_json,
                                                save_dump,
)
from infertop.probes.capture.pyspy_record import (
                                                ProfileSummary,
                                                RecordResult,
                                                ThreadProfile,
                                                _collect,
                                                _Run,
                                                open_hints,
                                                record,
                                                spin_share,
                                                summarize,
                                                summary_lines,
)
from infertop.probes.capture.pyspy_run import (
                                                _python_before_311,
                                                classify_error,
                                                find_pyspy,
                                                native_tools_hint,
                                                ptrace_fix,
)

__all__ = [
    "CaptureError", "StackFrame", "ThreadDump", "ProcessDump", "DumpResult", "RecordResult",
    "ProfileSummary", "ThreadProfile", "GilSample", "GilAggregate", "GilSampler",
    "find_pyspy", "dump_tree", "save_dump", "parse_dump_json", "record", "summarize",
    "summary_lines", "spin_share", "open_hints", "native_tools_hint", "ptrace_fix",
    "classify_error", "flamegraph_svg", "speedscope_document", "_collect", "_Run",
    "_python_before_311",
]
