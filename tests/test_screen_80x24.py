"""Small defects of the 80x24 screen (issue 35 item 3, seen with 8 GPUs and findings):
each test failed before its fix.  Panes are drawn straight from a Frame at the size an
80x24 terminal gives them (38-39 columns, 3-5 lines), the server at 127.0.0.1:8000 as a
real one is (the demo's instance is "demo")."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import pytest

from helpers.panes import frames_of, pane_text
from infertop.cli.main import build_parser, make_pipeline
from infertop.meta import ProcessMeta
from infertop.model import Snapshot
from infertop.pipeline import Frame
from infertop.probes.sources.demo import DemoSource
from infertop.source import SnapshotSource


@functools.cache
def frame_of(name: str, ticks: int) -> Frame:
    return frames_of(DemoSource(name, gpus=8, instance="127.0.0.1:8000"), ticks,
                     make_pipeline(build_parser().parse_args([])))


@pytest.mark.parametrize("name,width", [("mem-kv-pressure", 39), ("dec-ttft-burst", 37),
                                        ("sch-queue-gpus-idle", 39)])
def test_the_decoding_panes_latency_header_is_whole(name: str, width: int) -> None:
    # a p99 with its finding's code widened the table: the label column shrank to six
    # columns, "laten…" (and an engine's "TTFT e0" to "TTFT …")
    text = pane_text("decoding", frame_of(name, 40), width=width, height=5, wide=False)
    lines = text.splitlines()
    assert lines[0].split()[0] == "latency", text
    assert lines[1].split()[0] == "TTFT" and "DEC-001" in lines[1], text
    assert all(ln.rstrip() == ln.rstrip()[:width] for ln in lines)   # nothing past the edge
    assert "…" not in lines[0] + lines[1], text


@pytest.mark.parametrize("name,ticks", [("healthy", 20), ("mem-kv-pressure", 20),
                                        ("mem-kv-pressure", 40)])
def test_the_parallelism_panes_engine_label_keeps_its_port(name: str, ticks: int) -> None:
    # ":8000 e0" in a column cut to six was ":8000…", and a cut is never left inside a
    # number, so ":…" (or ":8000 …" without the engine): nothing useful
    text = pane_text("parallelism", frame_of(name, ticks), width=38, height=5, wide=False)
    rows = [ln for ln in text.splitlines() if ln.startswith(":")]
    assert rows, text
    for row in rows:
        assert row.split()[:2] == [":8000", "e0"], text


def test_several_servers_engines_keep_their_port_whole() -> None:
    from infertop.model import Reading, Sample, make_labels
    from infertop.pipeline import Pipeline
    samples = {}
    for port in (8000, 8001):     # a source per server, as two --url give
        name = f"server:127.0.0.1:{port}"
        samples[name] = Sample(name, 1.0, (Reading.of(
            "server.requests_running", 3.0,
            make_labels(instance=f"127.0.0.1:{port}", engine="0")),))
    frame = Pipeline().feed(Snapshot(1.0, samples))
    text = pane_text("parallelism", frame, width=38, height=5, wide=False)
    assert "127.0.0.1:8000 e0" in text and "127.0.0.1:8001 e0" in text, text


class ContainerSource(SnapshotSource):
    """A demo whose infertop runs in a container: NVML's process list names no PID here
    (none are read) and the process probe says it is in a container."""

    def __init__(self, inner: DemoSource) -> None:
        self.inner = inner
        self.epoch = inner.epoch

    async def start(self) -> Any:
        return await self.inner.start()

    async def stop(self) -> None:
        await self.inner.stop()

    async def next(self) -> Snapshot | None:
        snap = await self.inner.next()
        if snap is None:
            return None
        self.epoch = self.inner.epoch
        samples = {}
        for name, s in snap.samples.items():
            readings = tuple(r for r in s.readings if not r.key.startswith("process.gpu"))
            meta = s.meta
            if isinstance(meta, ProcessMeta):
                meta = dataclasses.replace(meta, in_container=True,
                                           in_container_why="/.dockerenv")
            samples[name] = dataclasses.replace(s, readings=readings, meta=meta)
        return dataclasses.replace(snap, samples=samples)


@pytest.mark.parametrize("height", [3, 4, 5])
def test_the_memory_panes_container_note_says_what_it_hides(height: int) -> None:
    # the note wraps to four lines in 38 columns; the pane had room for one or two, and
    # the widget cut the rest off with no "+N more" (so it read as a whole sentence)
    frame = frames_of(ContainerSource(DemoSource("healthy", gpus=8,
                                                 instance="127.0.0.1:8000")), 12,
                      make_pipeline(build_parser().parse_args([])))
    text = pane_text("memory", frame, width=38, height=height, wide=False)
    lines = text.splitlines()
    assert len(lines) <= height, text
    assert any("GPU processes not shown" in ln for ln in lines), text
    assert "more (press 3 to zoom)" in lines[-1], text
    whole = pane_text("memory", frame, width=38, height=40, wide=False)
    assert "hostPID" in whole and "more" not in whole.splitlines()[-1], whole
