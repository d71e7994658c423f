"""A fake inference server for workshops: a scenario's /metrics over real HTTP.

``infertop demo-server [NAME]`` serves what the scenario's server would serve: /metrics in
its dialect (vLLM by default), /health and /v1/models, so ``infertop --url``, Prometheus or
any other tool attaches exactly as to a real server.  The scenario advances with wall time
(``speed`` ticks per second); while a scenario's server is down (the restart scenario) the
port is really closed, so scrapers see "connection refused", then it comes back.

Plain asyncio streams, stdlib only: every scrape reads the latest rendered text (an
immutable bytes object swapped once per tick), so concurrent scrapes need no lock.
Binds to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path

from infertop.demo.exposition import render, render_dcgm
from infertop.demo.sim import SimFrame
from infertop.probes.base import stop_on_signals
from infertop.probes.sources.demo import DemoSource
from infertop.safefile import write_files
from infertop.servers import registry

HEAD_TIMEOUT = 10.0
# a kept-alive connection waits this long for its next request (Prometheus and infertop
# scrape every few seconds on one connection, as they do a real vLLM, which keeps it open)
KEEPALIVE_IDLE = 75.0
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class DemoServerError(RuntimeError):
    """The server could not start (port in use, bad address); one line for a person."""


class DemoServer:
    def __init__(self, name: str | None = None, *, host: str = "127.0.0.1", port: int = 8000,
                 dialect: str | None = None, speed: float = 1.0, seed: int | None = None,
                 start_time: float | None = None, autoplay: bool = True,
                 log: Callable[[str], None] | None = None, dcgm_port: int | None = None,
                 hostname: str = "demo-node", skip: int = 0,
                 prefill_port: int | None = None) -> None:
        # "dcgm" is not a server kind: the scenario keeps its own, the page is the GPUs'
        self.source = DemoSource(name, speed=speed, seed=seed,
                                 dialect=None if dialect == "dcgm" else dialect,
                                 start_time=start_time, loop=True)
        # a second port serving this node's dcgm-exporter page (a fleet node: server + GPUs)
        self.dcgm_port = dcgm_port
        self.hostname = hostname
        self.skip = skip   # ticks to fast-forward at start (a fleet's misbehaving node)
        self._dcgm_body = b""
        self._dcgm_server: asyncio.AbstractServer | None = None
        # a P/D pair's prefill instance (setup pd_pair): its own page on its own port, as
        # the other node of the pair would serve it (None: the scenario has no pair)
        self.prefill_port = prefill_port if self.source.scenario.setup.get("pd_pair") \
            else None
        self._prefill_body = b""
        self._prefill_server: asyncio.AbstractServer | None = None
        self._prefill_conns: set[asyncio.StreamWriter] = set()
        self.host = host
        self.port = port
        self.fixed_dialect = dialect
        self.speed = speed
        self.autoplay = autoplay
        self.log = log or (lambda msg: None)
        self.frame: SimFrame | None = None
        self.scrapes = 0
        self._body = b""
        self._server: asyncio.AbstractServer | None = None
        # open (kept-alive) connections: the server's end when it goes down; the exporter's
        # (dcgm) stay up with it
        self._conns: set[asyncio.StreamWriter] = set()
        self._dcgm_conns: set[asyncio.StreamWriter] = set()
        self._task: asyncio.Task | None = None
        self._ticked = asyncio.Event()

    @property
    def dialect(self) -> str:
        return self.fixed_dialect or self.source.server_kind

    @property
    def down(self) -> bool:
        return self.frame is not None and self.frame.down

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    # ---- the scenario's clock ---------------------------------------------------------
    def advance(self) -> SimFrame | None:
        """One tick of the scenario; the next scrape sees it."""
        frame = self.source.step_frame()
        if frame is None:
            return None
        self.frame = frame
        if not frame.down:
            self._body = (render_dcgm(frame, self.hostname) if self.dialect == "dcgm"
                          else render(frame, self.dialect)).encode("utf-8")
        if self.dcgm_port is not None:   # the GPUs' exporter stays up while the server is down
            self._dcgm_body = render_dcgm(frame, self.hostname).encode("utf-8")
        if frame.prefill is not None and self.dialect != "dcgm":
            self._prefill_body = render(frame.prefill, self.dialect).encode("utf-8")
        return frame

    async def tick(self) -> SimFrame | None:
        """``advance`` and open or close the port to match the server being up or down."""
        frame = self.advance()
        await self._sync_listening()
        self._ticked.set()
        return frame

    async def next_tick(self) -> SimFrame | None:
        """Wait until the clock advances once (for callers that follow the server)."""
        self._ticked.clear()
        await self._ticked.wait()
        return self.frame

    async def _play(self) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time()
        interval = 1.0 / self.speed
        while True:
            due += interval
            await asyncio.sleep(max(0.0, due - loop.time()))
            if loop.time() - due > 5 * interval:
                due = loop.time()  # the machine slept: carry on from now
            await self.tick()

    # ---- listening ------------------------------------------------------------------------
    async def start(self) -> None:
        for _ in range(self.skip):
            self.source.step_frame()
        self.advance()
        await self._sync_listening()
        if self.dcgm_port is not None:
            try:
                self._dcgm_server = await asyncio.start_server(
                    self._handle_dcgm, self.host, self.dcgm_port, reuse_address=True)
            except OSError as e:
                raise DemoServerError(f"cannot listen on {self.host}:{self.dcgm_port}: "
                                      f"{e.strerror or e}") from None
            if self.dcgm_port == 0:
                self.dcgm_port = self._dcgm_server.sockets[0].getsockname()[1]
        if self.prefill_port is not None:
            try:
                self._prefill_server = await asyncio.start_server(
                    self._handle_prefill, self.host, self.prefill_port, reuse_address=True)
            except OSError as e:
                raise DemoServerError(f"cannot listen on {self.host}:{self.prefill_port}: "
                                      f"{e.strerror or e}") from None
            if self.prefill_port == 0:
                self.prefill_port = self._prefill_server.sockets[0].getsockname()[1]
        if self.autoplay:
            self._task = asyncio.create_task(self._play())

    async def _sync_listening(self) -> None:
        if self.down and self._server is not None:
            for w in list(self._conns):   # a server that went down answers nobody
                w.close()
            self._server.close()
            await self._server.wait_closed()
            self._server = None
            self.log(f"{self.source.scenario.name}: server down (port {self.port} closed)")
        elif not self.down and self._server is None:
            await self._listen()

    async def _listen(self) -> None:
        try:
            self._server = await asyncio.start_server(self._handle, self.host, self.port,
                                                      reuse_address=True)
        except OSError as e:
            raise DemoServerError(f"cannot listen on {self.host}:{self.port}: "
                                  f"{e.strerror or e}") from None
        if self.port == 0:
            self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        for w in [*self._conns, *self._dcgm_conns, *self._prefill_conns]:
            w.close()   # kept-alive ones end with the server
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        if self._dcgm_server is not None:
            self._dcgm_server.close()
            await self._dcgm_server.wait_closed()
            self._dcgm_server = None
        if self._prefill_server is not None:
            self._prefill_server.close()
            await self._prefill_server.wait_closed()
            self._prefill_server = None

    @property
    def prefill_url(self) -> str | None:
        if self.prefill_port is None:
            return None
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.prefill_port}"

    # ---- HTTP ---------------------------------------------------------------------------
    async def _handle_dcgm(self, reader: asyncio.StreamReader,
                           writer: asyncio.StreamWriter) -> None:
        await self._handle(reader, writer, dcgm=True)

    async def _handle_prefill(self, reader: asyncio.StreamReader,
                              writer: asyncio.StreamWriter) -> None:
        await self._handle(reader, writer, prefill=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      dcgm: bool = False, prefill: bool = False) -> None:
        """HTTP/1.1 with keep-alive, as uvicorn serves vLLM: a scraper's connection is
        reused (a connect per scrape would cost the scraper what a real server does not).
        Closed after a request with a body (we do not read bodies), on `Connection: close`,
        HTTP/1.0, or KEEPALIVE_IDLE seconds without a request."""
        conns = self._dcgm_conns if dcgm else self._prefill_conns if prefill else self._conns
        conns.add(writer)
        try:
            wait = HEAD_TIMEOUT
            while True:
                try:
                    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), wait)
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                        asyncio.TimeoutError, ConnectionError):
                    return
                wait = KEEPALIVE_IDLE
                parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
                if len(parts) < 3 or not parts[2].startswith("HTTP/"):
                    writer.write(_response(400, b"bad request\n", "text/plain"))
                    return
                method, path = parts[0], parts[1].split("?", 1)[0]
                low = head.lower()
                keep = (parts[2] == "HTTP/1.1" and b"connection: close" not in low
                        and method in ("GET", "HEAD") and b"content-length:" not in low
                        and b"transfer-encoding:" not in low)
                extra: dict[str, str]
                if dcgm:
                    status, body, ctype, extra = (
                        (200, self._dcgm_body, CONTENT_TYPE, {}) if path == "/metrics" else
                        (404, b"404 page not found\n", "text/plain", {}))
                elif prefill:
                    status, body, ctype, extra = (
                        (200, self._prefill_body, CONTENT_TYPE, {}) if path == "/metrics"
                        else self._route(method, path) if path != "/" else
                        (200, b"infertop demo server: the prefill instance of the pair\n",
                         "text/plain; charset=utf-8", {}))
                else:
                    status, body, ctype, extra = self._route(method, path)
                writer.write(_response(status, b"" if method == "HEAD" else body, ctype,
                                       extra, length=len(body), keep_alive=keep))
                await writer.drain()
                if not keep:
                    return
        except ConnectionError:
            pass
        finally:
            conns.discard(writer)
            writer.close()
            try:
                await writer.wait_closed()
            except (ConnectionError, OSError):
                pass

    def _route(self, method: str, path: str) -> tuple[int, bytes, str, dict[str, str]]:
        if method not in ("GET", "HEAD"):
            return 405, b'{"detail":"Method Not Allowed"}', "application/json", {}
        extra: dict[str, str] = {}
        frame = self.frame
        kind = registry.kind(self.dialect)
        if frame is not None and kind is not None and kind.start_time_header:
            extra[kind.start_time_header] = str(int(frame.start_time))
        if path == "/metrics":
            self.scrapes += 1
            return 200, self._body, CONTENT_TYPE, extra
        if path == "/health":
            body = kind.demo_health.encode() if kind is not None else b""
            return 200, body, "application/json", extra
        if path in ("/v1/models", "/models"):
            return 200, self._models(), "application/json", extra
        if path == "/":
            sc = self.source.scenario
            text = (f"infertop demo server: scenario {sc.name} ({sc.title}), dialect "
                    f"{self.dialect}. Endpoints: /metrics /health /v1/models\n")
            return 200, text.encode(), "text/plain; charset=utf-8", extra
        return 404, b'{"detail":"Not Found"}', "application/json", extra

    def _models(self) -> bytes:
        s = self.source.scenario.setup
        created = int(self.frame.start_time) if self.frame else 0
        model = {"id": s["model"], "object": "model", "created": created,
                 "owned_by": self.dialect, "root": s["model"], "parent": None,
                 "max_model_len": s["max_model_len"]}
        return json.dumps({"object": "list", "data": [model]}).encode()


class FleetDemo:
    """Several demo nodes in one process, for a fleet to point Prometheus at.

    Node ``i`` (named ``node-01``...) serves its inference server's /metrics on one port and
    its GPUs' dcgm-exporter page on another; all play ``scenario`` with their own seed,
    except ``bad_node`` which plays ``bad_scenario`` fast-forwarded ``bad_skip`` ticks (into
    the trouble).  ``file_sd()`` gives Prometheus file_sd target groups with a ``node``
    label per node, so dcgm-exporter and server of one node group together."""

    def __init__(self, nodes: int, *, host: str = "127.0.0.1", port: int = 0,
                 scenario: str | None = "healthy", dialect: str | None = None,
                 bad_node: int | None = None, bad_scenario: str = "dec-ttft-burst",
                 bad_skip: int = 32, speed: float = 1.0,
                 log: Callable[[str], None] | None = None) -> None:
        if nodes < 1:
            raise DemoServerError("a fleet needs at least one node")
        self.servers: list[DemoServer] = []
        for i in range(nodes):
            bad = bad_node is not None and i == bad_node
            p = 0 if port == 0 else port + 2 * i
            self.servers.append(DemoServer(
                bad_scenario if bad else scenario, host=host, port=p, dialect=dialect,
                # the bad node at quarter speed: its trouble lasts 4x as long in wall time
                speed=speed * (0.25 if bad else 1.0), seed=1000 + i, log=log,
                dcgm_port=0 if port == 0 else p + 1,
                hostname=self.node_name(i), skip=bad_skip if bad else 0))

    @staticmethod
    def node_name(i: int) -> str:
        return f"node-{i + 1:02d}"

    async def start(self) -> None:
        try:
            for s in self.servers:
                await s.start()
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        for s in self.servers:
            await s.stop()

    def file_sd(self) -> dict[str, list[dict]]:
        """job -> file_sd target groups: {"server": [...], "dcgm": [...]}."""
        out: dict[str, list[dict]] = {"server": [], "dcgm": []}
        for i, s in enumerate(self.servers):
            host = f"[{s.host}]" if ":" in s.host else s.host
            labels = {"node": self.node_name(i)}
            out["server"].append({"targets": [f"{host}:{s.port}"], "labels": labels})
            out["dcgm"].append({"targets": [f"{host}:{s.dcgm_port}"], "labels": labels})
        return out


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}


def _response(status: int, body: bytes, ctype: str, extra: dict[str, str] | None = None,
              length: int | None = None, keep_alive: bool = False) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'OK')}",
             f"Content-Type: {ctype}",
             f"Content-Length: {len(body) if length is None else length}",
             "Connection: keep-alive" if keep_alive else "Connection: close",
             "Server: infertop-demo"]
    lines += [f"{k}: {v}" for k, v in (extra or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def serve(name: str | None = None, host: str = "127.0.0.1", port: int = 8000,
          dialect: str | None = None, speed: float = 1.0, *, seed: int | None = None,
          log: Callable[[str], None] | None = None) -> int:
    """``infertop demo-server``: serve until Ctrl-C or SIGTERM; returns the exit code.

    Raises DemoServerError (port in use...) and ScenarioError (unknown scenario) with one
    line each, for the CLI to print with exit code 2.
    """
    say = log or (lambda msg: print(msg, file=sys.stderr, flush=True))

    async def main() -> int:
        server = DemoServer(name, host=host, port=port, dialect=dialect, speed=speed,
                            seed=seed, log=say, prefill_port=port + 1 if port else 0)
        stop = stop_on_signals()
        await server.start()
        sc = server.source.scenario
        which = "tour of all scenarios" if server.source.tour else f"scenario {sc.name}"
        say(f"infertop demo server: {which}, {server.dialect} dialect, "
            f"{server.url}/metrics (Ctrl-C to stop)")
        if server.prefill_url:
            say(f"  the pair's prefill instance: {server.prefill_url}/metrics "
                f"(infertop --url {server.url} --url {server.prefill_url})")
        if host not in ("127.0.0.1", "localhost", "::1"):
            say(f"note: listening on {host}, reachable from other machines")
        try:
            await stop.wait()
        finally:
            await server.stop()
        say("infertop demo server: stopped")
        return 0

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        return 0


def serve_fleet(nodes: int, name: str | None = None, host: str = "127.0.0.1", port: int = 0,
                dialect: str | None = None, speed: float = 1.0, *, bad_node: int | None = None,
                bad_scenario: str = "dec-ttft-burst", targets: str | None = None,
                log: Callable[[str], None] | None = None) -> int:
    """``infertop demo-server --nodes N``: a fleet in one process until Ctrl-C/SIGTERM.

    Prints one line per node and ``READY`` when every port listens; with ``targets`` writes
    ``server.json`` and ``dcgm.json`` there (Prometheus file_sd) before that line."""
    import os
    say = log or (lambda msg: print(msg, file=sys.stderr, flush=True))

    async def main() -> int:
        fleet = FleetDemo(nodes, host=host, port=port, scenario=name or "healthy",
                          dialect=dialect if dialect != "dcgm" else None, bad_node=bad_node,
                          bad_scenario=bad_scenario, speed=speed)
        stop = stop_on_signals()
        await fleet.start()
        sd = fleet.file_sd()
        if targets:
            os.makedirs(targets, exist_ok=True)
            # file_sd reloads on change: whole files swapped in (infertop.safefile), each
            # start replacing the last one's; 0644, as Prometheus may run as another user
            # (demo addresses only, nothing from a server)
            write_files({Path(targets) / f"{job}.json": json.dumps(groups)
                         for job, groups in sd.items()}, force=True, mode=0o644)
        for i, (srv, gpu) in enumerate(zip(sd["server"], sd["dcgm"])):
            what = f" plays {bad_scenario}" if i == bad_node else ""
            say(f"{FleetDemo.node_name(i)}: server {srv['targets'][0]}, "
                f"dcgm-exporter {gpu['targets'][0]}{what}")
        print("READY", flush=True)
        try:
            await stop.wait()
        finally:
            await fleet.stop()
        return 0

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        return 0
