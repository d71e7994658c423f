"""A fast Prometheus text-exposition (0.0.4) parser with prometheus_client's semantics.

``parse(text)`` yields the same families and samples as
``prometheus_client.parser.text_string_to_metric_families`` (tests/test_promtext.py checks it
differentially), but about an order of magnitude faster, because a 1 Hz monitor parses the
same ~50 KB page of the same server again and again.  How:

* Column-wise work in C.  The text is split into lines once; every line is cut at its last
  space (``rpartition``), values go through ``map(float, ...)``, samples are built in bulk.
  Python-level code runs per *family* (HELP/TYPE lines and runs of samples), not per sample.
* Series and comment caches.  A series key (``name{labels}``, the text left of the value) is
  validated and turned into a label dict once, then found by dict lookup on every later scrape
  (each sample gets its own copy of the dict).  HELP/TYPE lines are cached the same way.
  Both caches are bounded (cleared when full).
* A careful slow path for everything else: escaped label values, quoted UTF-8 names, tabs,
  timestamps, extra spaces, garbage.  It follows prometheus_client's parser step by step, so
  odd but valid lines still group and parse like the reference, and garbage raises
  ``ParseError`` naming the line.

Deliberate differences from prometheus_client (both only on malformed input): an
OpenMetrics exemplar after the value (``1 # {trace_id="x"} 2``) is ignored instead of being
read as the timestamp, and more than value + timestamp on a line is an error instead of
"first and last token".  Values are floats (prometheus_client keeps integral literals as int).
"""

from __future__ import annotations

import re
import string
from collections import deque
from dataclasses import dataclass, field
from itertools import chain, compress, repeat
from operator import not_, sub

__all__ = ["PromSample", "Family", "ParseError", "parse", "clear_caches"]


@dataclass(frozen=True, slots=True)
class PromSample:
    name: str
    labels: dict[str, str]
    value: float
    timestamp: float | None  # seconds (the exposition carries milliseconds)


@dataclass
class Family:
    name: str
    type: str  # counter | gauge | histogram | summary | unknown (as prometheus_client reports)
    help: str
    samples: list[PromSample] = field(default_factory=list)


class ParseError(ValueError):
    """The text is not a Prometheus exposition; the message names the line."""


# --- caches --------------------------------------------------------------------------------
# Bounded: a server whose label values never repeat (request ids...) must not grow memory.
_CACHE_MAX = 32768
# "name{labels}" -> (name, labels), or False: not a fast-path series (comment, escapes...)
_SERIES: dict[str, tuple[str, dict[str, str]] | bool] = {}
_COMMENTS: dict[str, tuple] = {}                       # raw comment line -> event


def clear_caches() -> None:
    """Forget cached series and comment lines (benchmarks use it to measure a cold parse)."""
    _SERIES.clear()
    _COMMENTS.clear()
    _COMMENTS[""] = _SKIP_EVENT


# --- events the line handlers produce ------------------------------------------------------
_SKIP, _HELP, _TYPE, _SAMPLE = range(4)
_SKIP_EVENT = (_SKIP,)
_COMMENTS[""] = _SKIP_EVENT
_SUFFIXES = {"counter": ("",), "gauge": ("",), "summary": ("_count", "_sum", ""),
             "histogram": ("_count", "_sum", "_bucket")}
_TYPES = {"counter", "gauge", "summary", "histogram", "gaugehistogram", "unknown", "info",
          "stateset", "untyped"}
_PLAIN_TYPES = frozenset(("gauge", "histogram", "summary"))  # family built as is
_EMPTY: frozenset[str] = frozenset()

# A series key the fast path accepts: legacy metric name, optional labels with plain names
# (no reserved "__" prefix) and values without quotes, backslashes or newlines.
_LABEL_NAME = r'(?:[a-zA-Z]|_(?!_))[a-zA-Z0-9_]*'
_LABEL_PAIR = r'%s="[^"\\\n]*"' % _LABEL_NAME
_HEAD_RE = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(%s(?:,%s)*)?\})?'
                      % (_LABEL_PAIR, _LABEL_PAIR))
_PAIR_RE = re.compile(r'([^=,"]+)="([^"]*)"')
_METRIC_NAME_RE = re.compile(r'[a-zA-Z_:][a-zA-Z0-9_:]*')

# Samples are built in bulk without the dataclass __init__ (which only stores the four
# fields): the slot descriptors are set through C-level map(), no Python frame per sample.
_new = object.__new__
_set_name = PromSample.name.__set__            # type: ignore[attr-defined]
_set_labels = PromSample.labels.__set__        # type: ignore[attr-defined]
_set_value = PromSample.value.__set__          # type: ignore[attr-defined]
_set_timestamp = PromSample.timestamp.__set__  # type: ignore[attr-defined]
_consume = deque(maxlen=0).extend
_copy = dict.copy
_rpartition = str.rpartition


