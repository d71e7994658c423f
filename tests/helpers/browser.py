"""A real headless Chromium driven over the DevTools protocol (aiohttp's websocket client,
which textual-serve brings): load a page and read what its websockets received.

textual-serve draws the screen with xterm.js on a canvas (no text in the DOM), so the
page is given, before its own scripts run, a WebSocket that also keeps every binary
message (the app's output to the terminal); ``page_text`` decodes them."""

from __future__ import annotations

import asyncio
import re
import shutil
import socket
import subprocess
import tempfile
import time

CHROMIUM_HINT = ("the browser test needs Chromium: `apt-get install -y chromium` "
                 "(.ci/run installs it)")
# what works here: no sandbox (root in a container), no GPU, nothing fetched in the background
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1400,900"]

KEEP_MESSAGES = r"""
(() => {
  const WS = window.WebSocket;
  window.__bytes = [];
  window.WebSocket = function (...args) {
    const ws = new WS(...args);
    ws.addEventListener("message", (e) => {
      if (e.data instanceof ArrayBuffer) window.__bytes.push(new Uint8Array(e.data));
    });
    return ws;
  };
  window.WebSocket.prototype = WS.prototype;
  for (const k of ["CONNECTING", "OPEN", "CLOSING", "CLOSED"]) window.WebSocket[k] = WS[k];
  window.__text = () => {
    let n = 0;
    for (const b of window.__bytes) n += b.length;
    const all = new Uint8Array(n);
    let o = 0;
    for (const b of window.__bytes) { all.set(b, o); o += b.length; }
    return new TextDecoder().decode(all);
  };
})();
"""
ESCAPES = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]")


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def page_text(url: str, done, timeout: float = 90.0) -> str:
    """Load ``url`` in a fresh headless Chromium; the text (escapes removed) its page's
    websockets received, once ``done(text)`` holds (polled; ``timeout`` at most)."""
    import aiohttp
    program = chromium()
    assert program is not None, "no chromium (callers skip without it)"
    port = _free_port()
    profile = tempfile.mkdtemp(prefix="infertop-chromium-")
    browser = subprocess.Popen([program, *FLAGS, f"--user-data-dir={profile}",
                                f"--remote-debugging-port={port}", "about:blank"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + timeout
    text = ""
    try:
        async with aiohttp.ClientSession() as http:
            pages: list = []
            while not pages:
                if time.monotonic() > end:
                    raise AssertionError("Chromium's DevTools endpoint never answered")
                try:
                    async with http.get(f"http://127.0.0.1:{port}/json/list") as r:
                        pages = [p for p in await r.json() if p.get("type") == "page"]
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.2)
            async with http.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                ids = iter(range(1, 10**9))

                async def call(method: str, **params):
                    me = next(ids)
                    await ws.send_json({"id": me, "method": method, "params": params})
                    while True:
                        msg = await ws.receive_json()
                        if msg.get("id") == me:
                            return msg.get("result", {})

                await call("Page.enable")
                await call("Page.addScriptToEvaluateOnNewDocument", source=KEEP_MESSAGES)
                await call("Page.navigate", url=url)
                while time.monotonic() < end:
                    await asyncio.sleep(0.3)
                    got = await call("Runtime.evaluate", returnByValue=True,
                                     expression="window.__text ? window.__text() : ''")
                    text = ESCAPES.sub("", got.get("result", {}).get("value", "") or "")
                    if done(text):
                        return text
        raise AssertionError(f"the page never showed what was expected: {text[-2000:]!r}")
    finally:
        browser.terminate()
        try:
            browser.wait(10)
        except subprocess.TimeoutExpired:
            browser.kill()
            browser.wait(5)
        shutil.rmtree(profile, ignore_errors=True)
