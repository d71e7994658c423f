"""`--version`, `--help` and the screen's no-terminal error answer without importing
Textual (about half a second of imports on a small box: issue 35's instant start).  Each
case runs in a fresh interpreter and reports which modules it loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import contextlib, io, json, sys
from infertop.cli.main import main
out, err = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
        code = main(sys.argv[1:])
    except SystemExit as e:
        code = e.code
heavy = sorted({m.split('.')[0] for m in sys.modules} & {'textual', 'rich', 'pynvml', 'psutil', 'httpx'})
print(json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue(),
                  "heavy": heavy, "modules": len(sys.modules)}))
"""


def run(*args: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True,
                          text=True, cwd=ROOT, stdin=subprocess.DEVNULL, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_version_imports_nothing_heavy():
    r = run("--version")
    assert r["code"] == 0 and r["out"].startswith("infertop ")
    assert r["heavy"] == []


def test_help_imports_no_textual():
    r = run("--help")
    assert r["code"] == 0 and "--url" in r["out"]
    assert "textual" not in r["heavy"]


@pytest.mark.parametrize("args", [[], ["demo", "healthy"]])
def test_the_no_terminal_error_imports_no_textual(args):
    r = run(*args)
    assert r["code"] == 2 and "needs a terminal" in r["err"], r
    assert "textual" not in r["heavy"]


def test_a_bad_theme_is_still_named_before_the_terminal():
    r = run("--theme", "nope", "--source", "demo")
    assert r["code"] == 2 and "unknown theme 'nope'" in r["err"], r


def _in_a_pty(*args: str) -> tuple[int, bytes]:
    """Run infertop in a pseudo-terminal (stdin, stdout, stderr); its exit code and output."""
    import os
    import pty
    import select
    pid, fd = pty.fork()
    if pid == 0:      # the child: infertop on the pty
        os.environ["TERM"] = "xterm-256color"
        os.execv(sys.executable, [sys.executable, "-m", "infertop", *args])
    seen = b""
    while True:
        if not select.select([fd], [], [], 60)[0]:
            break
        try:
            chunk = os.read(fd, 65536)
        except OSError:     # EIO: the child closed the pty
            break
        if not chunk:
            break
        seen += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), seen


def test_the_splash_comes_first_and_an_error_after_it_lands_on_the_normal_screen(tmp_path):
    from infertop.cli import splash
    code, seen = _in_a_pty("demo", "healthy", "--record", str(tmp_path / "no" / "x.jsonl"))
    assert code == 2, seen[-500:]
    assert seen.startswith(splash.SPLASH.encode())
    after = seen.split(splash.SPLASH_OFF.encode(), 1)
    assert len(after) == 2 and b"infertop:" in after[1] and b"\x1b[" not in after[1]


# the screen in a pty with the first frame's wait made long (a loaded box then cannot
# turn the first paint into the placeholder): the child's own code, argv after "-c"
FIRST_FRAME = """
import sys
import infertop.tui.app as app
app.FIRST_FRAME_WAIT = 60.0
from infertop.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_the_first_paint_in_a_terminal_is_the_first_snapshot() -> None:
    """Issue 35 (instant start): the screen's first paint shows the first snapshot; the
    panes' "waiting for the first tick" placeholder, painted first until now, is not
    on the terminal before it.  Read from the pty's byte stream up to the status line's
    "tick 1" (written with the first snapshot's draw); the escapes are taken out."""
    import os
    import pty
    import re
    import select
    import signal
    import time
    pid, fd = pty.fork()
    if pid == 0:      # the child: infertop on the pty
        os.environ["TERM"] = "xterm-256color"
        os.execv(sys.executable, [sys.executable, "-c", FIRST_FRAME, "demo", "healthy"])
    escapes = re.compile(rb"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])")
    seen = b""
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if not select.select([fd], [], [], 1)[0]:
                continue
            try:
                chunk = os.read(fd, 65536)
            except OSError:     # EIO: the child closed the pty
                break
            if not chunk:
                break
            if b"\x1b[6n" in chunk:    # Textual asks where the cursor is: answer
                os.write(fd, b"\x1b[1;1R")
            seen += chunk
            if re.search(rb"tick ?1(?![0-9])", escapes.sub(b"", seen)):
                break
    finally:
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
        os.close(fd)
    plain = escapes.sub(b"", seen)
    first = re.search(rb"tick ?1(?![0-9])", plain)
    assert first, plain[-500:]
    assert b"waiting for the first tick" not in plain[:first.start()]
    assert b"1 hardware" in plain[:first.start()] or b"1hardware" in plain[:first.start()]
