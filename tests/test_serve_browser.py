"""`infertop serve` (issue 35, item 6): the screen in a real headless Chromium through
textual-serve, the six panes drawn; read-only keys by default."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from helpers.browser import CHROMIUM_HINT, chromium, page_text
from helpers.prom_fleet import free_port

PANES = ("1 hardware", "2 kernels", "3 memory", "4 scheduling", "5 parallelism", "6 decoding")


def _has_textual_serve() -> bool:
    try:
        import textual_serve  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.skipif(chromium() is None, reason=CHROMIUM_HINT)
@pytest.mark.skipif(not _has_textual_serve(), reason="pip install textual-serve")
async def test_serve_shows_the_six_panes_in_a_real_browser(tmp_path):
    port = free_port()
    # its own session: the server and the infertop it starts per browser session are
    # stopped together at the end
    serve = subprocess.Popen([sys.executable, "-m", "infertop", "serve", "--port", str(port),
                              "demo", "healthy"], stdout=subprocess.DEVNULL,
                             stderr=open(tmp_path / "serve.err", "w"), start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}/"
        end = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    assert r.status == 200 and b"textual" in r.read()
                break
            except OSError:
                assert serve.poll() is None, (tmp_path / "serve.err").read_text()
                assert time.monotonic() < end, "serve never answered"
                time.sleep(0.3)
        text = await page_text(url, lambda t: all(p in t for p in PANES) and "tick" in t)
        assert "Traceback" not in text
    finally:
        os.killpg(serve.pid, signal.SIGTERM)
        try:
            serve.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait(5)


def test_serve_is_loopback_by_default_and_each_session_is_read_only(monkeypatch):
    from infertop.cli.args import build_sub_parser
    from infertop.cli.serve import child_command
    args = build_sub_parser("serve").parse_args(["demo", "healthy", "--speed", "2"])
    assert args.host == "127.0.0.1" and not args.all_keys
    assert args.infertop_args == ["demo", "healthy", "--speed", "2"]
    assert child_command(args.infertop_args).endswith("-m infertop demo healthy --speed 2")


async def test_a_read_only_screen_refuses_the_keys_that_write_or_capture():
    from infertop.probes.sources.demo import DemoSource
    from infertop.tui.modes import DemoApp, LiveApp
    from infertop.tui.options import AppOptions
    app = DemoApp(DemoSource("healthy"), options=AppOptions(manual_ticks=True, read_only=True))
    assert app.check_action("record", ()) is False
    assert app.check_action("findings", ()) is not False       # reading is fine
    assert {"pyspy_dump", "pyspy_record", "nsys", "gil_sampler", "record"} <= \
        LiveApp.WRITE_ACTIONS
    free = DemoApp(DemoSource("healthy"), options=AppOptions(manual_ticks=True))
    assert free.check_action("record", ()) is not False


def test_serve_refuses_a_headless_command_in_one_line():
    from helpers.inproc import run_main
    r = run_main("serve", "doctor")
    assert r.returncode == 2 and "headless command" in r.stderr and r.stderr.count("\n") == 1
