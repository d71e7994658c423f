"""Scrape an inference server's Prometheus /metrics and map it to common readings.

One keep-alive HTTP/1.1 connection per probe (http11.py: h11 over asyncio, not httpx:
see there why; opened in ``open``, closed in ``close``), explicit timeouts, a size cap
while streaming, and ``Accept: text/plain`` only: asking for
OpenMetrics makes prometheus_client rewrite ``:`` in sample names (``vllm:x`` ->
``vllm_x``) but not in HELP/TYPE, which breaks every vLLM/SGLang name (docs/metrics.md#exposition).

Failures raise ``ServerMetricsError`` with a one-line message saying what to do; the hub
turns it into an ERROR sample.  ``open`` succeeds even when the server is down: it may be
starting, and the next tick will find it.
"""

from __future__ import annotations

import asyncio
import errno
import html
import os
import re
import time
import zlib
from dataclasses import replace
from functools import lru_cache
from typing import Any
from urllib.parse import urljoin, urlsplit

from infertop import __version__
from infertop.credentials import Credentials, from_env, split_url
from infertop.dialects import readings_from_families
from infertop.keys import SPECS
from infertop.meta import NvmlMeta, ServerMeta
from infertop.model import Capability, Reading, Sample, make_labels
from infertop.probes.base import Probe, sample
from infertop.probes.registry import LiveTarget, ProbeSpec, register
from infertop.probes.server.http11 import (
    ConnectFailed,
    Http11Client,
    HttpError,
    Response,
)
from infertop.probes.server.netns import connect_in_fd, open_netns
from infertop.probes.server.reach import Route
from infertop.probes.server.roles import RoleReader
from infertop.promtext import ParseError, parse
from infertop.redact import redact_text, redact_url
from infertop.textclean import clean, one_line

__all__ = ["ServerMetricsProbe", "ServerMetricsError", "normalize_url"]

MAX_REDIRECTS = 3
STEP = 256 * 1024  # largest piece inflated at once from a compressed body
MAX_PAGE_LINES = 100_000  # lines parsed per scrape (a big vLLM page: ~2 000)


class ServerMetricsError(RuntimeError):
    """A scrape failed; the message is short and says what to do."""


def normalize_url(url: str) -> tuple[str, str]:
    """(full /metrics URL, instance "host:port") from ``8000``, ``host:port``, a base URL
    or a full URL.  A path other than ``/`` is kept as given."""
    u = url.strip()
    if not u:
        raise ValueError("empty server URL")
    if u.isdigit():
        u = f"127.0.0.1:{u}"
    if u.startswith(":") and u[1:].isdigit():
        u = "127.0.0.1" + u
    if "://" not in u:
        u = "http://" + u
    parts = urlsplit(u)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {_shown(url)}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ValueError(f"bad port in {_shown(url)}") from None
    host = parts.hostname
    host_text = f"[{host}]" if ":" in host else host
    instance = f"{host_text}:{port}"
    path = parts.path if parts.path not in ("", "/") else "/metrics"
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme}://{instance}{path}{query}", instance


CREDENTIALS_ENV = "INFERTOP_SERVER_"   # _USERNAME, _PASSWORD(_FILE), _BEARER_TOKEN(_FILE)


def _shown(url: str) -> str:
    """A bad URL as an error shows it: secrets out, at most 80 characters (the fuzzer's
    command_line target found a 519-character --url echoed whole: 2,037 characters)."""
    text = repr(redact_url(url))
    return text if len(text) <= 80 else text[:79] + "…"


