"""A fast Prometheus text-exposition (0.0.4) parser with prometheus_client's semantics.

``parse(text)`` yields the same families and samples as
``prometheus_client.parser.text_string_to_metric_families`` (tests/test_promtext.py checks it
differentially), but 25-80x faster on a repeated scrape (4-7x on a first scrape, or on a page
whose series change every time), because a 1 Hz monitor parses the same ~50 KB page of the
same server again and again, and from one scrape to the next only values move.  How:

* Page templates.  The last page of each shape (up to 8: one per scraped server) is kept
  line by line, with its samples and how they group into families (the "plan").  The next
  scrape is diffed against it column-wise in C: the comments and other odd lines must repeat
  exactly, an unchanged sample line keeps its sample *object* (a string compare), and a
  changed one must keep its series prefix (``name{labels} ``) and carry a plain number, which
  becomes a new sample with the old name and labels.  Anything else (a new series, a
  timestamp, garbage) is a new shape: the page is parsed afresh and becomes a template.
  Sharing is safe because samples are frozen and their labels are ``FrozenLabels``, a dict
  whose mutating methods raise TypeError (copy with ``dict(s.labels)`` to change one).
* Column-wise work in C for a page of a new shape: lines are cut at their last space
  (``rpartition``), values go through ``map(float, ...)``, samples are built in bulk.  A
  series key (``name{labels}``) is validated and turned into its labels once (series cache),
  HELP/TYPE lines are cached the same way.  Python-level code runs per *family*, not per
  sample.  The caches are bounded (cleared when full; templates dropped least recently used),
  so a page whose label values never repeat cannot grow memory.
* A careful slow path for everything else: escaped label values, quoted UTF-8 names, tabs,
  timestamps, extra spaces, garbage.  It follows prometheus_client's parser step by step, so
  odd but valid lines still group and parse like the reference, and garbage raises
  ``ParseError`` naming the line.

Deliberate differences from prometheus_client (all only on malformed or hostile input): an
OpenMetrics exemplar after the value (``1 # {trace_id="x"} 2``) is ignored instead of being
read as the timestamp, more than value + timestamp on a line is an error instead of
"first and last token", a series written twice in one page (same name, labels and
timestamp) is a ParseError, as Prometheus rejects that scrape, instead of two samples, and
control, escape and bidi characters in label values, quoted names and HELP text come out
made visible by ``textclean.clean`` (``\x1b`` -> ``␛``): they are attacker-influenced and
end up on a terminal.  Values are floats (prometheus_client keeps integral literals as int).
Samples (and their labels) may be shared between the results of several parses.
"""

from __future__ import annotations

import re
import string
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import chain, compress, repeat
from operator import add, is_, ne, not_, sub, truth
from typing import Any

from .textclean import clean

__all__ = ["PromSample", "Family", "FrozenLabels", "ParseError", "parse", "clear_caches"]


class FrozenLabels(dict):
    """A read-only label dict: equal to (and usable as) a plain dict, but every mutating
    method raises TypeError.  Samples are cached and shared between parses, so a caller
    that changed one sample's labels would change them for every later scrape; copy with
    ``dict(labels)`` (or ``labels.copy()``, which returns a plain dict) to get one to edit.
    A guard against accidents, not a sandbox: ``dict.__setitem__(labels, ...)`` still works.
    """

    __slots__ = ()

    def _read_only(self, *args, **kwargs):
        raise TypeError("sample labels are read-only (shared between parses); "
                        "copy them with dict(labels) to change them")

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self):  # copy/pickle rebuild through __init__, not item by item
        return (FrozenLabels, (dict(self),))

    def __copy__(self) -> FrozenLabels:
        return self

    def __deepcopy__(self, memo) -> FrozenLabels:
        return self


_NO_LABELS = FrozenLabels()


