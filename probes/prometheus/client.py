"""A thin async client for Prometheus's HTTP API (``/api/v1/targets``, ``/api/v1/query``).

Every answer is hostile input: the body is read streaming with a size cap, each request
has a timeout, JSON that is not Prometheus's envelope is refused, text that reaches the
screen (target errors, label values) is stripped of control characters and shortened.
Failures raise ``PrometheusError`` with one line that says what to do.

httpx is already a dependency (the /metrics probe); ``trust_env=False`` so a fleet query
never goes through an HTTP_PROXY from the environment by surprise.
"""

from __future__ import annotations

import asyncio
import calendar
import math
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import msgspec

from infertop.credentials import Credentials, from_env, split_url
from infertop.redact import redact_url
from infertop.textclean import one_line

CREDENTIALS_ENV = "INFERTOP_PROMETHEUS_"   # _USERNAME, _PASSWORD(_FILE), _BEARER_TOKEN(_FILE)

if TYPE_CHECKING:
    import httpx

MAX_BYTES = 64_000_000     # a 64-node vLLM fleet answers ~10 MB; 64 MB means something is off
# more series than this in one answer: refused before the JSON is parsed (counted in the
# raw body), so the cap bounds memory and time too: 390k series cost 808 MB and 102 s of
# parsing and mapping for a 3 s snapshot; a 64-node vLLM fleet answers ~20k
MAX_SERIES = 50_000
MAX_LABEL_NAME = 100       # characters kept of a label name ...
MAX_LABEL_VALUE = 200      # ... and of a value (a 20,000-character model name: 40k-char lines)
# the characters textclean.clean makes visible, as they can appear in a JSON body (escaped
# or raw UTF-8): one scan of the body decides whether label values need cleaning (cleaning
# 200k values costs ~0.3 s)
_CTRL_IN_JSON = re.compile(
    rb"\\u00[01][0-9a-fA-F]|\\u007[fF]|\\u00[89][0-9a-fA-F]|\\[nrtbf]|\x7f|\xc2[\x80-\x9f]"
    rb"|\\u20(?:0[efEF]|2[89a-eA-E]|6[6-9])|\\u061[cC]|\\u[dD][89a-fA-F]"
    rb"|\xe2\x80[\x8e\x8f\xa8-\xae]|\xe2\x81[\xa6-\xa9]|\xd8\x9c")


class PrometheusError(RuntimeError):
    """Prometheus could not be read; the message is one line for a person."""


class PrometheusUnreachable(PrometheusError):
    """No answer at all (connection refused, timeout): not a missing API of a live server."""


def clean_text(text: Any, limit: int = 200) -> str:
    """One line, escapes made visible, at most ``limit`` characters (textclean)."""
    return one_line(text, limit)


def normalize_base(url: str) -> str:
    """``9090``, ``host:9090`` or ``http://host:9090/prefix`` -> ``http://host:9090/prefix``."""
    u = url.strip()
    if not u:
        raise ValueError("empty Prometheus URL")
    if u.isdigit():
        u = f"127.0.0.1:{u}"
    if "://" not in u:
        u = "http://" + u
    parts = urlsplit(u)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {clean_text(redact_url(url), 80)!r}")
    try:
        _ = parts.port   # urlsplit checks the port only when it is read
    except ValueError:
        raise ValueError(f"bad port in {clean_text(redact_url(url), 80)!r}") from None
    path = parts.path.rstrip("/")
    if path.endswith("/api/v1"):
        path = path[:-len("/api/v1")]
    return f"{parts.scheme}://{parts.netloc}{path}"


@dataclass(frozen=True)
class Target:
    """One active scrape target as ``/api/v1/targets`` reports it."""

    instance: str
    job: str
    labels: dict[str, str]
    up: bool
    last_scrape: float | None      # unix seconds, None when never scraped
    scrape_interval: float | None  # seconds
    error: str = ""
    url: str = ""
    scrape_duration: float | None = None   # seconds the last scrape took


    def label(self, name: str, default: str = "") -> str:
        return self.labels.get(name, default)


