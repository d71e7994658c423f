"""A recording's snapshots decoded up front, for the benchmarks that time what comes after
(bench_screen_ticks, bench_pipeline_ticks): decoding is then outside the clock."""

from __future__ import annotations

from infertop.probes.sources.replay import ReplaySource


async def load_snapshots(path: str) -> list:
    """Every snapshot of the recording at ``path``, in order."""
    replay = ReplaySource(path)
    snaps = []
    while (snap := await replay.next()) is not None:
        snaps.append(snap)
    return snaps
