"""Fault suite: the screen's terminal goes away (issue 22, problem 7).

A dropped SSH session destroys the terminal under a shell: sshd closes the pty's master,
the shell (the session leader) gets SIGHUP and dies, infertop gets SIGHUP and SIGCONT and
then EIO on every write.  Before the fix, 5 of 6 such runs left infertop deadlocked for
good and deaf to SIGTERM (the SIGCONT started a second writer thread on the dead terminal;
its queue filled and ``App._shutdown`` blocked in ``Queue.put``).

Here the child is exactly that: ``bash -c 'python -m infertop ...; sleep 5'`` on a fresh
pty that is its controlling terminal, and the master is closed at a chosen moment.  The
bound is generous for the shared 2-core test machine (the fix exits in about 0.4-0.7 s
measured there, and ``tui/driver.py`` forces the end EXIT_GRACE after the request).
"""

from __future__ import annotations

import fcntl
import gzip
import os
import select
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import psutil
import pytest

from helpers.gzip_lines import ticks_on_disk

# real infertop processes on ptys and in tmux, their terminal destroyed under them
pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
GONE_WITHIN = 10.0     # seconds after the terminal went away (measured: under 1 s)


def _controlling_tty() -> None:
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class ShellOnPty:
    """``bash -c '<infertop args>; sleep 5'`` with a new pty as its controlling terminal."""

    def __init__(self, args: list[str], *, wrap: str = "") -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": str(ROOT)}
        env.pop("TEXTUAL", None)
        infertop = shlex.join([sys.executable, "-m", "infertop", *args])
        self.shell = subprocess.Popen(["bash", "-c", f"{wrap}{infertop}; sleep 5"],
                                      stdin=slave, stdout=slave, stderr=slave, cwd=ROOT,
                                      env=env, preexec_fn=_controlling_tty, close_fds=True)
        os.close(slave)
        self.out = bytearray()

    def infertop(self, timeout: float = 60) -> psutil.Process:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            kids = [p for p in psutil.Process(self.shell.pid).children(recursive=True)
                    if "infertop" in " ".join(p.cmdline())]
            if kids:
                return kids[0]
            time.sleep(0.02)
        raise AssertionError("infertop never started under the shell")

    def wait_for(self, text: bytes, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.out:
            assert time.monotonic() < deadline, f"never saw {text!r}: {bytes(self.out[-300:])!r}"
            self.read(0.2)

    def read(self, wait: float) -> None:
        """Read what the screen wrote (a terminal that keeps up), waiting up to ``wait``."""
        r, _, _ = select.select([self.master], [], [], wait)
        if r:
            try:
                self.out += os.read(self.master, 65536)
            except OSError:
                raise AssertionError(f"terminal closed early: {bytes(self.out)!r}") from None

    def destroy(self) -> float:
        """Close the master, as sshd does when the connection drops; returns when."""
        os.close(self.master)
        self.master = -1
        return time.monotonic()

    def close(self) -> None:
        if self.master >= 0:
            os.close(self.master)
        for p in psutil.Process(self.shell.pid).children(recursive=True) \
                if self.shell.poll() is None else []:
            p.kill()
        if self.shell.poll() is None:
            self.shell.kill()
        self.shell.wait(10)




def gone_after(proc: psutil.Process, since: float) -> float:
    """Seconds from ``since`` until ``proc`` has exited (a zombie has: its parent, the
    shell, died with the terminal, and when init reaps it is not infertop's doing); fails,
    and kills it, past the bound."""
    while time.monotonic() - since < GONE_WITHIN:
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.02)
    else:
        stuck = proc.status()
        proc.kill()
        raise AssertionError(f"infertop still running ({stuck}) {GONE_WITHIN:.0f} s after "
                             "its terminal went away")
    return time.monotonic() - since


