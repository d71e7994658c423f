"""Every output file goes through infertop.safefile (issue 22, problem 3).

Before: ``report -o OUT`` wrote a predictable ``OUT.tmp`` (a symlink planted there made
the write land on the link's target), replaced a device or FIFO named by ``-o`` with a
regular file, and left ``DIR.tmp`` behind for ``-o DIR``; ``record -o`` chmodded what it
opened (a device became 0600), hung for good on a FIFO with no reader, and overwrote
existing files silently; reports were 0644.  Each case below failed before the fix.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from helpers.inproc import run_main
from infertop.probes.capture import files as capture_files
from infertop.probes.capture.files import CaptureError
from infertop.safefile import (
    OutputError,
    narrow_mode,
    open_output,
    write_file,
    write_files,
)

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, timeout: float = 60.0, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "infertop", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env=env, **kw)


def refused(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


def mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    """A short demo recording: what the report says is not the point here, where it
    writes is (the bundled vllm-queue-cap capture took ~1 s of CPU a report)."""
    path = tmp_path_factory.mktemp("rec") / "short.jsonl"
    r = run_main("record", "-o", str(path), "--source", "demo:mem-kv-pressure",
                 "--duration", "20")
    assert r.returncode == 0, r.stderr
    return path


# ---- the helper ------------------------------------------------------------------------
def test_a_new_file_is_0600_whole_and_leaves_no_temp(tmp_path):
    out = write_file(tmp_path / "r.html", "x" * 100_000)
    assert out.read_text() == "x" * 100_000 and mode(out) == 0o600
    assert os.listdir(tmp_path) == ["r.html"]


def test_an_existing_file_is_kept_without_force_and_replaced_new_with_it(tmp_path):
    out = tmp_path / "r.md"
    out.write_text("mine")
    os.chmod(out, 0o644)
    with pytest.raises(OutputError, match="exists: not overwritten .*--force"):
        write_file(out, "new")
    assert out.read_text() == "mine"
    ino = out.stat().st_ino
    write_file(out, "new", force=True)
    assert out.read_text() == "new" and mode(out) == 0o600 and out.stat().st_ino != ino
    assert sorted(os.listdir(tmp_path)) == ["r.md"]


@pytest.mark.parametrize("force", [False, True])
def test_a_symlink_target_is_refused_and_not_followed(tmp_path, force):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    os.chmod(victim, 0o644)
    link = tmp_path / "out.html"
    link.symlink_to(victim)
    with pytest.raises(OutputError, match="symbolic link"):
        write_file(link, "evil", force=force)
    with pytest.raises(OutputError, match="symbolic link"):
        open_output(link, force=force)
    assert victim.read_text() == "precious" and mode(victim) == 0o644 and link.is_symlink()


def test_temp_names_are_random_so_a_planted_tmp_link_is_never_used(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "out.html.tmp").symlink_to(victim)      # the old predictable name
    (tmp_path / ".out.html.tmp").symlink_to(victim)
    write_file(tmp_path / "out.html", "report")
    assert victim.read_text() == "precious"
    assert (tmp_path / "out.html").read_text() == "report"


@pytest.mark.parametrize("kind", ["fifo", "dir", "device"])
def test_not_a_regular_file_is_refused_untouched(tmp_path, kind):
    if kind == "fifo":
        target = tmp_path / "pipe"
        os.mkfifo(target)
        check = stat.S_ISFIFO
    elif kind == "dir":
        target = tmp_path / "adir"
        target.mkdir()
        check = stat.S_ISDIR
    else:
        target = Path("/dev/null")
        check = stat.S_ISCHR
    before = os.lstat(target)
    for force in (False, True):
        with pytest.raises(OutputError, match="not a regular file"):
            write_file(target, "x", force=force)
        with pytest.raises(OutputError, match="not a regular file"):
            open_output(target, force=force)
    after = os.lstat(target)
    assert check(after.st_mode) and after.st_mode == before.st_mode
    if kind != "device":
        assert os.listdir(tmp_path) == [target.name]    # no DIR.tmp, no temp file


def test_a_name_taken_while_writing_is_not_clobbered(tmp_path, monkeypatch):
    out = tmp_path / "cap.txt"
    import infertop.safefile as sf
    real = sf._write_all

    def racing(fd, data):
        real(fd, data)
        out.write_text("someone else's")       # appears between the check and the move

    monkeypatch.setattr(sf, "_write_all", racing)
    with pytest.raises(OutputError, match="appeared while it was being written"):
        write_file(out, "ours")
    assert out.read_text() == "someone else's" and os.listdir(tmp_path) == ["cap.txt"]


def test_several_files_are_all_or_nothing(tmp_path):
    (tmp_path / "b.svg").write_text("old")
    with pytest.raises(OutputError):
        write_files({tmp_path / "a.json": "1", tmp_path / "b.svg": "2"})
    assert sorted(os.listdir(tmp_path)) == ["b.svg"]


def test_captures_refuse_a_planted_link_at_their_name(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    caps = tmp_path / "caps"
    caps.mkdir()
    name = caps / "x_pyspy-dump.txt"
    name.symlink_to(victim)
    with pytest.raises(CaptureError):
        capture_files.write_atomic(name, "stacks")
    assert victim.read_text() == "precious"


def test_narrowing_a_childs_file_follows_no_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("x")
    os.chmod(victim, 0o644)
    (tmp_path / "rep.sqlite").symlink_to(victim)
    narrow_mode(tmp_path / "rep.sqlite")
    assert mode(victim) == 0o644
    own = tmp_path / "rep.csv"
    own.write_text("x")
    os.chmod(own, 0o644)
    narrow_mode(own)
    assert mode(own) == 0o600


# ---- the commands ----------------------------------------------------------------------
# These two run the command in this process (the files it leaves are the point; a child
# costs ~1 s a run): the FIFO and device cases below stay real programs, with a timeout
# for the FIFO that once blocked for ever.
def test_report_is_0600_and_refuses_to_overwrite_without_force(tmp_path, recording):
    out = tmp_path / "r.html"
    r = run_main("report", str(recording), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert mode(out) == 0o600 and out.read_text().startswith("<!DOCTYPE html>")
    refused(run_main("report", str(recording), "-o", str(out), "--format", "markdown"),
            "exists: not overwritten", "--force")
    assert out.read_text().startswith("<!DOCTYPE html>")
    r = run_main("report", str(recording), "-o", str(out), "--format", "markdown", "--force")
    assert r.returncode == 0 and out.read_text().startswith("# infertop report")
    assert os.listdir(tmp_path) == ["r.html"]


@pytest.mark.parametrize("cmd", ["report", "record", "screen"])
def test_a_fifo_with_no_reader_is_refused_at_once(tmp_path, recording, cmd):
    fifo = tmp_path / "out"
    os.mkfifo(fifo)
    args = {"report": ["report", str(recording), "-o", str(fifo)],
            "record": ["record", "-o", str(fifo), "--source", "demo:healthy",
                       "--duration", "2"],
            "screen": ["demo", "healthy", "--record", str(fifo)]}[cmd]
    r = run(*args, timeout=30)          # before: record blocked in open() for ever
    refused(r, "is a FIFO, not a regular file")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_record_refuses_an_existing_file_and_replaces_it_with_force(tmp_path):
    out = tmp_path / "r.jsonl"
    out.write_text("an earlier recording\n")
    os.chmod(out, 0o644)
    refused(run_main("record", "-o", str(out), "--source", "demo:healthy", "--duration", "2"),
            "exists: not overwritten", "--force")
    assert out.read_text() == "an earlier recording\n" and mode(out) == 0o644
    r = run_main("record", "-o", str(out), "--source", "demo:healthy", "--duration", "2",
                 "--force")
    assert r.returncode == 0, r.stderr
    assert mode(out) == 0o600 and out.read_text().startswith('{"format"')


def test_record_onto_a_device_neither_writes_nor_chmods_it(tmp_path):
    before = os.stat("/dev/null")
    refused(run("record", "-o", "/dev/null", "--source", "demo:healthy", "--duration", "2",
                "--force"), "/dev/null is a character device")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_mode == before.st_mode


# ---- a signal always ends a headless command -------------------------------------------
BLOCKED = textwrap.dedent("""
    import asyncio, sys, time
    from infertop.probes.base import stop_on_signals

    async def main():
        stop_on_signals(grace={grace})
        print("ready", flush=True)
        await asyncio.to_thread(time.sleep, 3600)   # stuck: a FIFO, a hung file system

    asyncio.run(main())
""")


@pytest.mark.parametrize("twice", [False, True])
def test_sigterm_ends_a_headless_command_that_is_stuck(twice):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    grace = 600 if twice else 1.0      # twice: the second signal alone must end it
    proc = subprocess.Popen([sys.executable, "-c", BLOCKED.format(grace=grace)], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.terminate()
        if twice:
            time.sleep(0.5)
            proc.terminate()
        assert proc.wait(30) == 128 + 15
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
