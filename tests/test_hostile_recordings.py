"""Recordings are streamed, never held: gzip bombs, over-long lines and long files cost
bounded memory, and seek points read every line back exactly (plain, gzip, multi-member).
Memory is measured with tracemalloc and bounded loosely; no timing is asserted."""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import tracemalloc
import zlib

import pytest

from infertop.probes.sources import recording_file
from infertop.probes.sources.recording_file import RecordingFile
from infertop.probes.sources.replay import ReplaySource
from infertop.recording import RecordingError

MB = 1_000_000
HEADER = {"format": "infertop-recording", "schema": 1, "host": "h", "source": {},
          "interval": 1.0}


def snapshot_line(i: int, pad: int) -> bytes:
    filler = (hashlib.sha256(str(i).encode()).hexdigest() * (pad // 64 + 1))[:pad]
    return (json.dumps({"time": 1000.0 + i, "tick": i + 1, "samples": {}, "capabilities": {},
                        "pad": filler}, separators=(",", ":")) + "\n").encode()


def write_gzip_like_the_recorder(path, lines: list[bytes], members: int = 1) -> None:
    """Sync-flushed gzip, a line at a time, as probes/sources/recorder.py writes it; with
    members > 1 the lines are split over several concatenated gzip members."""
    out = []
    per = -(-len(lines) // members)
    for m in range(members):
        z = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        for line in lines[m * per:(m + 1) * per]:
            out.append(z.compress(line) + z.flush(zlib.Z_SYNC_FLUSH))
        out.append(z.flush(zlib.Z_FINISH))
    path.write_bytes(b"".join(out))


@pytest.fixture
def small_steps(monkeypatch):
    """Seek points every 16 KB of output, 4 KB reads: many seek points in a small file."""
    monkeypatch.setattr(recording_file, "CHECKPOINT_BYTES", 16 * 1024)
    monkeypatch.setattr(recording_file, "RAW_CHUNK", 4 * 1024)
    monkeypatch.setattr(recording_file, "STEP", 8 * 1024)


@pytest.mark.parametrize("kind", ["plain", "gzip", "gzip-3-members"])
def test_every_line_reads_back_exactly_in_any_order(tmp_path, small_steps, kind):
    lines = [json.dumps(HEADER).encode() + b"\n"] + \
        [snapshot_line(i, 300 + (i * 37) % 900) for i in range(400)]
    path = tmp_path / ("r.jsonl" if kind == "plain" else "r.jsonl.gz")
    if kind == "plain":
        path.write_bytes(b"".join(lines))
    else:
        write_gzip_like_the_recorder(path, lines, 3 if "members" in kind else 1)
    f = RecordingFile(path)
    try:
        assert len(f) == 400 and not f.truncated and f.skipped == 0, f.notes
        assert list(f.times) == [1000.0 + i for i in range(400)]
        if kind != "plain":
            assert len(f._seek) > 5        # seek points were taken
        order = list(range(400))
        random.Random(7).shuffle(order)
        for i in order + list(range(400)) + list(range(399, -1, -1)):
            assert f.line(i) + b"\n" == lines[i + 1], i
    finally:
        f.close()


def test_replay_seeking_keys_work_on_a_gzip_with_seek_points(tmp_path, small_steps):
    lines = [json.dumps(HEADER).encode() + b"\n"] + [snapshot_line(i, 500) for i in range(300)]
    path = tmp_path / "r.jsonl.gz"
    write_gzip_like_the_recorder(path, lines)
    src = ReplaySource(path)
    assert src.length == 300 and src.duration == 299.0
    assert src.goto(150.0).tick == 151
    assert src.jump(0.1).tick == 151 + 30
    assert src.step(-5).tick == 176
    assert [s.tick for s in src.snapshots_until(limit=3)] == [174, 175, 176]
    assert src.seek_fraction(1.0).tick == 300
    assert asyncio.run(src.next()) is None


def test_gzip_bomb_recording_stops_with_a_note_and_bounded_memory(tmp_path):
    """A few good snapshots, then a line of 200 MB of 'x' in ~200 KB of gzip."""
    path = tmp_path / "bomb.jsonl.gz"
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [z.compress(json.dumps(HEADER).encode() + b"\n")]
    parts += [z.compress(snapshot_line(i, 100)) for i in range(5)]
    block = b"x" * MB
    for _ in range(200):
        parts.append(z.compress(block))
    parts.append(z.flush())
    path.write_bytes(b"".join(parts))
    assert path.stat().st_size < 1 * MB
    tracemalloc.start()
    try:
        src = ReplaySource(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    print(f"\n200 MB bomb line: traced peak {peak / MB:.1f} MB")
    assert src.length == 5 and src.truncated
    assert any("expands more than" in n or "longer than" in n for n in src.notes), src.notes
    assert peak < 40 * MB     # at most one line (16 MB cap) in the making; the old reader: 200 MB+


def test_over_long_line_is_skipped_and_the_next_ones_read(tmp_path):
    lines = [json.dumps(HEADER).encode() + b"\n", snapshot_line(0, 10),
             b'{"time":1001.0,"pad":"' + b"y" * (3 * MB) + b'"}\n',
             snapshot_line(2, 10), snapshot_line(3, 10)]
    path = tmp_path / "long.jsonl"
    path.write_bytes(b"".join(lines))
    f = RecordingFile(path, max_line=1 * MB)
    try:
        assert len(f) == 3 and f.skipped == 1
        assert any("longer than 1 MB" in n for n in f.notes)
        assert [json.loads(f.line(i))["tick"] for i in range(3)] == [1, 3, 4]
    finally:
        f.close()


def test_header_must_come_within_a_megabyte(tmp_path):
    path = tmp_path / "nohead.jsonl"
    path.write_bytes(b"z" * (3 * MB))
    with pytest.raises(RecordingError, match="not an infertop recording"):
        ReplaySource(path)


def test_total_cap_stops_reading_with_a_note(tmp_path):
    lines = [json.dumps(HEADER).encode() + b"\n"] + [snapshot_line(i, 2000) for i in range(200)]
    path = tmp_path / "cap.jsonl.gz"
    write_gzip_like_the_recorder(path, lines)
    f = RecordingFile(path, max_total=100_000)
    try:
        assert 0 < len(f) < 200 and f.truncated
        assert any("stopped reading after" in n for n in f.notes)
    finally:
        f.close()


@pytest.mark.slow
def test_long_recording_index_is_small(tmp_path):
    """20 000 snapshots of ~2 KB (40 MB of JSON): opening and seeking around costs the
    index, not the file (the old reader held every line: 40 MB+)."""
    lines = [json.dumps(HEADER).encode() + b"\n"] + \
        [snapshot_line(i, 2000) for i in range(20_000)]
    path = tmp_path / "long.jsonl.gz"
    write_gzip_like_the_recorder(path, lines)
    del lines
    tracemalloc.start()
    try:
        src = ReplaySource(path)
        for f in (0.5, 0.1, 0.9, 0.0, 1.0):
            src.seek_fraction(f)
        src.snapshots_until(limit=30)
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    print(f"\n20k-line recording: traced peak {peak / MB:.1f} MB, held {current / MB:.1f} MB")
    assert src.length == 20_000
    assert peak < 16 * MB and current < 8 * MB
