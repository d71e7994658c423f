"""The fuzz targets: each takes the fuzzer's bytes to one parser's public entry point.

A target returns quietly for any input the parser accepts or refuses the documented way
(its one-line error type); anything else (TypeError, RecursionError, OverflowError, a
hang) is a finding: libFuzzer stops and writes the input.  What a run finds becomes a
plain regression test beside the parser's other tests (so far: a long bad ``--url``
echoed whole, tests/test_hostile_round3.py; a deeply nested last line escaping recording.decode,
tests/test_recording.py).  The targets call the parsers'
public functions only: if one moves, its import here moves with it.

Run by tools/fuzz/run.py (which instruments the infertop modules first).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable


def metrics_text(data: bytes) -> None:
    """A /metrics page: the text parser and the dialect mapping a scrape runs."""
    from infertop.promtext import ParseError, parse
    text = data.decode("utf-8", "replace")
    try:
        parse(text)
    except ParseError as e:
        _one_line(e)
        return
    readings, _ = _probe()._map(text, {})   # errors here are ERROR readings, never raised
    for r in readings:
        assert r.value is None or isinstance(r.value, float), r


_PROBE: list = []


def _probe():
    if not _PROBE:
        from infertop.probes.server.metrics import ServerMetricsProbe
        _PROBE.append(ServerMetricsProbe("http://127.0.0.1:8000"))
    return _PROBE[0]


def recording_lines(data: bytes) -> None:
    """A recording: the whole-file decode (header, snapshot lines, gzip) and each line."""
    from infertop.recording import (
        RecordingError,
        decode,
        decode_snapshot,
        parse_header_line,
    )
    try:
        dec = decode(data, "fuzz")
    except RecordingError as e:
        _one_line(e)
    else:
        for line in dec.lines:
            try:
                snap = decode_snapshot(line)
            except RecordingError as e:
                _one_line(e)
            else:
                json.dumps(snap.to_dict(), allow_nan=False, default=str)
    first = data.split(b"\n", 1)[0]
    try:
        parse_header_line(first, "fuzz")
    except RecordingError as e:
        _one_line(e)
    _meta(data)


# a source name of each meta class (infertop/meta.py's meta_class)
_META_SOURCES = ("scrape@n1", "nvml", "process", "server:h:1", "kvevents:h:1", "gil",
                 "prometheus", "prometheus-alerts", "prometheus-aggregates")


def _meta(data: bytes) -> None:
    """The per-sample meta decoder on its own (issue 36): the input as one meta object, read
    as every source's class: refused with its one line, or typed meta that writes back as
    strict JSON (the recorder writes with allow_nan=False)."""
    from infertop.meta import MetaError, meta_from_dict
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):
        return
    for source in _META_SOURCES:
        try:
            meta = meta_from_dict(source, obj)
        except MetaError as e:
            _one_line(e)
        else:
            json.dumps(meta.to_dict(), allow_nan=False)


def kv_batch(data: bytes) -> None:
    """A KV-event message: the three ZMQ frames split on the first two NULs, then the
    msgpack batch vLLM publishes."""
    from infertop.kvevents import KvEventsError, decode_batch, parse_frames
    frames = data.split(b"\0", 2)
    try:
        _, payload = parse_frames(frames)
    except KvEventsError as e:
        _one_line(e)
        payload = data
    try:
        decode_batch(payload)
    except KvEventsError as e:
        _one_line(e)


def prometheus_answer(data: bytes) -> None:
    """One answer body to each call fleet mode makes: targets, an instant query, the
    rules check (aggregate mode)."""
    import httpx

    from infertop.probes.prometheus.aggregates import RulesCheck
    from infertop.probes.prometheus.client import PrometheusClient, PrometheusError
    from infertop.probes.prometheus.source import node_of
    from infertop.prom_findings import findings_by_node
    from infertop.report import render_report

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=data, headers={"Content-Type": "application/json"})

    async def go() -> None:
        client = PrometheusClient("127.0.0.1:9", transport=httpx.MockTransport(answer))
        try:
            for call in (client.targets, lambda: client.query("up")):
                try:
                    await call()
                except PrometheusError as e:
                    _one_line(e)
            try:
                _, alerts = await RulesCheck(node_of).check(client, 1e9)
            except PrometheusError as e:
                _one_line(e)
                return
            # the alerts as findings, through the doctor's writers (issue 36 cases 2, 12)
            for fs in findings_by_node(alerts, 1e9).values():
                for fmt in ("text", "markdown", "json"):
                    render_report(fs, {}, fmt, {"now": 1e9})
        finally:
            await client.close()
    asyncio.run(go())


def toml_config(data: bytes) -> None:
    """A config file (--config, ~/.config/infertop/config.toml)."""
    from infertop.config import ConfigError, config_from_bytes
    try:
        cfg = config_from_bytes(data)
    except ConfigError as e:
        _one_line(e)
        return
    for section in (cfg.diagnosis, cfg.slo, cfg.thresholds):
        for v in vars(section).values():
            assert not isinstance(v, float) or math.isfinite(v), v


def command_line(data: bytes) -> None:
    """argv (arguments split on NUL, as the kernel hands them over): the parsers of the
    command and each subcommand, then the URL normalizers a --url / --prometheus meets."""
    from infertop.cli.args import SUBCOMMANDS, build_parser, build_sub_parser
    from infertop.credentials import CredentialsError
    from infertop.probes.prometheus.client import normalize_base
    from infertop.probes.server.metrics import normalize_url
    argv = [a.decode("utf-8", "surrogateescape") for a in data.split(b"\0")][:32]
    import contextlib
    import io
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            if argv and argv[0] in SUBCOMMANDS and argv[0] != "tui":
                args = build_sub_parser(argv[0]).parse_args(argv[1:])
            else:
                args = build_parser().parse_args(argv)
    except SystemExit:   # argparse's usage error (2) or --help (0): its own one line
        return
    for url in [*(getattr(args, "url", None) or []), getattr(args, "prometheus", None)]:
        if not isinstance(url, str):
            continue
        for norm in (normalize_url, normalize_base):
            try:
                norm(url)
            except CredentialsError:
                pass
            except ValueError as e:
                _one_line(e)


def _one_line(e: Exception) -> None:
    """A refusal must be one line a user can read: no newline, not empty, bounded."""
    text = str(e)
    assert text and "\n" not in text, repr(text[:300])
    assert len(text) <= 2000, len(text)


TARGETS: dict[str, Callable[[bytes], None]] = {
    "metrics_text": metrics_text,
    "recording_lines": recording_lines,
    "kv_batch": kv_batch,
    "prometheus_answer": prometheus_answer,
    "toml_config": toml_config,
    "command_line": command_line,
}