class ServerMetricsProbe(Probe):
    def __init__(self, url: str, *, timeout: float = 2.0, max_bytes: int = 8_000_000,
                 route: Route | None = None) -> None:
        self._bad_url = ""
        # a discovered server in a container: how it is reached and said (reach.py)
        self.route = route
        self._netns_fd: int | None = None   # its network namespace, once entered
        self._credentials: Credentials | None = None
        try:
            # user:password@ is sent as basic auth (normalize_url drops it from what is
            # kept and shown), else the environment's (infertop/credentials.py)
            self._credentials = split_url(url.strip())[1] or from_env(CREDENTIALS_ENV)
            self.url, self.instance = normalize_url(url)
        except ValueError as e:
            self.url, self.instance, self._bad_url = url, url.strip() or "?", redact_text(str(e))
        self.name = f"server:{self.instance}"
        self.timeout = timeout
        self.max_bytes = max_bytes
        self._client: Http11Client | None = None
        # the P/D role from the command line of the process on this URL's port (roles.py)
        self._roles = RoleReader(self.url, self.instance) if not self._bad_url else None

    async def open(self) -> Capability:
        if self._bad_url:
            return Capability(self.name, False, self._bad_url)
        if self._client is None:
            # No proxy from the environment (a local monitor must not send 127.0.0.1
            # scrapes to an HTTP_PROXY).  Redirects are followed by hand (same host).  A
            # plain-http URL never uses TLS (a redirect to https is refused below), so no
            # CA bundle is loaded for it (the client loads it on a first https connect):
            # 1.4 MB of RSS for the whole session.
            self._client = Http11Client(
                headers={"Accept": "text/plain", "Accept-Encoding": "gzip, deflate",
                         "User-Agent": f"infertop/{__version__}", **(
                             {"Authorization": self._credentials.authorization()}
                             if self._credentials else {})},
                connect_timeout=self.timeout, connector=self._connector())
        return Capability(self.name, True, features=frozenset({"metrics"}))

    def _connector(self):
        """Dial from inside the server's network namespace when its route says so.  The
        namespace is opened at the first connect and held (netns.open_netns): a pod's
        server that restarts is read again in the same namespace."""
        route = self.route
        if route is None or route.netns_pid is None:
            return None
        pid, host = route.netns_pid, route.connect_host

        def connect(_host: str, port: int, timeout: float):
            if self._netns_fd is None:
                self._netns_fd = open_netns(pid)
            return connect_in_fd(self._netns_fd, host, port, timeout)
        return connect

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
        fd, self._netns_fd = self._netns_fd, None
        if fd is not None:
            os.close(fd)

    async def collect(self) -> Sample:
        try:
            return await self._collect()
        except ServerMetricsError as e:
            # the URL may carry a token in its query (the scrape needs it; no output may)
            message = redact_text(str(e))
            route = self.route
            if route is not None and route.problem:
                # a server in a namespace we cannot reach: why, and what --url to pass
                # (never "is the server running?": it is, elsewhere)
                message = route.problem
            elif route is not None and route.via:
                # its process was found: "is the server running?" would mislead
                message = message.replace(REFUSED_TAIL, "")
                message = f"{message} ({route.via})" + (f"; {route.hint}" if route.hint else "")
        # raised outside the except block: raising inside it would chain the first error
        # (whose traceback holds the scrape's frames and buffers) to this one in a cycle
        # that only the garbage collector frees
        raise ServerMetricsError(message)

    async def _collect(self) -> Sample:
        if self._bad_url:
            raise ServerMetricsError(self._bad_url)
        if self._client is None:
            await self.open()
        started = time.perf_counter()
        try:
            body, headers, url = await self._fetch_within(self.timeout * 2)
        except asyncio.TimeoutError:
            raise ServerMetricsError(self._timeout_message()) from None
        text = body.decode(_charset(headers.get("content-type", "")), errors="replace")
        if not text or text.isspace():   # (strip() would copy the whole page)
            raise ServerMetricsError(f"empty response from {url}: no metrics")
        warnings: list[str] = []
        lines = text.count("\n")
        if lines > MAX_PAGE_LINES:
            # parsing costs per line: a page of very many series is read up to the cap
            cut = -1
            for _ in range(MAX_PAGE_LINES):
                cut = text.find("\n", cut + 1)
            text = text[:cut + 1]
            warnings.append(f"page has {lines} lines: only the first {MAX_PAGE_LINES} "
                            "were read (cardinality cap)")
        try:
            readings, meta = self._map(text, headers)
        except ParseError as e:
            raise ServerMetricsError(clean(f"{url} did not return Prometheus metrics: {e}")) from None
        readings += self._role_readings(readings)
        if isinstance(meta, ServerMeta) and meta.series_dropped:
            warnings += [n for n in meta.notes if "cardinality cap" in n]
        # warnings: read, but not all of it; the reason says what was left out
        meta = replace(meta, url=_redacted(url), scrape_bytes=len(body),
                       warnings=tuple(warnings))
        if self.route is not None and isinstance(meta, ServerMeta):
            meta = replace(meta, via=self.route.via, container=self.route.container)
        return sample(self.name, readings, meta=meta, started=started,
                      reason="; ".join(warnings))

    def _role_readings(self, readings: list[Reading]) -> list[Reading]:
        """server.disagg_role for this instance when the page gave none (vLLM's never
        does).  A remote server's unknown role is said only when the page shows it is in a
        P/D pair (KV-transfer families): a reason on every remote unified engine is noise."""
        if self._roles is None or any(r.key == "server.disagg_role" for r in readings):
            return []
        got = self._roles.poll()
        if self._roles.local is False and not any(
                r.key == "latency.kv_transfer_seconds" or r.key.startswith("kv.transfer_")
                for r in readings):
            return []
        return got

    def _map(self, text: str, headers) -> tuple[list[Reading], ServerMeta | NvmlMeta]:
        """The page's readings and meta (ParseError when it is not an exposition); the
        fleet's direct probe also maps a dcgm-exporter page here (fleet_hub.py)."""
        return self._map_families(parse(text), headers)

    def _map_families(self, families, headers) -> tuple[list[Reading], ServerMeta]:
        expo = readings_from_families(families, self.instance)
        readings = list(expo.readings)
        _add_start_header(readings, headers, self.instance)
        return readings, expo.meta

    # ---- HTTP --------------------------------------------------------------------------

    async def _fetch_within(self, seconds: float) -> tuple[bytes, dict[str, str], str]:
        """``_fetch`` under a deadline (asyncio.TimeoutError past it).  On 3.11+ the
        deadline is set on this task (``asyncio.timeout``): ``wait_for`` runs the fetch
        as a task of its own, two more turns of the event loop a scrape (5 -> 3, each
        ~0.1 ms of the main thread's CPU here)."""
        timeout = getattr(asyncio, "timeout", None)
        if timeout is None:     # Python 3.10
            return await asyncio.wait_for(self._fetch(), seconds)
        async with timeout(seconds):
            return await self._fetch()

    async def _fetch(self) -> tuple[bytes, dict[str, str], str]:
        assert self._client is not None
        url = self.url
        for _ in range(MAX_REDIRECTS + 1):
            try:
                async with self._client.stream(url) as resp:
                    if resp.is_redirect:
                        url = self._redirect_target(url, resp.headers.get("location", ""))
                        continue
                    body = await self._read_capped(resp, url)
                    if resp.status != 200:
                        raise ServerMetricsError(_status_message(url, resp.status, body))
                    return body, resp.headers, url
            except asyncio.TimeoutError:
                raise ServerMetricsError(self._timeout_message()) from None
            except ConnectFailed as e:
                raise ServerMetricsError(_connect_message(url, e)) from None
            except HttpError as e:
                raise ServerMetricsError(clean(f"{url}: {e}"[:300])) from None
        raise ServerMetricsError(f"{self.url}: more than {MAX_REDIRECTS} redirects")

    def _redirect_target(self, url: str, location: str) -> str:
        target = urljoin(url, location)
        if urlsplit(target).netloc.lower() != urlsplit(url).netloc.lower():
            raise ServerMetricsError(
                f"{url} redirects to another host ({clean(target[:200])}); pass that URL with --url "
                "if it is right")
        if urlsplit(target).scheme != urlsplit(self.url).scheme:
            # the client was made for the URL's scheme (no certificates loaded for http)
            raise ServerMetricsError(
                f"{url} redirects to {clean(target[:200])}; pass that URL with --url")
        return target

    async def _read_capped(self, resp: Response, url: str) -> bytes:
        """The body, decoded, never more than ``max_bytes`` in memory.

        The raw stream is decompressed here, in steps of at most STEP bytes, so that a
        64 KB gzip chunk of zeros is not inflated to 64 MB before any cap can look at it.
        """
        limit = self.max_bytes
        declared = resp.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise _too_big(limit, url)
        body = await _inflate_capped(resp, limit, url)
        if body is None:
            # raised here, after the reading frame is gone: an exception raised inside it
            # would keep its buffers, decoder and network chunk alive through the
            # traceback cycles of the async context managers until a gc pass
            raise _too_big(limit, url)
        return body

    def _timeout_message(self) -> str:
        return f"no answer from {self.url} within {self.timeout:g} s (server busy or hung?)"