@pytest.mark.parametrize("attempt", range(6))
def test_shell_in_a_destroyed_terminal_after_the_first_frame(tmp_path, attempt):
    """The issue's case, six times: destroyed right after the first frame, recording on."""
    rec = tmp_path / "rec.jsonl.gz"
    run = ShellOnPty(["demo", "healthy", "--record", str(rec)])
    try:
        proc = run.infertop()
        run.wait_for(b"hardware")
        deadline = time.monotonic() + 60
        while ticks_on_disk(rec) < 2:       # the first frame is recorded
            assert time.monotonic() < deadline and proc.is_running()
            run.read(0.1)
        took = gone_after(proc, run.destroy())
        print(f"gone {took:.2f} s after the terminal")
        lines = gzip.decompress(rec.read_bytes()).splitlines()   # a finished gzip stream
        assert lines and b'"format"' in lines[0]
    finally:
        run.close()


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
@pytest.mark.parametrize("attempt", range(3))
def test_tmux_kill_server_after_the_first_frame(tmp_path, attempt):
    """The issue's own reproduction: the shell in a tmux pane, ``tmux kill-server``."""
    sock = f"infertop-test-{os.getpid()}-{attempt}"
    env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": str(ROOT)}
    env.pop("TMUX", None)
    infertop = shlex.join([sys.executable, "-m", "infertop", "demo", "healthy"])
    tmux = ["tmux", "-L", sock, "-f", "/dev/null"]
    subprocess.run([*tmux, "new-session", "-d", "-x", "100", "-y", "30",
                    f"bash -c {shlex.quote(infertop + '; sleep 5')}"], env=env, cwd=ROOT,
                   check=True)
    try:
        pane = subprocess.run([*tmux, "list-panes", "-F", "#{pane_pid}"], env=env,
                              capture_output=True, text=True, check=True).stdout.split()[0]
        deadline = time.monotonic() + 90
        while b"hardware" not in subprocess.run([*tmux, "capture-pane", "-p"], env=env,
                                                capture_output=True).stdout:
            assert time.monotonic() < deadline, "the screen never came up in tmux"
            time.sleep(0.2)
        kids = [p for p in psutil.Process(int(pane)).children(recursive=True)
                if "infertop" in " ".join(p.cmdline())]
        assert kids
        since = time.monotonic()
        subprocess.run([*tmux, "kill-server"], env=env, check=False)
        took = gone_after(kids[0], since)
        print(f"gone {took:.2f} s after tmux kill-server")
    finally:
        subprocess.run([*tmux, "kill-server"], env=env, capture_output=True, check=False)


def test_destroyed_at_start_up():
    run = ShellOnPty(["demo", "healthy"])
    try:
        proc = run.infertop()
        gone_after(proc, run.destroy())
    finally:
        run.close()


def test_destroyed_during_shutdown():
    run = ShellOnPty(["demo", "healthy"])
    try:
        proc = run.infertop()
        run.wait_for(b"hardware")
        os.write(run.master, b"q")
        gone_after(proc, run.destroy())
    finally:
        run.close()


def test_destroyed_with_no_hangup_signal_reaching_it():
    """setsid: infertop is in a session of its own, so the hangup sends it no SIGHUP or
    SIGCONT; it sees only the end of its input and EIO on its writes, and leaves on that."""
    run = ShellOnPty(["demo", "healthy"], wrap="setsid -w ")
    try:
        proc = run.infertop()
        run.wait_for(b"hardware")
        took = gone_after(proc, run.destroy())
        print(f"gone {took:.2f} s after the terminal")
    finally:
        run.close()


def test_sigterm_ends_it_while_its_terminal_reads_nothing():
    """A frozen session: the terminal is there but nobody reads it, so writes block once
    the pty's buffer is full.  SIGTERM still ends infertop."""
    run = ShellOnPty(["demo", "healthy", "--speed", "8"])
    try:
        proc = run.infertop()
        run.wait_for(b"hardware")
        time.sleep(3)           # frames pile up unread (no wall-clock assertion on this)
        since = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        gone_after(proc, since)
    finally:
        run.close()


# ---- not a terminal at all (issue 22, problem 8) ----------------------------------------
def _screen_without(stream: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess, bytes]:
    """Run the screen on a pty with ``stream`` replaced: "stdin-closed", "stdin" (from
    /dev/null), or "stdout"/"stderr" (into a file).  Returns the run and the file."""
    master, slave = os.openpty()
    out_file = tmp_path / "out.txt"
    files = {"stdin": slave, "stdout": slave, "stderr": slave}
    with open(out_file, "wb") as sink, open(os.devnull, "rb") as null:
        if stream == "stdin":
            files["stdin"] = null.fileno()
        elif stream in ("stdout", "stderr"):
            files[stream] = sink.fileno()
        pre = (lambda: os.close(0)) if stream == "stdin-closed" else None
        env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen([sys.executable, "-m", "infertop", "demo", "healthy"],
                                stdin=files["stdin"], stdout=files["stdout"],
                                stderr=files["stderr"], cwd=ROOT, env=env, preexec_fn=pre)
        os.close(slave)
        seen = bytearray()
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            r, _, _ = select.select([master], [], [], 0.2)
            if r:
                try:
                    seen += os.read(master, 65536)
                except OSError:
                    break
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
    try:
        while select.select([master], [], [], 0.1)[0]:
            chunk = os.read(master, 65536)
            if not chunk:
                break
            seen += chunk
    except OSError:
        pass
    os.close(master)
    return subprocess.CompletedProcess(proc.args, proc.returncode), \
        bytes(seen) + out_file.read_bytes()


@pytest.mark.parametrize("stream", ["stdin-closed", "stdin", "stdout", "stderr"])
def test_the_screen_without_a_terminal_says_so_in_one_line(tmp_path, stream):
    run, written = _screen_without(stream, tmp_path)
    assert run.returncode == 2, written[-500:]
    assert b"Traceback" not in written and b"\x1b[" not in written   # no screen drawn
    lines = [x for x in written.decode().splitlines() if x.strip()]
    name = "stdin" if stream.startswith("stdin") else stream
    assert len(lines) == 1 and f"{name} is not one" in lines[0], lines
    assert "infertop snapshot --json" in lines[0] and "infertop record" in lines[0]