def _bulk_samples(names, label_templates, values) -> list[PromSample]:
    n = len(values)
    objs = list(map(_new, repeat(PromSample, n)))
    _consume(map(_set_name, objs, names))
    _consume(map(_set_labels, objs, map(_copy, label_templates)))
    _consume(map(_set_value, objs, values))
    _consume(map(_set_timestamp, objs, repeat(None, n)))
    return objs


def _resolve_heads(heads: tuple[str, ...], series: list) -> None:
    """Fill the unknown entries of ``series``: validate each new key once and cache it.

    An entry is (name, labels), or False when the line must take the slow path (a comment,
    a blank, escapes, a timestamp...); False is cached too, so comments cost one lookup.
    """
    if len(_SERIES) + len(heads) > _CACHE_MAX:
        _SERIES.clear()
    match, findall = _HEAD_RE.fullmatch, _PAIR_RE.findall
    for i in [i for i, s in enumerate(series) if s is None]:
        head = heads[i]
        entry: tuple[str, dict[str, str]] | bool = False
        m = match(head)
        if m is not None:
            name, body = m.groups()
            if body:
                pairs = findall(body)
                labels = dict(pairs)
                if len(labels) == len(pairs):  # duplicate label name: the slow path says so
                    entry = (name, labels)
            else:
                entry = (name, {})
        series[i] = _SERIES[head] = entry


def parse(text: str) -> list[Family]:
    """Parse a Prometheus text exposition into families, grouped like prometheus_client."""
    lines = text.split("\n")
    nlines = len(lines)
    heads, _, vals = zip(*map(_rpartition, lines, repeat(" ")))
    series = list(map(_SERIES.get, heads))
    if None in series:  # first sight of some keys (known non-fast ones are cached as False)
        _resolve_heads(heads, series)
    fast_vals = list(compress(vals, series))
    try:
        if "_" in "".join(fast_vals):  # float() accepts "1_0", the exposition does not
            raise ValueError
        values = list(map(float, fast_vals))
    except ValueError:
        # Some value is not a number: send those lines to the slow path, which names them.
        for i, s in enumerate(series):
            if s and not _plain_float(vals[i]):
                series[i] = False
        values = list(map(float, compress(vals, series)))
    fast = list(filter(None, series))
    if fast:
        names, templates = zip(*fast)
        objs = _bulk_samples(names, templates, values)
    else:
        names, objs = (), []

    # The lines the fast path did not take (comments, blanks, odd lines) drive the family
    # state machine; between two of them lies a run of fast samples objs[k:k+gap-1].
    mask = list(map(not_, series))
    mask.append(True)  # sentinel: flushes the last run
    idx = list(compress(range(nlines + 1), mask))
    gaps = list(map(sub, idx, chain((-1,), idx)))
    events = list(map(_COMMENTS.get, compress(lines, mask)))
    if None in events:
        for j in [j for j, ev in enumerate(events) if ev is None]:
            events[j] = _line_event(lines[idx[j]], idx[j] + 1)
    events.append(_SKIP_EVENT)

    families: list[Family] = []
    append_family = families.append
    name, doc, typ, samples, allowed, start = "", "", "untyped", [], _EMPTY, 0
    k = 0  # next unused sample in objs
    for gap, ev, i in zip(gaps, events, idx):
        if gap > 1:
            end = k + gap - 1
            if allowed.issuperset(names[k:end]):
                samples += objs[k:end]
            else:
                for ps in objs[k:end]:
                    if ps.name in allowed:
                        samples.append(ps)
                    else:  # not this family's sample: prometheus_client makes it its own
                        if name:
                            append_family(_build(name, doc, typ, samples, start))
                        name, doc, typ, samples, allowed = "", "", "untyped", [], _EMPTY
                        append_family(_build(ps.name, "", "untyped", [ps], i))
            k = end
        kind = ev[0]
        if kind is _HELP:
            cname = ev[1]
            if cname != name:
                if name:
                    append_family(_build(name, doc, typ, samples, start))
                name, typ, samples, allowed, start = cname, "untyped", [], ev[3], i + 1
            doc = ev[2]
        elif kind is _TYPE:
            cname = ev[1]
            if cname != name:
                if name:
                    append_family(_build(name, doc, typ, samples, start))
                name, doc, samples, start = cname, "", [], i + 1
            typ = ev[2]
            allowed = ev[3]
        elif kind is _SAMPLE:
            ps = ev[1]
            if ps.name in allowed:
                samples.append(ps)
            else:
                if name:
                    append_family(_build(name, doc, typ, samples, start))
                name, doc, typ, samples, allowed = "", "", "untyped", [], _EMPTY
                append_family(_build(ps.name, "", "untyped", [ps], i + 1))
    if name:
        append_family(_build(name, doc, typ, samples, start))
    return families