@dataclass
class Timing:
    """What the last request cost (shown in the header's health and the benchmark)."""

    seconds: float = 0.0
    bytes: int = 0
    series: int = 0
    dirty: bool = False   # the last answer held control characters (labels were cleaned)
    requests: dict[str, float] = field(default_factory=dict)


# ---- the API's answers, typed (https://prometheus.io/docs/prometheus/latest/querying/api/)
# msgspec decodes the body straight into these: a wrong type or shape anywhere is one
# ValidationError line, and ``data`` stays raw until the caller says what it must be.
class Envelope(msgspec.Struct):
    status: str
    data: msgspec.Raw = msgspec.Raw()
    error: Any = None
    errorType: Any = None


class Series(msgspec.Struct):
    metric: dict[str, str]
    value: tuple[float, str]          # [unix time, the sample as text: "1", "NaN", "+Inf"]


class Vector(msgspec.Struct):
    resultType: str
    result: msgspec.Raw               # list[Series], decoded once the type is known


_ENVELOPE = msgspec.json.Decoder(Envelope)
_VECTOR = msgspec.json.Decoder(Vector)
_SERIES = msgspec.json.Decoder(list[Series])
_RAWS = msgspec.json.Decoder(list[msgspec.Raw])
_ONE = msgspec.json.Decoder(Series)
T = TypeVar("T")


def decode_data(raw: bytes | msgspec.Raw, into: type[T], what: str) -> T:
    """An answer's ``data`` as ``into``; PrometheusError with one line when it is not."""
    try:
        return msgspec.json.decode(raw, type=into)
    except (msgspec.DecodeError, RecursionError) as e:
        raise PrometheusError(f"{what}: not the answer Prometheus gives "
                              f"({clean_text(e, 160)})") from None


def _series(raw: msgspec.Raw) -> list[Series]:
    """A vector's series; one of the wrong shape (a list for a label) is skipped, not the
    answer: the fast path decodes all at once, the slow one only after a refusal."""
    try:
        return _SERIES.decode(raw)
    except msgspec.DecodeError:
        pass
    try:
        items = _RAWS.decode(raw)
    except msgspec.DecodeError:
        raise PrometheusError("not a vector answer (its result is not a list)") from None
    out = []
    for item in items:
        try:
            out.append(_ONE.decode(item))
        except msgspec.DecodeError:
            continue
    return out


