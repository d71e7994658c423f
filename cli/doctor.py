"""``infertop doctor``: sample, diagnose, print a report; the exit code is the verdict."""

from __future__ import annotations

import argparse
import asyncio
import math
import sys

from infertop import __version__
from infertop.settings_shown import shown_layers
from infertop.textclean import clean

from .errors import EXIT_NO_SOURCE
from .options import SourceArgs, typed
from .sources import (
    DEAD_TICKS,
    all_servers_dead,
    no_snapshot,
    prometheus_down,
    sample_window,
    source_and_pipeline,
    sources_status,
)


def cmd_doctor(args: argparse.Namespace) -> int:
    from infertop.report import exit_code, nothing_checked, render_report
    source, pipeline = source_and_pipeline(args)
    duration = args.duration
    if duration is None:
        # a recording is judged whole: its first 10 s would miss an outage 5 minutes in
        duration = math.inf if source.recorded_length is not None else DEFAULT_DURATION
    frame = asyncio.run(sample_window(source, pipeline, duration, args.interval,
                                      typed(SourceArgs, args).speed, give_up_dead=DEAD_TICKS))
    if frame is None:
        raise no_snapshot(source)
    down = prometheus_down(frame)
    if down:      # the fleet has nothing else to report: one line, as README promises
        print(clean(f"infertop: {down}"), file=sys.stderr)
        return EXIT_NO_SOURCE
    meta = doctor_meta(source, pipeline, frame, duration)
    unreachable = meta["unreachable"]
    print(render_report(frame.findings, shown_layers(frame), args.format, meta), flush=True)
    for name, why in unreachable.items():   # stderr too: a cron job's log shows it
        print(clean(f"infertop: server unreachable: {name}: {why}"), file=sys.stderr)
    for name, why in plugin_errors().items():   # an installed plug-in infertop left out
        print(clean(f"infertop: plug-in left out: {name}: {why}"), file=sys.stderr)
    rc = exit_code(frame.findings, frame.sources_ok(), unreachable)
    if rc == 0 and nothing_checked(meta):   # every rule off or lacking inputs: not healthy
        print(clean(f"infertop: {nothing_checked(meta)}"), file=sys.stderr)
        return 3
    return rc


def plugin_errors() -> dict[str, str]:
    """Entry points of both plug-in groups that failed to load (name -> why)."""
    from infertop.probes.registry import plugin_errors as probe_errors
    from infertop.servers.registry import plugin_errors as kind_errors
    return {**kind_errors(), **probe_errors()}


DEFAULT_DURATION = 10.0   # seconds a live doctor samples without --duration


def doctor_meta(source, pipeline, frame, duration: float) -> dict:
    """What the report says besides the findings (the property suite renders it too)."""
    from infertop.report import episodes
    desc = source.describe()
    where = f" on {desc['host']}" if desc.get("host") else ""
    unreachable = frame.unreachable_servers()
    first = getattr(pipeline, "first_time", None)
    covered = (frame.snapshot.time - first) if first is not None else duration
    unchecked = pipeline.missing_inputs()
    return {"version": __version__, "source": f"{desc.get('source')} {desc.get('label', '')}{where}",
            # an ok source may still say something ("no process with pid N (--pid)")
            "sources": {n: (f"{st['status']}: {st['reason']}" if st["reason"] else st["status"])
                        # a server in a container: how it was reached (probes/server/reach.py)
                        + (f" ({st['via']})" if st.get("via") else "")
                        for n, st in sources_status(frame).items()},
            # what was covered (a recording may end before the duration asked for)
            "duration": covered,
            "duration_asked": duration if math.isfinite(duration) else None,
            # a replay: how long the recording is (the report says when less was judged)
            "recording_length": source.recorded_length,
            "ticks": pipeline.history.ticks, "now": frame.snapshot.time,
            "any_source_ok": frame.sources_ok(),
            # ticks on which a server or GPU source answered: the last may be an outage
            "ticks_read": getattr(pipeline, "ticks_read", None),
            # a fleet: over every node (infertop/fleet.py), as one box over its rules
            "unchecked": unchecked,
            # checked rules that cannot raise in a run this short (code -> seconds needed)
            "too_short": too_short(pipeline.window_needed(), unchecked, covered),
            # the whole window, not only its last tick: every raise and clear of the run
            "episodes": episodes(pipeline.events, frame.findings),
            "rules_total": pipeline.rules_total, "gpu_off": gpu_off(frame),
            "unreachable": unreachable,
            # a live run stops early when every server is unreachable (sample_window)
            "gave_up": source.realtime and all_servers_dead(frame),
            # a replay: snapshot lines left out, counted (issue 36: a meta of the wrong type)
            "notes": list(source.notes)}


def too_short(needed: dict[str, float], unchecked: dict[str, list[str]],
              covered: float) -> dict[str, float]:
    """Rules with their inputs whose finding needs more seconds than the run covered: a
    condition present all along could not have raised them, so "healthy" is not said
    for them.  (Rules lacking inputs are NOT CHECKED already.)"""
    return {code: need for code, need in sorted(needed.items())
            if code not in unchecked and covered + 1e-6 < need}


def gpu_off(frame) -> str:
    """Why this run has no GPU readings ("" when NVML answered)."""
    cap = frame.snapshot.capabilities.get("nvml")
    if cap is not None and not cap.available:
        return f"no NVML ({cap.reason})" if cap.reason else "no NVML"
    s = frame.snapshot.samples.get("nvml")
    if s is None:
        return "no NVML"
    if s.status.value == "error":
        return f"NVML failed ({s.reason})"
    return ""