@lru_cache(maxsize=64)
def _redacted(url: str) -> str:
    """redact_url, once per URL (two regular expressions a scrape otherwise)."""
    return redact_url(url)


def _too_big(limit: int, url: str) -> ServerMetricsError:
    return ServerMetricsError(
        f"response larger than {limit / 1_000_000:g} MB from {url}: not a metrics page?")


class _Inflate:
    """Content-Encoding decoder with an output cap: identity, gzip or deflate."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self._z: Any = None
        if encoding in ("gzip", "x-gzip"):
            self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._z = zlib.decompressobj()
        self._first = True

    def feed(self, data: bytes, out: bytearray, limit: int) -> bool:
        """Append ``data`` decoded to ``out``; True as soon as ``out`` passes ``limit``.
        Inflated in steps of at most STEP bytes, so the transient copies stay small."""
        if self._z is None:
            out += data
            return len(out) > limit
        while data:
            try:
                piece = self._z.decompress(data, min(STEP, limit - len(out) + 1))
            except zlib.error:
                if self.encoding == "deflate" and self._first:  # raw deflate, no zlib header
                    self._z, self._first = zlib.decompressobj(-zlib.MAX_WBITS), False
                    continue
                raise ServerMetricsError(f"corrupt {self.encoding} body") from None
            self._first = False
            out += piece
            if len(out) > limit:
                return True
            data = self._z.unconsumed_tail
            if self._z.eof:
                break
        return False

    def finish(self, out: bytearray, limit: int) -> bool:
        if self._z is not None:
            try:
                out += self._z.flush(limit - len(out) + 1)
            except zlib.error:
                raise ServerMetricsError(f"corrupt {self.encoding} body") from None
        return len(out) > limit


async def _inflate_capped(resp: Response, limit: int, url: str) -> bytes | None:
    """The decoded body, or None when it would pass ``limit`` (reading stops there)."""
    decoder = _decoder(resp.headers.get("content-encoding", ""), url)
    out = bytearray()
    async for raw in resp.iter_raw():
        if decoder.feed(raw, out, limit):
            return None
    if decoder.finish(out, limit):
        return None
    return bytes(out)


def _decoder(content_encoding: str, url: str) -> _Inflate:
    enc = content_encoding.strip().lower()
    if enc in ("", "identity", "gzip", "x-gzip", "deflate"):
        return _Inflate(enc)
    raise ServerMetricsError(f"{url} answered with Content-Encoding {clean(enc[:40])!r}, "
                             "which infertop does not decode (gzip and deflate only)")


REFUSED_TAIL = " — is the server running?"


def refused_message(url: str) -> str:
    """What a scrape of a stopped server says (the demo's downtime says the same)."""
    return f"connection refused at {url}{REFUSED_TAIL}"


def _connect_message(url: str, err: BaseException) -> str:
    e: BaseException | None = err
    while e is not None:
        if isinstance(e, ConnectionRefusedError) or getattr(e, "errno", None) == errno.ECONNREFUSED:
            break
        e = e.__cause__ or e.__context__
    if e is not None or "refused" in str(err).lower():
        return refused_message(url)
    return clean(f"cannot connect to {url}: {err or type(err).__name__}")


_HTML_DROP = re.compile(r"(?is)<(script|style|head)\b.*?</\1\s*>|<!--.*?-->")
_HTML_TITLE = re.compile(r"(?is)<title[^>]*>(.*?)</title")
_TAG = re.compile(r"(?s)<[^>]*>")
EXCERPT_MAX = 100


def body_excerpt(body: bytes, limit: int = EXCERPT_MAX) -> str:
    """A short, printable excerpt of an error page for a one-line reason: an HTML page's
    title and text (no tags, styles or scripts), control characters dropped, cut to
    ``limit`` characters.  A 404 page dumped whole into a reason fills the screen."""
    text = body[:4096].decode("utf-8", errors="replace")
    if "<" in text and re.search(r"(?i)<(!doctype|html|head|body|title|h1|p)\b", text):
        title = _HTML_TITLE.search(text)
        rest = _TAG.sub(" ", _HTML_DROP.sub(" ", text))
        text = html.unescape((title.group(1) + " — " if title else "") + rest)
        if title:   # the title is usually repeated as the heading: say it once
            t = " ".join(html.unescape(title.group(1)).split())
            head, _, tail = text.partition(" — ")
            text = head + " — " + " ".join(tail.split()).replace(t, "", 1)
    # escapes made visible (textclean), not dropped: the excerpt says what was sent
    return one_line(" ".join(text.split()).strip(" —"), limit)


def _status_message(url: str, status: int, body: bytes) -> str:
    # the body is the server's (or anyone's on that port): a short excerpt, terminal-safe
    snippet = body_excerpt(body)   # the server's (or anyone's on that port): cleaned
    fix = ""
    low = snippet.lower()
    if "--metrics" in low or (status == 501 and "metrics" in low):
        fix = " — start llama-server with --metrics"
    elif status == 404:
        fix = (" — no metrics at this path: check the port (Triton serves them on 8002) and "
               "that metrics are on (SGLang: --enable-metrics)")
    elif status in (401, 403):
        fix = " — the endpoint needs credentials"
    elif status >= 500:
        fix = " — the server failed while rendering its metrics"
    body_part = f": {snippet}" if snippet else ""
    return f"HTTP {status} from {url}{body_part}{fix}"


def _charset(content_type: str) -> str:
    for part in content_type.split(";")[1:]:
        k, _, v = part.strip().partition("=")
        if k.lower() == "charset" and v:
            v = v.strip('"').strip()
            try:
                "".encode(v)
            except LookupError:
                break
            return v
    return "utf-8"


def _add_start_header(readings: list[Reading], headers: dict[str, str], instance: str) -> None:
    """llama.cpp reports its start time only as a response header."""
    raw = headers.get("process-start-time-unix")
    if not raw or any(r.key == "server.process_start_seconds" for r in readings):
        return
    try:
        value = float(raw)
    except ValueError:
        return
    readings.append(Reading("server.process_start_seconds", value,
                            SPECS["server.process_start_seconds"].unit,
                            make_labels(instance=instance)))


def server_probes(args: Any, target: LiveTarget) -> list[ServerMetricsProbe]:
    """One probe per server URL (given or discovered); two spellings of one URL, one probe."""
    out: list[ServerMetricsProbe] = []
    seen: set[str] = set()
    routes = {r.url: r for r in target.routes}
    for u in target.urls:
        probe = ServerMetricsProbe(u, route=routes.get(u))
        if probe.name not in seen:
            seen.add(probe.name)
            out.append(probe)
    return out


# what a /metrics page maps onto: every probe reading of these namespaces (throughput: only
# the server's own figures, e.g. SGLang's gen_throughput; the rest are derived) but the process
# probe's server.setting and the KV-event subscriber's kv.event_* (the dialects' tables in
# infertop/dialects.py name them; tests/test_probe_registry.py checks the two agree)
SERVER_KEYS = tuple(k for k, s in SPECS.items()
                    if not s.derived and k.split(".")[0] in
                    ("server", "kv", "spec", "latency", "request", "disagg", "throughput")
                    and k != "server.setting" and not k.startswith("kv.event_"))

SPEC = register(ProbeSpec(
    name="server", order=30,
    keys=SERVER_KEYS,
    needs="the server's /metrics URL (--url, or the port of a discovered server)",
    build=server_probes,
    demo="infertop.probes.sources.demo:sample_from_exposition",
))
