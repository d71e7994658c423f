"""Record and replay: the format round-trips exactly, survives a kill, rotates, and turns
away what is not a recording with one clear line."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from infertop import __version__
from infertop.derive import derive
from infertop.history import History
from infertop.model import Snapshot
from infertop.probes.sources.demo import DemoSource
from infertop.probes.sources.recorder import Recorder, record_headless, run_record
from infertop.probes.sources.replay import ReplaySource
from infertop.recording import SCHEMA, RecordingError, decode, encode_snapshot

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = "dec-error-restart"   # has a downtime, a restart, errors: the hardest case


def demo_next(src: DemoSource) -> Snapshot:
    snap = src.next_sync()
    assert snap is not None, "the looping demo ended"
    return snap


def replay_next(src: ReplaySource) -> Snapshot:
    snap = asyncio.run(src.next())
    assert snap is not None, "the recording ended"
    return snap


def expected(n: int, name: str = SCENARIO, **kw) -> list[dict]:
    src = DemoSource(name, **kw)
    return [demo_next(src).to_dict() for _ in range(n)]


def record(path: Path, ticks: int, name: str = SCENARIO, **kw) -> int:
    return asyncio.run(record_headless(DemoSource(name), path, float(ticks), 0.0, **kw))


def replay_all(path: Path) -> tuple[ReplaySource, list[dict]]:
    src = ReplaySource(path)
    out = []

    async def go():
        while (s := await src.next()) is not None:
            out.append(s.to_dict())
    asyncio.run(go())
    return src, out


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_round_trip_is_identical(tmp_path, suffix):
    path = tmp_path / f"rec{suffix}"
    assert record(path, 70) == 70
    if suffix.endswith(".gz"):
        assert path.read_bytes()[:2] == b"\x1f\x8b"
        gzip.decompress(path.read_bytes())  # a complete, standard gzip file
    src, got = replay_all(path)
    assert got == expected(70)
    assert not src.truncated and src.skipped == 0
    h = src.header
    assert h["format"] == "infertop-recording" and h["schema"] == SCHEMA
    assert h["infertop"] == __version__ and h["host"] and h["started"] > 0
    assert h["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert h["server"]["kind"] == "vllm" and h["server"]["model"].startswith("meta-llama/")
    assert h["source"]["scenario"] == SCENARIO


def test_replay_rederives_the_same_quantiles_and_rates(tmp_path):
    path = tmp_path / "r.jsonl"
    record(path, 60, "dec-ttft-burst")
    live, replayed = History(), History()
    demo = DemoSource("dec-ttft-burst")
    src = ReplaySource(path)
    for _ in range(60):
        live.add(demo_next(demo))
        replayed.add(replay_next(src))
    a = {(r.key, r.labels): r.value for r in derive(live, 30)}
    b = {(r.key, r.labels): r.value for r in derive(replayed, 30)}
    assert a == b and any(k[0] == "latency.ttft_seconds" for k in a)


def test_navigation(tmp_path):
    path = tmp_path / "nav.jsonl"
    record(path, 100, "healthy")
    src = ReplaySource(path, speed=4.0)
    assert len(src) == 100 and src.duration == 99.0 and src.position == -1
    assert src.current_time is None and src.wall_interval == 0.25
    first = replay_next(src)
    assert src.position == 0 and src.elapsed == 0.0 and src.current_time == first.time
    assert src.step(1).tick == first.tick + 1 and src.position == 1
    assert src.step(-5).tick == first.tick  # clamped at the start
    assert src.seek_fraction(0.5).time == first.time + 50
    assert src.fraction == pytest.approx(0.505, abs=0.01)
    assert src.jump(0.1) is not None and src.position == 60
    assert src.goto(42.0).time == first.time + 42 and src.elapsed == 42.0
    assert src.current_time is not None and src.current_time - src.start_time == 42.0
    assert src.length == 100
    assert src.goto(1e9).time == first.time + 99 and src.at_end
    hist = src.snapshots_until(41)
    assert [s.time - first.time for s in hist] == [float(i) for i in range(42)]
    assert len(src.snapshots_until(41, limit=10)) == 10
    src.goto(98.0)
    assert replay_next(src).time == first.time + 99
    assert asyncio.run(src.next()) is None


def _cut(path: Path, n: int) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:-n])


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_truncated_last_line_is_tolerated(tmp_path, suffix):
    path = tmp_path / f"cut{suffix}"
    record(path, 40)
    _cut(path, 700 if suffix.endswith(".gz") else 3000)
    src, got = replay_all(path)
    assert src.truncated and src.notes
    assert 30 <= len(got) < 40
    assert got == expected(len(got))


@pytest.mark.parametrize("content, words", [
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "not an infertop recording"),
    (b'{"name": "some", "data": [1, 2, 3]}\n', "not an infertop recording"),
    (b'[1, 2, 3]\n{"time": 1}\n', "not an infertop recording"),
    (b'{"format": "infertop-recording", "schema": 1, "host": "x"\n', "corrupt recording header"),
    (b'{"format": "infertop-recording", "schema": "one"}\n', "corrupt recording header"),
    (b'{"format": "infertop-recording", "schema": 99, "infertop": "9.0"}\n',
     "recorded with schema 99 by infertop 9.0"),
    (b"", "empty file"),
    (b'{"format": "infertop-recording", "schema": 1}\n', "holds no snapshot"),
])
def test_not_a_recording_gets_one_clear_line(tmp_path, content, words):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(RecordingError) as e:
        ReplaySource(path)
    msg = str(e.value)
    assert words in msg and "\n" not in msg and msg.startswith("bad.jsonl")
    if "schema 99" in words:
        assert "upgrade infertop" in msg


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(RecordingError, match="no such file"):
        ReplaySource(tmp_path / "nope.jsonl")
    with pytest.raises(RecordingError, match="is a directory"):
        ReplaySource(tmp_path)


def test_gzipped_garbage_is_not_a_recording(tmp_path):
    path = tmp_path / "x.jsonl.gz"
    path.write_bytes(gzip.compress(b"hello world, just text\n"))
    with pytest.raises(RecordingError, match="not an infertop recording"):
        ReplaySource(path)


def test_corrupt_line_in_the_middle_is_skipped(tmp_path):
    path = tmp_path / "mid.jsonl"
    record(path, 20, "healthy")
    lines = path.read_bytes().split(b"\n")
    lines[5] = lines[5][:200]  # a damaged line, not the last
    path.write_bytes(b"\n".join(lines))
    src, got = replay_all(path)
    assert len(got) == 19 and src.skipped == 1


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_sigkill_mid_run_loses_at_most_the_last_line(tmp_path, suffix):
    path = tmp_path / f"killed{suffix}"
    child = textwrap.dedent(f"""
        import asyncio, sys
        from infertop.probes.sources.demo import DemoSource
        from infertop.probes.sources.recorder import record_headless

        class Loud(DemoSource):
            async def next(self):
                snap = await super().next()
                print(snap.tick, flush=True)   # tell the parent how far we are
                return snap

        asyncio.run(record_headless(Loud({SCENARIO!r}), {str(path)!r}, None, 0.0))
    """)
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            if int(line) >= 25:
                break
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    src, got = replay_all(path)
    assert len(got) >= 24                  # everything before the tick in flight
    assert got == expected(len(got))       # and exactly what was recorded


def test_rotation_on_size_cap(tmp_path):
    path = tmp_path / "rot.jsonl"
    demo = DemoSource("healthy")
    snaps = [demo_next(demo) for _ in range(10)]
    size = len(encode_snapshot(snaps[0]))

    async def go(keep=None, name=path):
        rec = Recorder(name, {"format": "infertop-recording", "schema": 1},
                       max_bytes=int(size * 3.5), keep=keep)
        for s in snaps:
            await rec.write(s)
        await rec.close()
        return rec

    rec = asyncio.run(go())
    parts = sorted(tmp_path.glob("rot.jsonl*"))
    assert [p.name for p in parts] == ["rot.jsonl", "rot.jsonl.1", "rot.jsonl.2", "rot.jsonl.3"]
    assert rec.part == 3
    got = []
    for p in [path.with_name("rot.jsonl.3"), path.with_name("rot.jsonl.2"),
              path.with_name("rot.jsonl.1"), path]:   # oldest first
        src, part = replay_all(p)
        assert p.stat().st_size <= size * 3.5 + 200  # a header and whole lines
        got += part
    assert got == [s.to_dict() for s in snaps]
    keep_path = tmp_path / "keep.jsonl"
    asyncio.run(go(keep=1, name=keep_path))
    assert sorted(p.name for p in tmp_path.glob("keep.jsonl*")) == ["keep.jsonl", "keep.jsonl.1"]


def test_run_record_duration_counts_the_sources_clock(tmp_path):
    path = tmp_path / "d.jsonl.gz"
    assert run_record(DemoSource("healthy"), path, duration=30, interval=0.0) == 30
    dec = decode(path.read_bytes())
    assert len(dec.lines) == 30 and dec.times[-1] - dec.times[0] == 29


def test_unwritable_path_is_one_clear_line(tmp_path):
    with pytest.raises(RecordingError, match="cannot write"):
        record(tmp_path / "no" / "such" / "dir.jsonl", 3)


def test_headless_recording_never_imports_textual(tmp_path):
    code = textwrap.dedent(f"""
        import asyncio, sys
        from infertop.probes.sources.demo import DemoSource
        from infertop.probes.sources.recorder import record_headless
        from infertop.probes.sources.replay import ReplaySource
        n = asyncio.run(record_headless(DemoSource("healthy"), {str(tmp_path / "t.jsonl")!r},
                                        5.0, 0.0))
        ReplaySource({str(tmp_path / "t.jsonl")!r})
        bad = [m for m in ("textual", "rich") if m in sys.modules]
        print(n, bad)
        sys.exit(1 if bad or n != 5 else 0)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def test_recorded_lines_are_plain_json_with_time_first(tmp_path):
    path = tmp_path / "j.jsonl"
    record(path, 3, "healthy")
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["format"] == "infertop-recording"
    assert all(line.startswith('{"time":') for line in lines[1:])


def test_a_last_line_nested_deeper_than_the_stack_is_skipped_not_raised() -> None:
    """Found by fuzzing (recording_lines, 2026-12-03): the whole-file decode checked a last
    line without a newline with json.loads and caught only ValueError; 100k "[" is a
    RecursionError.  It is a corrupt line: skipped and counted, as in the middle."""
    from infertop.recording import decode, decode_snapshot
    header = json.dumps({"format": "infertop-recording", "schema": 1}).encode()
    good = json.dumps({"time": 1.0, "tick": 1, "samples": {}, "capabilities": {}}).encode()
    dec = decode(header + b"\n" + good + b"\n" + b"[" * 100_000, "deep")
    assert dec.lines == [good] and dec.skipped == 1 and not dec.truncated
    # a line whose time reads from its start is indexed, and refused when decoded
    deep = b'{"time": 2.0, "samples": ' + b"[" * 100_000
    dec = decode(header + b"\n" + good + b"\n" + deep, "deep")
    assert dec.lines == [good, deep] and not dec.truncated
    with pytest.raises(RecordingError, match="corrupt snapshot line"):
        decode_snapshot(dec.lines[1])