class PrometheusClient:
    def __init__(self, base_url: str, *, timeout: float = 5.0, max_bytes: int = MAX_BYTES,
                 transport: httpx.AsyncBaseTransport | None = None,
                 credentials: Credentials | None = None) -> None:
        # user:password@ leaves the URL at once: self.base is what every message, the
        # recording header and the screen show (issue 36, case 8); the pair, or the
        # environment's (infertop/credentials.py), goes in the Authorization header.
        # A CredentialsError is a ValueError: the CLI says it in one line.
        self.base, from_url = split_url(normalize_base(base_url))
        self.credentials = from_url or credentials or from_env(CREDENTIALS_ENV)
        self.timeout = timeout
        self.max_bytes = max_bytes
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self.last = Timing()
        # evaluate instant queries at this time, not now (the benchmark's backfilled TSDB)
        self.at: float | None = None

    async def open(self) -> None:
        if self._client is None:
            import httpx
            self._client = httpx.AsyncClient(
                transport=self._transport, timeout=httpx.Timeout(self.timeout),
                follow_redirects=False, trust_env=False,
                headers={"Accept": "application/json", **(
                    {"Authorization": self.credentials.authorization()}
                    if self.credentials else {})})

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    # ---- API calls ----------------------------------------------------------------------
    async def targets(self) -> list[Target]:
        data = await self._call("GET", "/api/v1/targets", params={"state": "active"})
        active = data.get("activeTargets") if isinstance(data, dict) else None
        if not isinstance(active, list):
            raise PrometheusError(f"{self.base}/api/v1/targets: no activeTargets list "
                                  "(is this Prometheus?)")
        out = []
        for t in active[:MAX_SERIES]:
            if not isinstance(t, dict):
                continue
            labels = checked_labels(t.get("labels"), True)
            if labels is None:   # not strings: not a target anyone can name
                continue
            out.append(Target(
                instance=labels.get("instance", ""), job=labels.get("job", ""),
                labels=labels, up=t.get("health") == "up",
                last_scrape=_rfc3339(t.get("lastScrape")),
                scrape_interval=_duration(t.get("scrapeInterval")),
                error=clean_text(t.get("lastError") or ""),
                url=clean_text(t.get("scrapeUrl") or ""),
                scrape_duration=_seconds(t.get("lastScrapeDuration"))))
        return out

    async def query(self, promql: str, *, at: float | None = None
                    ) -> list[tuple[dict[str, str], float]]:
        """An instant query; a vector answer as (labels, value) pairs."""
        form = {"query": promql}
        at = self.at if at is None else at
        if at is not None:
            form["time"] = f"{at:.3f}"
        raw, dirty = await self._answer("POST", "/api/v1/query", data=form)
        try:
            vec = _VECTOR.decode(raw)
            if vec.resultType != "vector":
                raise PrometheusError("not a vector answer")
            result = await self._off_loop(_series, vec.result, len(raw))
        except (msgspec.DecodeError, PrometheusError, RecursionError) as e:
            why = clean_text(e, 120)
            raise PrometheusError(f"{self.base}/api/v1/query: not a vector answer ({why})"
                                  ) from None
        if len(result) > MAX_SERIES:
            raise PrometheusError(f"{self.base}: {len(result)} series in one answer "
                                  f"(more than {MAX_SERIES}); narrow the targets")
        out = []
        for item in result:
            try:
                value = float(item.value[1])
            except (ValueError, OverflowError):
                continue
            # ``dirty`` is this answer's own: never state shared across an await (case 1)
            labels = checked_labels(item.metric, dirty)
            if labels is not None:
                out.append((labels, value))
        self.last.series = len(out)
        return out

    async def get(self, path: str, params: dict[str, str] | None = None,
                  into: Any = None) -> Any:
        """Another API endpoint's ``data`` (``/api/v1/rules``), checked as every answer;
        with ``into`` (a msgspec type), decoded into it or refused with one line."""
        raw, _ = await self._answer("GET", path, params=params or {})
        if into is not None:
            return decode_data(raw, into, f"{self.base}{path}")
        return decode_data(raw, Any, f"{self.base}{path}")

    # ---- HTTP ---------------------------------------------------------------------------
    async def _call(self, method: str, path: str, **kw) -> Any:
        """The answer's ``data`` as plain values."""
        raw, _ = await self._answer(method, path, **kw)
        return decode_data(raw, Any, f"{self.base}{path}")

    async def _off_loop(self, fn, arg, size: int):
        """``fn(arg)`` here for a small answer, in a thread for MBs: the screen stays live."""
        return fn(arg) if size < 262_144 else await asyncio.to_thread(fn, arg)

    async def _answer(self, method: str, path: str, **kw) -> tuple[msgspec.Raw, bool]:
        """(the answer's raw ``data``, whether it holds control characters to clean)."""
        import httpx
        if self._client is None:
            await self.open()
        assert self._client is not None
        url = self.base + path
        started = time.perf_counter()
        try:
            body, status = await asyncio.wait_for(self._fetch(method, url, **kw),
                                                  self.timeout * 2)
        except (asyncio.TimeoutError, httpx.TimeoutException):
            raise PrometheusUnreachable(f"no answer from {url} within {self.timeout:g} s "
                                  "(Prometheus busy or unreachable?)") from None
        except httpx.ConnectError:
            raise PrometheusUnreachable(f"cannot connect to Prometheus at {self.base} "
                                  "(is it running? pass --prometheus http://HOST:9090)") from None
        except httpx.HTTPError as e:
            raise PrometheusError(f"{url}: {type(e).__name__}: {clean_text(e)}") from None
        took = time.perf_counter() - started
        self.last.seconds, self.last.bytes = took, len(body)
        self.last.requests[path] = took
        # the series cap before parsing: each series of a vector answer has one "metric"
        # key; counting them in the raw body is C speed, building 390k dicts is not
        series = body.count(b'"metric"')
        if series > MAX_SERIES:
            raise PrometheusError(f"{url}: about {series} series in one answer, more than "
                                  f"infertop's cap of {MAX_SERIES}: narrow the targets "
                                  "(a relabel or fewer jobs)")
        # fast path: strict JSON has no raw C0 bytes, so without a backslash, DEL and the
        # lead bytes of C1 / bidi characters there is nothing to clean
        dirty = (b"\\" in body or b"\x7f" in body or b"\xc2" in body or
                 b"\xe2\x80" in body) and _CTRL_IN_JSON.search(body) is not None
        self.last.dirty = dirty     # shown (the benchmark); never read back for cleaning
        try:   # the envelope only: ``data`` stays raw until its type is known
            doc = await self._off_loop(_ENVELOPE.decode, body, len(body))
        except msgspec.ValidationError as e:
            raise PrometheusError(f"{url}: not a Prometheus API answer "
                                  f"(HTTP {status}: {clean_text(e, 120)})") from None
        except (msgspec.DecodeError, RecursionError):
            snippet = clean_text(body[:200].decode("utf-8", "replace"), 80)
            raise PrometheusError(f"{url} did not answer JSON (HTTP {status}): {snippet!r} "
                                  "— is this Prometheus?") from None
        if doc.status != "success":
            raise PrometheusError(f"Prometheus refused {path} (HTTP {status}): "
                                  f"{clean_text(doc.error or doc.errorType, 160)}")
        return (doc.data if len(doc.data) else msgspec.Raw(b"null")), dirty

    async def _fetch(self, method: str, url: str, **kw) -> tuple[bytes, int]:
        assert self._client is not None
        async with self._client.stream(method, url, **kw) as resp:
            if resp.is_redirect:
                raise PrometheusError(f"{url} redirects (HTTP {resp.status_code}); pass the "
                                      "final Prometheus URL with --prometheus")
            declared = resp.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self.max_bytes:
                raise self._too_big(url)
            chunks, size = [], 0
            async for chunk in resp.aiter_bytes(chunk_size=1 << 18):  # MBs: few big chunks
                size += len(chunk)
                if size > self.max_bytes:
                    raise self._too_big(url)
                chunks.append(chunk)
            return b"".join(chunks), resp.status_code

    def _too_big(self, url: str) -> PrometheusError:
        return PrometheusError(f"answer larger than {self.max_bytes / 1e6:g} MB from {url}")


