"""Reading a recording without holding it: one streaming pass builds an index, lines are
read back on demand.

A recording can be days long (a 3-hour file is ~300 MB of JSON) or hostile (2 MB of gzip
that expands to 21 GB).  So nothing here holds the file: the opening pass streams it once
(gzip inflated in 1 MB steps) and keeps, per snapshot line, its time and where it starts
and ends in the decompressed stream (two numbers in ``array``s: 24 bytes a line), and for
gzip a seek point every ``CHECKPOINT_BYTES`` of output (a copy of the inflater's state and
the compressed offset, ~45 KB each).  Reading a line seeks to the nearest seek point at or
before it and inflates forward; playing forward continues from where the last read ended.

Bounds: a line longer than ``max_line`` is skipped without being kept (its end is still
found, so the next line is read), the header line must fit in ``MAX_HEADER``, and after
``max_total`` decompressed bytes, or a gzip stream that expands more than ``MAX_RATIO``
times (a bomb, not JSON), reading stops with a note.  Memory stays at the index plus one
line plus one inflate step, whatever the file.

Thread-safe: the TUI rebuilds History in a worker thread while the loop plays on.
"""

from __future__ import annotations

import bisect
import json
import os
import re
import threading
import zlib
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from infertop.recording import (
    GZIP_MAGIC,
    RecordingError,
    parse_header_line,
    snapshot_time,
)

MAX_LINE = 16 * 1024 * 1024          # one snapshot line (a busy 8-GPU box: ~100 KB)
MAX_HEADER = 1024 * 1024
MAX_TOTAL = 64 * 1024 ** 3           # decompressed bytes read from one file
MAX_RATIO = 500                      # recordings compress 5-40x; a bomb 1000x
RATIO_AFTER = 16 * 1024 * 1024       # ... judged once this much has come out
CHECKPOINT_BYTES = 16 * 1024 * 1024  # a gzip seek point every this much output (a seek inflates at most this)
RAW_CHUNK = 256 * 1024               # compressed bytes read at once
STEP = 1024 * 1024                   # decompressed bytes produced at once


_BLANK_LINES = re.compile(rb"(?:[ \t\r]*\n)*")


def _new_inflater():
    return zlib.decompressobj(16 + zlib.MAX_WBITS)


class _Inflate:
    """Decompressed blocks of a (multi-member) gzip file from a given state and offset.

    ``blocks`` yields non-empty pieces, and an empty ``b""`` each time a compressed chunk
    has been used up: there, ``z`` and ``comp_off`` are a state to restart from."""

    def __init__(self, fd: int, comp_off: int, z: Any) -> None:
        self.fd, self.comp_off, self.z = fd, comp_off, z
        self.complete = False     # the last member read so far ended properly

    def blocks(self) -> Iterator[bytes]:
        z = self.z
        while True:
            raw = os.pread(self.fd, RAW_CHUNK, self.comp_off)
            if not raw:
                return
            self.comp_off += len(raw)
            data = raw
            while data:
                if z.eof:  # a new gzip member (a recording appended to) or trailing junk
                    if data[:2] != GZIP_MAGIC:
                        return
                    z = self.z = _new_inflater()
                try:
                    piece = z.decompress(data, STEP)
                except zlib.error:
                    return   # garbage: what came before stands (complete says how it ended)
                self.complete = z.eof
                data = z.unused_data if z.eof else z.unconsumed_tail
                if piece:
                    yield piece
            if z.eof:
                z = self.z = _new_inflater()
            yield b""


