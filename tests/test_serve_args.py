"""`infertop serve` takes the screen's flags as they come (issue 35): `serve --port 8000
--theme x` needed a `--` before `--theme` (argparse refused it as unrecognized)."""

from __future__ import annotations

import sys
import types

import pytest

from helpers.inproc import run_main


class FakeServer:
    """textual-serve's Server, recorded instead of serving."""

    made: list[FakeServer] = []

    def __init__(self, command: str, host: str, port: int, title: str) -> None:
        self.command, self.host, self.port = command, host, port
        FakeServer.made.append(self)

    def serve(self) -> None:
        pass


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> list[FakeServer]:
    module = types.ModuleType("textual_serve.server")
    module.Server = FakeServer    # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "textual_serve", types.ModuleType("textual_serve"))
    monkeypatch.setitem(sys.modules, "textual_serve.server", module)
    monkeypatch.delenv("INFERTOP_READ_ONLY", raising=False)
    FakeServer.made = []
    return FakeServer.made


@pytest.mark.parametrize("argv,port,host,screen", [
    (["--port", "8001", "--theme", "nord"], 8001, "127.0.0.1", "--theme nord"),
    (["--theme", "nord", "--port", "8002"], 8002, "127.0.0.1", "--theme nord"),
    (["--port=8003", "demo", "healthy", "--theme", "nord", "--speed", "2"], 8003,
     "127.0.0.1", "demo healthy --theme nord --speed 2"),
    (["--host", "0.0.0.0", "--source", "demo", "--interval", "2"], 8000, "0.0.0.0",
     "--source demo --interval 2"),
    (["--port", "8004", "--", "--theme", "nord"], 8004, "127.0.0.1", "--theme nord"),
])
def test_the_screens_flags_need_no_double_dash(server: list[FakeServer], argv: list[str],
                                               port: int, host: str, screen: str) -> None:
    r = run_main("serve", *argv)
    assert r.returncode == 0, r.stderr
    assert len(server) == 1
    assert server[0].port == port and server[0].host == host
    assert server[0].command.endswith(f"-m infertop {screen}"), server[0].command


def test_serve_flags_after_the_screens_are_still_serves(server: list[FakeServer]) -> None:
    r = run_main("serve", "demo", "healthy", "--all-keys", "--port", "8005")
    assert r.returncode == 0, r.stderr
    assert server[0].port == 8005 and server[0].command.endswith("-m infertop demo healthy")


@pytest.mark.parametrize("argv,words", [
    (["--port", "x", "--theme", "nord"], "expected a port number"),
    (["--theme"], "expected one argument"),
    (["--thme", "nord"], "did you mean --theme?"),
    (["doctor"], "headless command"),
])
def test_bad_serve_arguments_are_one_line(server: list[FakeServer], argv: list[str],
                                          words: str) -> None:
    r = run_main("serve", *argv)
    assert r.returncode == 2 and words in r.stderr, r
    assert not server