@dataclass(frozen=True, slots=True)
class PromSample:
    name: str
    labels: dict[str, str]  # a FrozenLabels: read-only, shared between parses
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
_CACHE_MAX = 32768   # series keys and comment lines (cleared when full)
_TEMPLATES_MAX = 8   # page shapes remembered: one per scraped server is plenty
# "name{labels}" -> (name, labels), or False: not a fast-path series (comment, escapes...)
_SERIES: dict[str, tuple[str, FrozenLabels] | bool] = {}
# a series key written in a non-canonical way (labels out of order, ``g{}``, a trailing
# comma) -> its canonical text, so a page naming one series twice in two spellings is caught
_ALIAS: dict[str, str] = {}
_COMMENTS: dict[str, tuple] = {}                       # raw comment/blank line -> event
_TEMPLATES: list[_Template] = []                       # most recently used first
_LOCK = threading.Lock()  # templates are updated in place; one parse at a time uses them


def clear_caches() -> None:
    """Forget every cached series, comment line and page (benchmarks measure a cold parse)."""
    with _LOCK:
        _SERIES.clear()
        _ALIAS.clear()
        _COMMENTS.clear()
        _COMMENTS[""] = _SKIP_EVENT
        _TEMPLATES.clear()


# --- events the comment lines produce ------------------------------------------------------
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
_get_name = PromSample.name.__get__            # type: ignore[attr-defined, misc]
_set_name = PromSample.name.__set__            # type: ignore[attr-defined, misc]
_set_labels = PromSample.labels.__set__        # type: ignore[attr-defined, misc]
_set_value = PromSample.value.__set__          # type: ignore[attr-defined, misc]
_set_timestamp = PromSample.timestamp.__set__  # type: ignore[misc, union-attr]
_consume = deque[object](maxlen=0).extend
_rpartition = str.rpartition
_removeprefix = str.removeprefix


class _Template:
    """The last page of one shape, position by position, to diff the next scrape against.

    "Fast" lines are plain samples (``head value``); every other line (comments, blanks,
    samples with timestamps or escapes) is "fixed": the next page must repeat it exactly.
    """

    __slots__ = ("nlines", "fixed_mask", "fixed", "fast_mask", "lines", "prefixes",
                 "names", "labels", "fast_pos", "samples", "plan", "duplicate")

    def __init__(self, lines, fast_mask, heads, names, labels, samples, fast_pos,
                 plan, duplicate: str = "") -> None:
        # a page of this shape writes some series twice: every page of it is rejected
        # (an update only moves values, so the duplicate stays)
        self.duplicate = duplicate
        self.nlines = len(lines)
        self.fast_mask = fast_mask
        self.fixed_mask = list(map(not_, fast_mask))
        self.fixed = tuple(compress(lines, self.fixed_mask))
        self.lines = list(compress(lines, fast_mask))          # the fast lines, as last seen
        self.prefixes = list(map(add, compress(heads, fast_mask), repeat(" ")))  # "head "
        self.names, self.labels = names, labels                # of the fast lines
        self.samples = samples                                 # every sample, page order
        self.fast_pos = fast_pos  # where the fast lines' samples sit among all samples
        self.plan = plan

    def update(self, lines: list[str]) -> bool:
        """Take the next scrape if it has this shape: same fixed lines, and every changed
        fast line keeps its series (``head ``) with a new plain number after it."""
        if len(lines) != self.nlines or tuple(compress(lines, self.fixed_mask)) != self.fixed:
            return False
        fast = list(compress(lines, self.fast_mask))
        changed = list(map(ne, fast, self.lines))
        if True not in changed:
            return True  # nothing moved: the same sample objects again
        moved = list(compress(fast, changed))
        # removeprefix hands the line back unchanged when it does not start with the prefix
        vals = list(map(_removeprefix, moved, compress(self.prefixes, changed)))
        if not all(map(ne, vals, moved)):
            return False  # some line's series changed: a new shape
        if "_" in "".join(vals):  # float() accepts "1_0", the exposition does not
            return False
        try:  # also rejects a timestamp or an exemplar after the value (inner spaces)
            values = list(map(float, vals))
        except ValueError:
            return False
        new = _bulk_samples(compress(self.names, changed), compress(self.labels, changed),
                            values)
        # Replace in place: earlier results hold their own lists (slices), not this one.
        _consume(map(self.samples.__setitem__, compress(self.fast_pos, changed), new))
        self.lines = fast
        return True