class RecordingFile:
    """Index and random line access for one recording file (plain or gzip)."""

    def __init__(self, path: str | os.PathLike, *, max_line: int = MAX_LINE,
                 max_total: int = MAX_TOTAL) -> None:
        self.path = Path(path)
        self.name = self.path.name
        self.max_line, self.max_total = max_line, max_total
        self.times = array("d")
        self._starts = array("q")       # decompressed offset of each snapshot line
        self._ends = array("q")         # ... and of its end (the newline excluded)
        self._linenos = array("q")      # ... and its line number in the file (the header: 1)
        self._newlines = 0              # newlines passed by the opening pass
        self._seek: list[tuple[int, int, Any]] = []  # (dec offset, comp offset, inflater)
        self.truncated = False
        self.skipped = 0
        self.notes: list[str] = []
        self.header: dict = {}
        self._lock = threading.Lock()
        self._cursor: tuple[Iterator[bytes], _Inflate | None, int, bytearray, int] | None = None
        try:
            self._fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            raise RecordingError(f"{self.path}: no such file") from None
        except IsADirectoryError:
            raise RecordingError(f"{self.path}: is a directory, not a recording") from None
        except OSError as e:
            raise RecordingError(f"{self.path}: cannot read: {e.strerror or e}") from None
        try:
            if os.path.isdir(self.path):
                raise RecordingError(f"{self.path}: is a directory, not a recording")
            self.gzip = os.pread(self._fd, 2, 0) == GZIP_MAGIC
            self._index()
        except BaseException:
            self.close()
            raise

    def __len__(self) -> int:
        return len(self.times)

    def close(self) -> None:
        fd, self._fd = getattr(self, "_fd", -1), -1
        self._cursor = None
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    # ---- the streaming pass ---------------------------------------------------------------
    def _stream(self, dec_off: int = 0, comp_off: int = 0, z: Any = None
                ) -> tuple[Iterator[bytes], _Inflate | None]:
        if not self.gzip:
            def plain() -> Iterator[bytes]:
                off = dec_off
                while True:
                    block = os.pread(self._fd, STEP, off)
                    if not block:
                        return
                    off += len(block)
                    yield block
            return plain(), None
        inf = _Inflate(self._fd, comp_off, z.copy() if z is not None else _new_inflater())
        return inf.blocks(), inf

    def _index(self) -> None:
        blocks, inf = self._stream()
        pos = 0                    # decompressed offset of ``buf[0]``
        buf = bytearray()
        over = False               # inside a line longer than max_line: not kept
        header_done = False
        total = 0
        last_seek = -CHECKPOINT_BYTES
        stopped = ""
        for block in blocks:
            if not block:   # gzip, between compressed chunks: maybe a seek point
                if inf is not None and pos + len(buf) - last_seek >= CHECKPOINT_BYTES:
                    self._seek.append((pos + len(buf), inf.comp_off, inf.z.copy()))
                    last_seek = pos + len(buf)
                continue
            total += len(block)
            if total > self.max_total:   # read up to the cap, then stop
                block = block[:len(block) - (total - self.max_total)]
                stopped = (f"stopped reading after {self.max_total / 1e9:g} GB of data "
                           "(the rest is left out)")
            elif inf is not None and total > RATIO_AFTER and total > MAX_RATIO * inf.comp_off:
                stopped = (f"stopped reading: the gzip data expands more than {MAX_RATIO}x "
                           "(not a recording's JSON; a compression bomb?)")
                break
            start = 0
            while True:
                if header_done and not buf and not over:
                    # a run of blank lines (184 KB of gzip can hold 1.3 GB of "\n") is
                    # stepped over by the regex engine, not one Python turn per line
                    m = _BLANK_LINES.match(block, start)
                    if m is not None and m.end() > start:
                        pos += m.end() - start
                        self._newlines += block.count(b"\n", start, m.end())
                        start = m.end()
                nl = block.find(b"\n", start)
                if nl < 0:
                    rest = block[start:]
                    if over:
                        pos += len(rest)
                    elif len(buf) + len(rest) > (self.max_line if header_done else MAX_HEADER):
                        if not header_done:
                            raise RecordingError(f"{self.name}: not an infertop recording "
                                                 "(no header line within 1 MB)")
                        over = True
                        pos += len(buf) + len(rest)
                        buf.clear()
                    else:
                        buf += rest
                    break
                piece = block[start:nl]
                start = nl + 1
                self._newlines += 1   # this line is line number self._newlines
                if over:
                    over = False
                    pos += len(piece) + 1
                    self._skip("a line longer than "
                               f"{self.max_line / 1e6:g} MB was left out")
                    continue
                buf += piece
                line_start = pos
                pos += len(buf) + 1
                if not header_done:
                    self.header = parse_header_line(bytes(buf), self.name)
                    header_done = True
                else:
                    self._add_line(buf, line_start, last=False)
                buf.clear()
            if stopped:
                break
        if stopped:
            self.truncated = True
            self.notes.append(stopped)
        if not header_done:
            if not buf and total == 0:
                if self.gzip:
                    raise RecordingError(f"{self.name}: gzip data holds nothing readable")
                raise RecordingError(f"{self.name}: empty file, not an infertop recording")
            self.header = parse_header_line(bytes(buf), self.name)
            return
        if buf and not stopped:   # the file did not end with a newline: the last line
            try:
                json.loads(buf)
                self._add_line(buf, pos, last=True)
            except (ValueError, RecursionError):
                self.truncated = True
                self.notes.append("last line cut short (the recorder was stopped mid-write)")
        if over:
            self._skip(f"a line longer than {self.max_line / 1e6:g} MB was left out")
        if inf is not None and not inf.complete and not self.truncated:
            self.truncated = True
            self.notes.append("gzip stream cut short (the recorder was stopped mid-write)")

    def _skip(self, note: str) -> None:
        self.skipped += 1
        if note not in self.notes:
            self.notes.append(note)

    def _add_line(self, buf: bytearray, start: int, *, last: bool) -> None:
        if not buf.strip():
            return
        try:
            t = snapshot_time(buf)   # bytes() would copy a whole line to read its start
        except ValueError:
            self.skipped += 1   # corrupt: not JSON, or a time that is not a number
            return
        if t is None:
            return              # another kind of line: not a snapshot
        self.times.append(t)
        self._starts.append(start)
        self._ends.append(start + len(buf))
        self._linenos.append(self._newlines + (1 if last else 0))

    # ---- reading lines back -----------------------------------------------------------
    def line_number(self, index: int) -> int:
        """The line number in the file of snapshot line ``index`` (the header is line 1):
        what a message about a bad line names, so a person can open the file there."""
        return self._linenos[index]

    def line(self, index: int) -> bytes:
        """The raw bytes of snapshot line ``index`` (0-based)."""
        start, end = self._starts[index], self._ends[index]
        with self._lock:
            if self._fd < 0:
                raise RecordingError(f"{self.name}: closed")
            if not self.gzip:
                return os.pread(self._fd, end - start, start)
            return self._gz_read(start, end)

    def _gz_read(self, start: int, end: int) -> bytes:
        cur = self._cursor
        # continue from the last read when the line lies ahead within one seek interval;
        # else restart from the last seek point at or before it
        if cur is None or start < cur[2] or start - cur[2] > CHECKPOINT_BYTES:
            i = bisect.bisect_right([s[0] for s in self._seek], start) - 1
            dec, comp, z = self._seek[i] if i >= 0 else (0, 0, None)
            blocks, inf = self._stream(dec, comp, z)
            cur = (blocks, inf, dec, bytearray(), dec)
        blocks, inf, buf_start, buf, pos = cur
        # buf holds decompressed bytes [buf_start, pos)
        try:
            while pos < end:
                block = next(blocks)
                buf += block
                pos += len(block)
                if buf_start < start:       # drop what lies before the line
                    cut = min(start - buf_start, len(buf))
                    del buf[:cut]
                    buf_start += cut
        except StopIteration:
            self._cursor = None
            raise RecordingError(f"{self.name}: the file changed while being read") from None
        out = bytes(buf[start - buf_start:end - buf_start])
        cut = end - buf_start
        del buf[:cut]
        self._cursor = (blocks, inf, buf_start + cut, buf, pos)
        return out
