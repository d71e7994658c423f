"""Fault suite, part A: clean exits on every signal.

The screen runs on a real pseudo-terminal (tests/helpers/pty_run.py): after the signal the
bytes it wrote must end the alternate screen, show the cursor and turn the mouse off, and
a recording must be a finished file.  ``record`` runs headless as a subprocess.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.gzip_lines import ticks_on_disk
from helpers.pty_run import (
    ALT_SCREEN_OFF,
    ALT_SCREEN_ON,
    CURSOR_SHOWN,
    MOUSE_OFF,
    run_on_pty,
)

pytestmark = pytest.mark.integration   # signals sent to real infertop processes

ROOT = Path(__file__).resolve().parent.parent




def assert_terminal_restored(out: bytes) -> None:
    start = out.find(ALT_SCREEN_ON)
    assert start >= 0, "never entered the alternate screen"
    tail = out[start:]
    assert ALT_SCREEN_OFF in tail, "alternate screen not left"
    assert CURSOR_SHOWN in tail[tail.rfind(ALT_SCREEN_OFF) - 200:], "cursor not shown again"
    assert MOUSE_OFF in tail, "mouse reporting not turned off"
    assert b"Traceback" not in out


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 128 + 15), (signal.SIGHUP, 128 + 1),
                                      (signal.SIGINT, 128 + 2)])
def test_tui_restores_the_terminal_and_finishes_the_recording(tmp_path, sig, code):
    rec = tmp_path / "rec.jsonl.gz"
    r = run_on_pty(["demo", "healthy", "--speed", "4", "--record", str(rec)], sig,
                   after_ready=b"hardware", until=lambda: ticks_on_disk(rec) >= 3)
    assert_terminal_restored(r.output)
    assert r.returncode == code, r.returncode
    lines = gzip.decompress(rec.read_bytes()).splitlines()   # a finished gzip stream
    assert json.loads(lines[0])["format"] and len(lines) >= 3


def test_q_typed_on_a_terminal_quits():
    """Keys reach the app through infertop's input thread (tui/driver.py, which sleeps
    until there is input instead of waking ten times a second)."""
    r = run_on_pty(["demo", "healthy"], None, after_ready=b"hardware", keys=b"q", timeout=60)
    assert_terminal_restored(r.output)
    assert r.returncode == 0, r.returncode


def test_ctrl_c_typed_on_a_terminal_quits():
    """In raw mode Ctrl+C is a key, not SIGINT: it quits, as top, htop and nvitop do."""
    r = run_on_pty(["demo", "healthy"], None, after_ready=b"hardware", keys=b"\x03", timeout=60)
    assert_terminal_restored(r.output)
    assert r.returncode == 0, r.returncode
    assert b"[b]" not in r.output


def test_tui_exits_when_the_ssh_session_drops():
    # the terminal is gone (our end closed) and then SIGHUP arrives, as sshd sends it
    r = run_on_pty(["demo", "healthy"], signal.SIGHUP, after_ready=b"hardware", hangup=True)
    assert r.returncode == 128 + 1


def test_a_crashed_tui_exits_non_zero(monkeypatch):
    """cli/interactive.py reads Textual's ``return_code`` (1 after an unhandled error)."""
    from textual.app import App

    import infertop.cli.interactive
    import infertop.tui.modes as modes
    from infertop.cli.args import build_sub_parser
    from infertop.cli.interactive import run_tui

    class Crashing(App):
        def on_mount(self) -> None:
            raise RuntimeError("a pane bug")

        def run(self, **kw):
            return super().run(headless=True)

    monkeypatch.setattr(modes, "app_for_source", lambda *a, **k: Crashing())
    monkeypatch.setattr(infertop.cli.interactive, "require_terminal",
                        lambda: None)  # headless here
    args = build_sub_parser("demo").parse_args(["healthy"])
    assert run_tui(None, args) == 1


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM])
def test_record_finishes_its_file_on_hangup_and_term(tmp_path, sig):
    out = tmp_path / "rec.jsonl.gz"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "infertop", "record", "-o", str(out),
                             "--source", "demo:healthy", "--interval", "0.2"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    # demo records as fast as it goes: wait (on the file) until ticks are on disk
    deadline = time.monotonic() + 60
    while not out.exists() or out.stat().st_size < 2000:
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr
        time.sleep(0.05)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "recorded" in err and "Traceback" not in err
    lines = gzip.decompress(out.read_bytes()).splitlines()
    assert len(lines) >= 2