def parse(text: str) -> list[Family]:
    """Parse a Prometheus text exposition into families, grouped like prometheus_client.

    Each call returns new Family objects and lists, but a PromSample (frozen, with read-only
    labels) may be the very object an earlier call returned for the same line.
    """
    lines = text.split("\n")
    with _LOCK:
        for n, tpl in enumerate(_TEMPLATES):
            if tpl.update(lines):
                if n:
                    _TEMPLATES.insert(0, _TEMPLATES.pop(n))
                break
        else:
            tpl = _learn(lines)
            if len(_TEMPLATES) >= _TEMPLATES_MAX:
                _TEMPLATES.pop()
            _TEMPLATES.insert(0, tpl)
        if tpl.duplicate:
            raise ParseError(tpl.duplicate)
        names, types, docs, slices, renamed = tpl.plan
        runs = list(map(tpl.samples.__getitem__, slices))  # copies: tpl.samples changes
    families = list(map(Family, names, types, docs, runs))
    for i in renamed:  # counter samples without _total get it appended (TGI and friends)
        f = families[i]
        f.samples = [PromSample(s.name + "_total", s.labels, s.value, s.timestamp)
                     for s in f.samples]
    return families


# --- a page of a new shape -----------------------------------------------------------------

def _learn(lines: list[str]) -> _Template:
    """Parse a whole page column-wise; garbage raises ParseError naming its first line."""
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
    fast_mask = list(map(truth, series))
    items: list = [None] * nlines  # the sample of each line, None for comments and blanks
    names = labels = ()
    if values:
        names, labels = zip(*filter(None, series))
        fast_lines = compress(range(nlines), fast_mask)
        _consume(map(items.__setitem__, fast_lines, _bulk_samples(names, labels, values)))
    slow = list(map(not_, fast_mask))
    nslow = 0  # samples on the slow path (timestamps, escapes...)
    if None in map(_COMMENTS.get, compress(lines, slow)):
        # the slow path, in line order so the first bad line is named
        for i in compress(range(nlines), slow):
            line = lines[i]
            if line in _COMMENTS:
                continue
            try:
                ev = _line_event(line)
            except (ValueError, IndexError) as e:
                raise ParseError(_describe(line, i + 1, e)) from None
            if ev[0] is _SAMPLE:
                items[i] = ev[1]
                nslow += 1
    mask = list(map(not_, items))
    samples = list(filter(None, items))
    fast_pos: Iterable[int] = range(len(samples))
    if nslow:  # where the fast lines' samples sit among all samples
        fast_pos = list(compress(fast_pos, compress(fast_mask, map(not_, mask))))
    plan = _make_plan(list(compress(lines, mask)), mask, list(map(_get_name, samples)))
    if plan[4]:   # counters renamed to _total: compare the names the families will have
        duplicate = _duplicate_renamed(samples, plan[3], set(plan[4]))
    else:
        duplicate = _duplicate(list(compress(heads, fast_mask)),
                               [items[i] for i in compress(range(nlines), fast_mask)],
                               [items[i] for i in compress(range(nlines), slow) if items[i]])
    return _Template(lines, fast_mask, heads, names, labels, samples, fast_pos, plan,
                     duplicate)


def _duplicate(fast_heads: list[str], fast_samples, slow_samples: list[PromSample]) -> str:
    """The error for a page that writes one series twice, "" when none does.

    Prometheus rejects such a scrape ("duplicate sample for timestamp"); prometheus_client
    returns both, and summing them (as a mapping into one reading does) fakes doubled
    rates, and a duplicate that comes and goes fakes a counter reset (a restart).  Checked
    when a page shape is learnt (a set of the series texts, in C); a template update only
    moves values.  Plain lines compare by their canonical series text; the slow-path lines
    (escapes, timestamps, odd spacing) by name, sorted labels and timestamp, against each
    other and against the plain lines of the same names."""
    fast_heads = list(map(_ALIAS.get, fast_heads, fast_heads))   # canonical spellings
    if len(set(fast_heads)) < len(fast_heads):
        seen: set[str] = set()
        for h in fast_heads:
            if h in seen:
                return _duplicate_message(h)
            seen.add(h)
    if not slow_samples:
        return ""
    keys: set = set()
    slow_names = {smp.name for smp in slow_samples}
    for smp in chain(slow_samples, (f for f in fast_samples if f.name in slow_names)):
        k = (smp.name, tuple(sorted(smp.labels.items())), smp.timestamp)
        if k in keys:
            body = ",".join(f'{n}="{v}"' for n, v in k[1])
            return _duplicate_message(f"{smp.name}{{{body}}}" if body else smp.name)
        keys.add(k)
    return ""