def _build(name: str, doc: str, typ: str, samples: list[PromSample], lineno: int) -> Family:
    """A finished family, munged like prometheus_client's build_metric."""
    if typ in _PLAIN_TYPES:
        return Family(name, typ, doc, samples)
    if typ == "counter":
        if name.endswith("_total"):
            name = name[:-6]
        else:  # TGI and friends: counter samples without _total get it appended
            samples = [PromSample(s.name + "_total", s.labels, s.value, s.timestamp)
                       for s in samples]
    elif typ == "untyped":
        typ = "unknown"
    if typ not in _TYPES:
        raise ParseError(f"line {lineno}: invalid metric type {typ!r} for {name!r}")
    if not name:
        raise ParseError(f"line {lineno}: empty metric family name")
    return Family(name, typ, doc, samples)


def _plain_float(v: str) -> bool:
    if "_" in v:
        return False
    try:
        float(v)
    except ValueError:
        return False
    return True


# --- the slow path: one line at a time, following prometheus_client's parser ---------------

def _line_event(line: str, lineno: int) -> tuple:
    """The event for one line the fast path skipped; comment events are cached."""
    try:
        s = line.strip()
        if not s:
            return _SKIP_EVENT
        if s[0] == "#":
            ev = _comment_event(s)
            if len(_COMMENTS) >= _CACHE_MAX:
                _COMMENTS.clear()
                _COMMENTS[""] = _SKIP_EVENT
            _COMMENTS[line] = ev
            return ev
        return (_SAMPLE, _parse_sample(s))
    except (ValueError, IndexError) as e:
        raise ParseError(_describe(line, lineno, e)) from None


def _describe(line: str, lineno: int, err: Exception) -> str:
    s = line.strip()
    snippet = s if len(s) <= 80 else s[:77] + "..."
    hint = ""
    if lineno <= 3 or s[:1] in "<{[":
        if s[:1] == "<":
            hint = " (looks like HTML, not a Prometheus exposition)"
        elif s[:1] in "{[":
            hint = " (looks like JSON, not a Prometheus exposition)"
    why = str(err) or "invalid sample"
    if len(why) > 120:
        why = why[:117] + "..."
    return f"line {lineno}: {why}{hint}: {snippet!r}"


def _comment_event(s: str) -> tuple:
    head = s[:7]
    if head == "# HELP " or head == "# TYPE ":
        # The usual shape, split without the quote-aware scanner (same result: a legacy
        # name holds no quotes, and the rest of the line is the doc or the type).
        cname, _, rest = s[7:].partition(" ")
        if _METRIC_NAME_RE.fullmatch(cname):
            parts = ["#", head[2:6], cname]
            rest = rest.lstrip(string.whitespace)
            if rest:
                parts.append(rest)
            return _comment_parts_event(parts)
    return _comment_parts_event(_split_quoted(s, None, 3))


def _comment_parts_event(parts: list[str]) -> tuple:
    if len(parts) < 2:
        return _SKIP_EVENT
    cname = ""
    if len(parts) > 2:
        if parts[1] not in ("TYPE", "HELP"):
            return _SKIP_EVENT
        cname, quoted = _unquote_unescape(parts[2])
        if not quoted and not _METRIC_NAME_RE.fullmatch(cname):
            raise ValueError(f"invalid metric name {cname!r}")
    if parts[1] == "HELP":
        doc = parts[3] if len(parts) == 4 else ""
        if "\\" in doc:
            doc = _HELP_ESCAPE_RE.sub(_unescape_match, doc)
        return (_HELP, cname, doc, frozenset((cname,)))
    if parts[1] == "TYPE":
        if len(parts) < 4:
            raise ValueError("TYPE line without a type")
        typ = parts[3]
        return (_TYPE, cname, typ, frozenset(cname + x for x in _SUFFIXES.get(typ, ("",))))
    return _SKIP_EVENT


_ESCAPES = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}
_HELP_ESCAPE_RE = re.compile(r"\\[\\n]")
_LABEL_ESCAPE_RE = re.compile(r'\\[\\n"]')


def _unescape_match(m: re.Match) -> str:
    return _ESCAPES[m.group(0)]


def _is_escaped(s: str, pos: int) -> bool:
    n = 0
    while pos > n and s[pos - 1 - n] == "\\":
        n += 1
    return n % 2 == 1


def _next_unquoted(text: str, chars: str, start: int = 0) -> int:
    """Index of the first char in ``chars`` outside double quotes, or -1."""
    in_quotes = False
    for i in range(start, len(text)):
        c = text[i]
        if c == '"' and not _is_escaped(text, i):
            in_quotes = not in_quotes
        if not in_quotes and c in chars:
            return i
    return -1


