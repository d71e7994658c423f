"""Writing output files safely: the one way every infertop output reaches the disk.

Reports, recordings, captures and the demo's file_sd targets all go through here (issue
22: a predictable ``OUT.tmp`` let a planted symlink redirect a root run's write; ``-o``
onto a device or a FIFO replaced it, or hung on the FIFO; ``record -o`` chmodded whatever
it opened and overwrote existing files silently; reports were 0644).  The rules:

- the target is looked at with ``lstat`` and never followed: a symbolic link, directory,
  device, FIFO or socket is refused with one line (OutputError; the CLI exits 2);
- an existing regular file is replaced only when the caller says so (``--force``);
- the file written is always one this process creates, ``O_CREAT | O_EXCL | O_NOFOLLOW``,
  so no open follows a link or blocks on a FIFO, and nothing is chmodded after the fact:
  the mode is given at creation (0600 by default: reports and recordings carry the
  server's command lines, settings and model names; the umask can only narrow it);
- whole files are written to a temporary file with a random name in the target's
  directory and then put in place, never half-written; without ``force`` the last step
  is a hard link, which fails if the name was taken meanwhile, so nothing is clobbered.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

PRIVATE = 0o600

_KINDS = ((stat.S_ISLNK, "a symbolic link (not followed)"), (stat.S_ISDIR, "a directory"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class OutputError(Exception):
    """An output file cannot or must not be written; the message is one line.  ``errno``:
    the system's error behind it, if any (ENOSPC: the disk is full)."""

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


def _why(e: OSError) -> str:
    return e.strerror or str(e)


def _failed(path: str | os.PathLike, e: OSError, doing: str = "write") -> OutputError:
    full = e.errno in (errno.ENOSPC, errno.EDQUOT)
    return OutputError(f"{'disk full: ' if full else ''}cannot {doing} {path}: {_why(e)}",
                       e.errno)


def check_target(path: str | os.PathLike, *, force: bool = False) -> bool:
    """Refuse a target that is not a regular file, or one that exists without ``force``.

    Returns whether a regular file is there now (to be replaced).  The link itself is
    looked at, never what it points to.
    """
    p = Path(path)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        parent = p.parent if str(p.parent) else Path(".")
        if not parent.is_dir():
            raise OutputError(f"cannot write {p}: no such directory {parent}") from None
        return False
    except OSError as e:
        raise _failed(p, e) from None
    for test, kind in _KINDS:
        if test(st.st_mode):
            raise OutputError(f"{p} is {kind}, not a regular file: not written "
                              "(pass the path of a new file)")
    if not stat.S_ISREG(st.st_mode):
        raise OutputError(f"{p} is not a regular file: not written")
    if not force:
        raise OutputError(f"{p} exists: not overwritten (pass --force to replace it)")
    return True


def create_new(path: str | os.PathLike, mode: int = PRIVATE) -> int:
    """Create ``path`` as a new file (exclusive, no link followed, never blocks) and
    return its descriptor open for writing."""
    try:
        return os.open(path, _CREATE, mode)
    except FileExistsError:
        raise OutputError(f"{path} appeared while it was being written: not overwritten") \
            from None
    except OSError as e:
        raise _failed(path, e) from None


def open_output(path: str | os.PathLike, *, force: bool = False, mode: int = PRIVATE) -> int:
    """A file written as it grows (a recording): checked, an existing regular file
    removed when ``force``, then created new.  Returns a descriptor open for writing."""
    if check_target(path, force=force):
        try:
            os.unlink(path)   # unlink removes the name only; the new file gets our mode
        except FileNotFoundError:
            pass
        except OSError as e:
            raise _failed(path, e, "replace") from None
    return create_new(path, mode)


def _temp_name(target: Path) -> Path:
    # at most 100 BYTES of the name: a valid 252-byte name of 4-byte characters kept
    # whole (100 characters) made a temporary name past NAME_MAX (issue 36, case 13)
    stem = os.fsdecode(os.fsencode(target.name)[:100])
    return target.with_name(f".{stem}.{secrets.token_hex(8)}.tmp")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_file(path: str | os.PathLike, data: bytes | str, *, force: bool = False,
               mode: int = PRIVATE) -> Path:
    """Write a whole file: complete in a temporary file of a random name beside it, then
    put in place (``force``: replacing a regular file; else only where nothing is)."""
    return write_files({Path(path): data}, force=force, mode=mode)[0]


def write_files(files: dict[Path, bytes | str], *, force: bool = False,
                mode: int = PRIVATE) -> list[Path]:
    """Write several whole files all or nothing: every one complete on disk before any
    is put in place; on a failure the temporary files (and any already placed) go."""
    for path in files:
        check_target(path, force=force)
    temps: list[tuple[Path, Path]] = []
    placed: list[Path] = []
    try:
        for path, data in files.items():
            path = Path(path)
            tmp = _temp_name(path)
            fd = create_new(tmp, mode)
            temps.append((tmp, path))
            try:
                _write_all(fd, data.encode("utf-8") if isinstance(data, str) else data)
                os.fsync(fd)
            finally:
                os.close(fd)
        for tmp, path in temps:
            _place(tmp, path, force)
            placed.append(path)
        return placed
    except OSError as e:
        _remove([t for t, _ in temps] + placed)
        raise _failed(next(iter(files), Path(".")), e) from None
    except OutputError:
        _remove([t for t, _ in temps] + placed)
        raise


def _place(tmp: Path, path: Path, force: bool) -> None:
    """Move the finished ``tmp`` to ``path``.  rename replaces a directory entry and never
    follows a link that appeared there; without ``force`` a hard link refuses to take a
    name in use (where links are not supported, a check and a rename)."""
    if force:
        if os.path.lexists(path):
            check_target(path, force=True)   # still a regular file, not a planted link
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path, follow_symlinks=False)
    except FileExistsError:
        raise OutputError(f"{path} appeared while it was being written: not overwritten") \
            from None
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        if os.path.lexists(path):
            raise OutputError(f"{path} appeared while it was being written: "
                              "not overwritten") from None
        os.replace(tmp, path)
        return
    os.unlink(tmp)


def _remove(paths: list[Path]) -> None:
    for p in paths:
        try:
            os.unlink(p)
        except OSError:
            pass


def narrow_mode(path: str | os.PathLike, mode: int = PRIVATE) -> None:
    """Make a file our own child process wrote (nsys's exports) private, without
    following a link, blocking on a FIFO, or touching a file that is not ours."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
            os.fchmod(fd, mode)
    except OSError:
        pass   # a file system without modes: nothing to narrow
    finally:
        os.close(fd)