def _duplicate_renamed(samples: list[PromSample], slices, renamed: set[int]) -> str:
    """_duplicate for a page with counters that get ``_total`` appended (rare: TGI):
    every sample by its final name, sorted labels and timestamp."""
    keys: set = set()
    for i, sl in enumerate(slices):
        for smp in samples[sl]:
            name = smp.name + "_total" if i in renamed else smp.name
            k = (name, tuple(sorted(smp.labels.items())), smp.timestamp)
            if k in keys:
                body = ",".join(f'{n}="{v}"' for n, v in k[1])
                return _duplicate_message(f"{name}{{{body}}}" if body else name)
            keys.add(k)
    return ""


def _duplicate_message(series: str) -> str:
    shown = series if len(series) <= 120 else series[:119] + "…"
    return (f"series {shown} appears twice in one page: rejected, as Prometheus does "
            "(summing the two would fake the values)")


def _bulk_samples(names, labels, values: list[float]) -> list[PromSample]:
    n = len(values)
    objs = list(map(_new, repeat(PromSample, n)))
    _consume(map(_set_name, objs, names))
    _consume(map(_set_labels, objs, labels))
    _consume(map(_set_value, objs, values))
    _consume(map(_set_timestamp, objs, repeat(None, n)))
    return objs


def _resolve_heads(heads: tuple[str, ...], series: list) -> None:
    """Fill the unknown entries of ``series``: validate each new key once and cache it.

    An entry is (name, labels), or False when the line must take the slow path (a comment,
    a blank, escapes, a timestamp...); False is cached too.
    """
    if len(_SERIES) + len(heads) > _CACHE_MAX:
        _SERIES.clear()
        _ALIAS.clear()
    match, findall = _HEAD_RE.fullmatch, _PAIR_RE.findall
    for i in list(compress(range(len(series)), map(is_, series, repeat(None)))):
        head = heads[i]
        entry: tuple[str, FrozenLabels] | bool = False
        m = match(head)
        if m is not None:
            name, body = m.groups()
            if body:
                pairs = findall(body)
                if not body.isprintable():  # hostile values: once per new series (cached)
                    pairs = [(k, clean(v)) for k, v in pairs]
                labels = FrozenLabels(pairs)
                if len(labels) == len(pairs):  # duplicate label name: the slow path says so
                    entry = (name, labels)
            else:
                entry = (name, _NO_LABELS)
        if isinstance(entry, tuple):
            labels = entry[1]
            canon = name + ("{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
                            + "}" if labels else "")
            if canon != head:
                _ALIAS[head] = canon
        series[i] = _SERIES[head] = entry


# --- grouping samples into families --------------------------------------------------------