def checked_labels(raw: Any, dirty: bool) -> dict[str, str] | None:
    """A series' labels as Prometheus defines them (string names, string values), or
    None when they are not (a list, a dict or null for a value).  Names and values are
    capped in length; ``dirty`` (the answer holds a control character): cleaned too."""
    if not isinstance(raw, dict):
        return None
    out: dict[str, str] = {}
    for k, v in raw.items():
        if not isinstance(k, str) or not isinstance(v, str):
            return None
        if dirty or len(k) > MAX_LABEL_NAME or len(v) > MAX_LABEL_VALUE:
            k, v = clean_text(k, MAX_LABEL_NAME), clean_text(v, MAX_LABEL_VALUE)
        out[k] = v
    return out


def _seconds(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) and f >= 0 else None


def _rfc3339(text: Any) -> float | None:
    """``2026-12-01T11:19:30.123456789Z`` (or +hh:mm) -> unix seconds; None when absent."""
    if not isinstance(text, str) or len(text) < 20 or text.startswith("0001-"):
        return None
    m = re.fullmatch(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)",
                     text.strip())
    if not m:
        return None
    y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
    try:
        t = calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0))
    except (ValueError, OverflowError):
        return None
    frac = float(m.group(7)) if m.group(7) else 0.0
    tz = m.group(8)
    if tz != "Z":
        sign = 1 if tz[0] == "+" else -1
        t -= sign * (int(tz[1:3]) * 3600 + int(tz[4:6]) * 60)
    return t + frac


_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0,
          "y": 31536000.0}


def _duration(text: Any) -> float | None:
    """Prometheus durations (``15s``, ``1m30s``, ``500ms``) -> seconds."""
    if not isinstance(text, str) or not text:
        return None
    total, pos = 0.0, 0
    for m in re.finditer(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)", text):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return total if pos == len(text) and math.isfinite(total) else None
