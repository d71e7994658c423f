"""Where captures go: a private directory, time-stamped names, atomic 0600 writes.

Captures hold stack traces (function names, file paths, sometimes arguments on the
command line), so the directory is created 0700 and every file 0600.  Files are written
to a temporary name in the same directory and renamed into place, so a full disk or a
killed process never leaves a half-written capture behind.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from infertop.safefile import OutputError, write_files

# Below this much free space we refuse to start: a 10 s py-spy record of a big server is
# a few MB, an nsys report can be hundreds.
MIN_FREE_BYTES = 16 * 1024 * 1024

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


class CaptureError(Exception):
    """A capture cannot run or could not be saved; ``fix`` says what the user can do."""

    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return self.message + (f"\nFix: {self.fix}" if self.fix else "")


def data_home() -> Path:
    """``$XDG_DATA_HOME/infertop`` (``~/.local/share/infertop`` when unset): captures and
    recordings live under it."""
    base = os.environ.get("XDG_DATA_HOME") or ""
    # The XDG spec says a relative XDG_DATA_HOME is invalid and must be ignored.
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".local" / "share"
    return root / "infertop"


def default_capture_dir() -> Path:
    """``$XDG_DATA_HOME/infertop/captures``."""
    return data_home() / "captures"


def capture_dir(override: str | None = None) -> Path:
    """Return the capture directory, created 0700 and checked writable.

    Raises CaptureError (with a fix) when it cannot be created, is not writable, or the
    disk is (nearly) full.  An existing directory keeps its mode: the user chose it.
    """
    path = Path(override).expanduser() if override else default_capture_dir()
    if path.exists() and not path.is_dir():
        raise CaptureError(f"capture directory {path} exists and is not a directory",
                           "pass another one with --capture-dir DIR (or capture_dir in the config)")
    if not path.exists():
        try:
            path.mkdir(parents=True, mode=0o700)
            os.chmod(path, 0o700)  # mkdir's mode is masked by the umask
        except FileExistsError:
            pass
        except OSError as e:
            raise _os_error(e, path, "create the capture directory") from e
    probe = None
    try:
        fd, probe = tempfile.mkstemp(prefix=".infertop-write-test-", dir=path)
        os.close(fd)
    except OSError as e:
        raise _os_error(e, path, "write in the capture directory") from e
    finally:
        if probe:
            try:
                os.unlink(probe)
            except OSError:
                pass
    free = shutil.disk_usage(path).free
    if free < MIN_FREE_BYTES:
        raise CaptureError(f"disk full: only {free // 1024} KiB free under {path}",
                           "free some space, or pass another directory with --capture-dir DIR")
    return path


def _os_error(e: OSError, path: Path, doing: str) -> CaptureError:
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return CaptureError(f"disk full: cannot {doing} {path} ({e.strerror})",
                            "free some space, or pass another directory with --capture-dir DIR")
    if e.errno == errno.EROFS:
        return CaptureError(f"read-only file system: cannot {doing} {path}",
                            "pass a writable directory with --capture-dir DIR")
    if e.errno in (errno.EACCES, errno.EPERM):
        return CaptureError(f"permission denied: cannot {doing} {path}",
                            f"pass a directory you own with --capture-dir DIR, or fix it: "
                            f"chown $USER {path} && chmod 700 {path}")
    return CaptureError(f"cannot {doing} {path}: {e.strerror or e}",
                        "pass another directory with --capture-dir DIR")


def safe_name(text: str, fallback: str = "x") -> str:
    """A file-name-safe slug: letters, digits, dot, dash, underscore (no path separators)."""
    s = _SAFE.sub("-", text).strip("-.")
    return s[:60] or fallback


def capture_path(directory: Path | str, server: str, kind: str, ext: str,
                 now: float | None = None) -> Path:
    """``<dir>/<YYYYmmdd-HHMMSS>_<server>_<kind>.<ext>``, made unique with -2, -3...

    Local time, because people match it against their own clock and logs.
    """
    directory = Path(directory)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if now is None else now))
    ext = ext.lstrip(".")
    base = f"{stamp}_{safe_name(server, 'server')}_{safe_name(kind, 'capture')}"
    p = directory / f"{base}.{ext}"
    n = 2
    while p.exists():
        p = directory / f"{base}-{n}.{ext}"
        n += 1
    return p


def write_atomic(path: Path | str, data: bytes | str, mode: int = 0o600) -> Path:
    """Write ``data`` to ``path`` (0600) via a temp file + rename; nothing partial is left."""
    return write_all_atomic({Path(path): data}, mode)[0]


def write_all_atomic(files: Mapping[Path, bytes | str], mode: int = 0o600) -> list[Path]:
    """Write several files all-or-nothing: every temp file is complete before any is put
    in place (infertop.safefile: exclusive random temp names, no link followed, an
    existing name never overwritten).

    If a write fails (disk full, permission), every temp file is removed and CaptureError
    is raised; files already placed in this call are removed too.
    """
    try:
        return write_files({Path(p): d for p, d in files.items()}, mode=mode)
    except OutputError as e:
        target = Path(next(iter(files), Path(".")))
        if e.errno is not None:
            raise _os_error(OSError(e.errno, os.strerror(e.errno)), target, "write") from None
        raise CaptureError(str(e), "pass another directory with --capture-dir DIR") from None