def _make_plan(rest: list[str], mask: list[bool], names: list[str]) -> tuple:
    """How the page's samples group into families, as prometheus_client groups them.

    ``rest`` are the non-sample lines (all known comments or blanks by now), ``mask`` marks
    them among all lines, ``names`` are the sample names in order.  Every family's samples
    are a contiguous run of the page's samples, so the plan is, per family: name, type,
    help and a slice of the samples; plus which families are counters needing "_total".
    Raises ParseError for an invalid family (bad type, empty name).
    """
    nlines = len(mask)
    mask = mask + [True]  # sentinel: flushes the last run
    idx = list(compress(range(nlines + 1), mask))
    gaps = list(map(sub, idx, chain((-1,), idx)))
    events: list[Any] = list(map(_COMMENTS.get, rest))   # tuples once None is resolved
    if None in events:  # only if the comment cache was cleared since _learn filled it
        events = [ev or _line_event(line) for ev, line in zip(events, rest)]
    events.append(_SKIP_EVENT)

    specs: list[tuple] = []  # (name, type, help, first sample, end, line number)
    emit = specs.append
    name, doc, typ, allowed, start, first = "", "", "untyped", _EMPTY, 0, 0
    k = 0  # samples before the current line
    for gap, ev, i in zip(gaps, events, idx):
        if gap > 1:
            end = k + gap - 1
            if not allowed.issuperset(names[k:end]):
                for j in range(k, end):
                    if names[j] in allowed:
                        continue
                    # not this family's sample: prometheus_client makes it its own family
                    if name:
                        emit((name, typ, doc, first, j, start))
                    name, doc, typ, allowed = "", "", "untyped", _EMPTY
                    emit((names[j], "untyped", "", j, j + 1, i))
                    first = j + 1
            k = end
        kind = ev[0]
        if kind is _HELP:
            cname = ev[1]
            if cname != name:
                if name:
                    emit((name, typ, doc, first, k, start))
                name, typ, allowed, start, first = cname, "untyped", ev[3], i + 1, k
            doc = ev[2]
        elif kind is _TYPE:
            cname = ev[1]
            if cname != name:
                if name:
                    emit((name, typ, doc, first, k, start))
                name, doc, start, first = cname, "", i + 1, k
            typ = ev[2]
            allowed = ev[3]
        elif kind is _SAMPLE:  # cannot happen: every sample line is in the line cache
            raise AssertionError("sample line outside the sample runs")
    if name:
        emit((name, typ, doc, first, k, start))

    out_names, out_types, docs, slices, renamed = [], [], [], [], []
    for n, (fname, ftyp, fdoc, a, b, lineno) in enumerate(specs):
        fname, ftyp, rename = _family_head(fname, ftyp, lineno)
        out_names.append(fname)
        out_types.append(ftyp)
        docs.append(fdoc)
        slices.append(slice(a, b))
        if rename and b > a:
            renamed.append(n)
    return (tuple(out_names), tuple(out_types), tuple(docs), tuple(slices), tuple(renamed))


def _family_head(name: str, typ: str, lineno: int) -> tuple[str, str, bool]:
    """Family name and type munged like prometheus_client's build_metric, and whether the
    samples need "_total" appended."""
    if typ in _PLAIN_TYPES:
        return name, typ, False
    rename = False
    if typ == "counter":
        if name.endswith("_total"):
            name = name[:-6]
        else:  # TGI and friends: counter samples without _total get it appended
            rename = True
    elif typ == "untyped":
        typ = "unknown"
    if typ not in _TYPES:
        raise ParseError(f"line {lineno}: invalid metric type {typ!r} for {name!r}")
    if not name:
        raise ParseError(f"line {lineno}: empty metric family name")
    return name, typ, rename


def _plain_float(v: str) -> bool:
    if "_" in v:
        return False
    try:
        float(v)
    except ValueError:
        return False
    return True


# --- the slow path: one line at a time, following prometheus_client's parser ---------------

def _line_event(line: str) -> tuple:
    """The event for one line the fast path skipped: a sample line gives (_SAMPLE, sample),
    a comment or blank line its event, which is cached.  Raises ValueError on garbage."""
    s = line.strip()
    if not s:
        ev = _SKIP_EVENT
    elif s[0] == "#":
        ev = _comment_event(s)
    else:
        return (_SAMPLE, _parse_sample(s))
    if len(_COMMENTS) >= _CACHE_MAX:
        _COMMENTS.clear()
        _COMMENTS[""] = _SKIP_EVENT
    _COMMENTS[line] = ev
    return ev


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
        doc = clean(doc)  # cached per line: a comment line is parsed once
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
        return PromSample(name, _NO_LABELS, value, ts)
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
    return PromSample(name, FrozenLabels(labels), value, ts)


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
        label = clean(label)  # a quoted UTF-8 name may hold anything
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
        value = clean(value)
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
