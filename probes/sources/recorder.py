"""Writing recordings: one JSON line per Snapshot, off the event loop, flushed every tick.

The file is opened unbuffered through aiofiles, so each tick's line reaches the kernel in
one write from a worker thread: a crash or ``kill -9`` loses at most the line being
written (a reader drops a cut-short last line).  Gzip output is a deflate stream
sync-flushed after every line, so a killed gzip recording is readable up to its last tick
too; ``close`` finishes the stream.  With ``max_bytes`` the file rotates like a log:
``FILE`` is always the newest, older parts become ``FILE.1``, ``FILE.2``... each with its
own header, so every part replays on its own.

``record_headless`` is what ``infertop record`` runs: no Textual anywhere on this path, so
it is cheap enough to leave running.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
import zlib
from pathlib import Path
from typing import Any

import aiofiles
import aiofiles.os

from infertop.model import Snapshot
from infertop.probes.base import stop_on_signals
from infertop.probes.capture.files import data_home
from infertop.recording import (
    RecordingError,
    encode_header,
    encode_snapshot,
    make_header,
)
from infertop.safefile import OutputError, create_new, open_output
from infertop.source import SnapshotSource


def default_recording_path(now: float | None = None) -> Path:
    """$XDG_DATA_HOME/infertop/recordings/infertop-YYYYmmdd-HHMMSS.jsonl.gz (dir 0700)."""
    d = data_home() / "recordings"
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now or time.time()))
    return d / f"infertop-{stamp}.jsonl.gz"


class Recorder:
    def __init__(self, path: str | os.PathLike, header: dict, *, gzip: bool | None = None,
                 max_bytes: int | None = None, keep: int | None = None,
                 force: bool = False) -> None:
        self.path = Path(path)
        self.force = force        # the first part may replace an existing regular file
        self.header = dict(header)
        self.gzip = self.path.suffix == ".gz" if gzip is None else gzip
        if max_bytes is not None and max_bytes <= 0:
            raise ValueError("max_bytes must be > 0")
        self.max_bytes = max_bytes
        self.keep = keep          # rotated parts kept (None: all)
        self.part = 0
        self.lines = 0            # snapshots written, all parts
        self.bytes = 0            # bytes written to the current part
        self._f: Any = None
        self._z: Any = None
        self._failed = False      # a write failed (disk full): no gzip trailer attempt
        self._part_lines = 0
        self._opened = False      # the file was created (close() creates it at the latest)

    def _create(self, path: str, flags: int) -> int:
        """aiofiles' opener: the file is created new and 0600 through infertop.safefile
        (a recording holds the server's command lines, settings and model names): never a
        link followed, a device or FIFO opened (a FIFO with no reader hung ``record -o``
        for good), a mode changed on a file not created here, or a file overwritten
        without ``force``.  Rotated parts are new names too (the old one moved away)."""
        if self.part == 0:
            return open_output(path, force=self.force)
        return create_new(path)

    async def _open(self) -> None:
        try:
            self._f = await aiofiles.open(self.path, "wb", buffering=0, opener=self._create)
        except OutputError as e:
            raise RecordingError(str(e)) from None
        except OSError as e:
            raise RecordingError(f"cannot write {self.path}: {e.strerror or e}") from None
        self._opened = True
        self._z = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS) if self.gzip else None
        self.bytes = 0
        self._part_lines = 0
        await self._emit(encode_header({**self.header, "part": self.part}))

    async def _emit(self, data: bytes) -> None:
        if self._z is not None:
            data = self._z.compress(data) + self._z.flush(zlib.Z_SYNC_FLUSH)
        try:
            # unbuffered: one write() syscall in a worker thread; near a full disk it may
            # write part of the line and return short: the rest goes again, and fails
            # with the disk's error, so a line is counted only once it is all on disk
            view = memoryview(data)
            while view:
                n = await self._f.write(view)
                view = view[n if n is not None else len(view):]
        except OSError as e:
            # disk full (ENOSPC), quota, file too large: the lines already written are
            # whole and readable (a reader drops a cut-short last line); stop and say so
            self._failed = True
            kept = f"the {self.lines} tick{'s' if self.lines != 1 else ''} written before " \
                "are kept" if self.lines else "nothing was recorded"
            raise RecordingError(f"cannot write {self.path}: {e.strerror or e}; {kept}") \
                from None
        self.bytes += len(data)

    async def write(self, snapshot: Snapshot) -> None:
        if self._f is None:
            await self._open()
        line = encode_snapshot(snapshot)
        if self.max_bytes is not None and self._part_lines and \
                self.bytes + len(line) > self.max_bytes:
            await self._rotate()
        await self._emit(line)
        self.lines += 1
        self._part_lines += 1

    async def _rotate(self) -> None:
        await self._finish()
        self.part += 1
        # FILE.(n) -> FILE.(n+1), ..., FILE -> FILE.1 (newest rotated part is .1)
        n = 1
        while await aiofiles.os.path.exists(f"{self.path}.{n}"):   # a stat: off the loop
            n += 1
        for i in range(n - 1, 0, -1):
            if self.keep is not None and i >= self.keep:
                await aiofiles.os.remove(f"{self.path}.{i}")
            else:
                await aiofiles.os.rename(f"{self.path}.{i}", f"{self.path}.{i + 1}")
        if self.keep == 0:
            await aiofiles.os.remove(self.path)
        else:
            await aiofiles.os.rename(self.path, f"{self.path}.1")
        await self._open()

    async def _finish(self) -> None:
        if self._f is None:
            return
        f, self._f = self._f, None
        try:
            if self._z is not None and not self._failed:
                await f.write(self._z.flush(zlib.Z_FINISH))
        except OSError:
            pass   # no room for the gzip trailer: the sync-flushed lines still read
        finally:
            self._z = None
            try:
                await f.close()
            except OSError:
                pass

    async def close(self) -> None:
        """Finish the file; a recorder closed before its first tick (the SSH session
        dropped at start-up) still leaves the file asked for, holding its header: the
        replay then says "holds no snapshot" instead of the file missing (issue 36,
        case 13)."""
        if self._f is None and not self._opened:
            try:
                await self._open()
            except RecordingError:
                pass   # leaving: nowhere to say it (the screen is gone)
        await self._finish()

    async def __aenter__(self) -> Recorder:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


async def record_headless(source: SnapshotSource, path: str | os.PathLike,
                          duration: float | None, interval: float, *,
                          stop: asyncio.Event | None = None, gzip: bool | None = None,
                          max_bytes: int | None = None, keep: int | None = None,
                          host: str | None = None, force: bool = False) -> int:
    """Record ``source`` to ``path`` until ``duration`` seconds of its clock, ``stop``, or
    the source's end.  Returns the number of snapshots written.

    ``interval``: wall seconds between ticks (0: as fast as the source gives them, for
    demo and replay sources); a tick that runs late is not made up, the next one is due
    ``interval`` after it.  ``duration`` counts the snapshots' own clock (wall time live,
    virtual time in a demo), so a 60 s recording holds 60 s of data at any speed.
    """
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    await source.start()
    rec: Recorder | None = None
    ticks = 0
    t0: float | None = None
    due = loop.time()
    try:
        while not stop.is_set():
            snap = await source.next()
            if snap is None:
                break
            if t0 is None:
                t0 = snap.time
            if duration is not None and snap.time - t0 >= duration - 1e-9 and ticks:
                break
            if rec is None:
                header = make_header(source.describe(), snap, host=host or socket.gethostname(),
                                     started=time.time(), interval=interval or None)
                rec = Recorder(path, header, gzip=gzip, max_bytes=max_bytes, keep=keep,
                               force=force)
            await rec.write(snap)
            ticks += 1
            if interval > 0:
                due += interval
                delay = due - loop.time()
                if delay < 0:
                    due = loop.time()   # fell behind: do not burst to catch up
                    continue
                try:
                    await asyncio.wait_for(stop.wait(), delay)
                except asyncio.TimeoutError:
                    pass
            else:
                await asyncio.sleep(0)  # let a stop request in
    finally:
        if rec is not None:
            await rec.close()
        await source.stop()
    return ticks


def run_record(source: SnapshotSource, path: str | os.PathLike, *,
               duration: float | None = None, interval: float = 1.0,
               gzip: bool | None = None, max_bytes: int | None = None,
               keep: int | None = None, force: bool = False) -> int:
    """``infertop record``: record until the duration, the source's end, Ctrl-C or SIGTERM.

    Returns the ticks written; raises RecordingError (one line) when the file cannot be
    written.
    """
    async def main() -> int:
        stop = stop_on_signals()
        return await record_headless(source, path, duration, interval, stop=stop, gzip=gzip,
                                     max_bytes=max_bytes, keep=keep, force=force)

    return asyncio.run(main())