def _split_quoted(text: str, separator: str | None, maxsplit: int = 0) -> list[str]:
    """str.split on unquoted separators (whitespace when None), like prometheus_client."""
    chars = string.whitespace if separator is None else separator
    tokens = [""]
    x = 0
    while x < len(text):
        pos = _next_unquoted(text, chars, x)
        if pos == -1:
            tokens[-1] = text[x:]
            break
        if pos == x:  # runs of separators
            x += 1
            continue
        if 0 < maxsplit < len(tokens):
            tokens[-1] = text[x:]
            break
        tokens[-1] = text[x:pos]
        x = pos + 1
        tokens.append("")
    return tokens


def _unquote_unescape(text: str) -> tuple[str, bool]:
    if not text:
        return text, False
    quoted = False
    text = text.strip()
    if text[0] == '"':
        if len(text) == 1 or text[-1] != '"':
            raise ValueError("missing close quote")
        text = text[1:-1]
        quoted = True
    if "\\" in text:
        text = _LABEL_ESCAPE_RE.sub(_unescape_match, text)
    return text, quoted


def _parse_sample(text: str) -> PromSample:
    label_start = _next_unquoted(text, "{")
    if label_start == -1 or " # " in text[:label_start]:
        name_end = _next_unquoted(text, " \t")
        name = text[:name_end].strip()
        if not _METRIC_NAME_RE.fullmatch(name):
            raise ValueError("invalid metric name")
        value, ts = _value_and_timestamp(text[name_end + 1:])
        return PromSample(name, {}, value, ts)
    name = text[:label_start].strip()
    label_end = _next_unquoted(text[label_start:], "}") + label_start
    labels = _parse_labels(text[label_start + 1:label_end])
    if not name:  # quoted UTF-8 name inside the braces: {"my.metric",a="b"}
        if "__name__" not in labels:
            raise ValueError("sample without a metric name")
        name = labels.pop("__name__")
    elif "__name__" in labels:
        raise ValueError("metric name given twice")
    value, ts = _value_and_timestamp(text[label_end + 1:])
    return PromSample(name, labels, value, ts)


def _parse_labels(body: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    rest = body.strip()
    while rest:
        name_term, value_term, after = _next_term(rest)
        if after == rest:  # no progress: malformed (guards against looping forever)
            raise ValueError("invalid labels")
        rest = after
        if not value_term:
            continue
        label, quoted = _unquote_unescape(name_term)
        if not quoted and not _METRIC_NAME_RE.fullmatch(label):
            raise ValueError(f"invalid label name {label!r}")
        if value_term[0] != '"':
            raise ValueError("label value without quotes")
        i = 1
        while i < len(value_term):
            i = value_term.index('"', i)
            if not _is_escaped(value_term, i):
                break
            i += 1
        if i + 1 != len(value_term):
            raise ValueError("unexpected text after a label value")
        value, _ = _unquote_unescape(value_term)
        if label != "__name__" and label.startswith("__"):
            raise ValueError(f"reserved label name {label!r}")
        if label in labels:
            raise ValueError(f"duplicate label {label!r}")
        labels[label] = value
    return labels


def _next_term(text: str) -> tuple[str, str, str]:
    if text[0] == ",":
        text = text[1:]
        if not text:
            return "", "", ""
        if text[0] == ",":
            raise ValueError("multiple commas")
    pos = _next_unquoted(text, "=,}")
    if pos >= 0 and text[pos] == "=":
        label = text[:pos]
        text = text[pos + 1:]
        pos = _next_unquoted(text, ",}")
    else:
        label = "__name__"
    if pos == -1:
        pos = len(text)
    return label, text[:pos].strip(), text[pos:].strip()


def _value_and_timestamp(s: str) -> tuple[float, float | None]:
    s = s.lstrip()
    sep = " " if " " in s else "\t"
    tokens = [t.strip() for t in s.split(sep) if t.strip()]
    if "#" in tokens:  # OpenMetrics exemplar: not part of the sample
        tokens = tokens[:tokens.index("#")]
    if not tokens:
        raise ValueError("missing value")
    if len(tokens) > 2:
        raise ValueError("unexpected text after the value")
    value = _number(tokens[0])
    ts = None
    if len(tokens) == 2:
        t = tokens[1]
        _number(t)
        try:
            ts = int(t) / 1000
        except ValueError:
            ts = float(t) / 1000
    return value, ts


def _number(tok: str) -> float:
    if "_" in tok:
        raise ValueError(f"invalid value {tok!r}")
    try:
        return float(tok)
    except ValueError:
        raise ValueError(f"invalid value {tok!r}") from None
