"""infertop.promtext against prometheus_client's text parser (the oracle).

Every fixture, every edge case, a few hundred random line mixes and scrape after scrape of
pages whose values churn (the parser diffs each scrape against the last page of its shape)
must give the same families (name, type, help) and samples (name, labels, value incl. NaN,
timestamp) as ``prometheus_client.parser.text_string_to_metric_families``, or both must
reject the text.
"""

from __future__ import annotations

import copy
import math
import pickle
import random
import re
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from infertop import promtext
from infertop.promtext import (
    Family,
    FrozenLabels,
    ParseError,
    PromSample,
    clear_caches,
    parse,
)
from infertop.textclean import clean

METRICS = Path(__file__).parent / "fixtures" / "metrics"
FIXTURES = sorted(METRICS.glob("*.prom"))


def oracle(text: str) -> list[tuple]:
    """prometheus_client's result, with the one deliberate difference applied: label
    values, names and HELP text are made terminal-safe (control characters visible)."""
    return [(m.name, m.type, clean(m.documentation),
             [(s.name, {clean(k): clean(v) for k, v in s.labels.items()}, float(s.value),
               None if s.timestamp is None else float(s.timestamp)) for s in m.samples])
            for m in text_string_to_metric_families(text)]


def ours(text: str) -> list[tuple]:
    fams = parse(text)
    assert all(isinstance(f, Family) for f in fams)
    assert all(isinstance(s, PromSample) for f in fams for s in f.samples)
    return [(f.name, f.type, f.help,
             [(s.name, s.labels, s.value, s.timestamp) for s in f.samples]) for f in fams]


def _same_value(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def oracle_duplicate(want: list[tuple]) -> bool:
    """The page writes a series twice (same name, labels, timestamp): prometheus_client
    returns both; Prometheus, and infertop, reject the page."""
    keys = [(s[0], tuple(sorted(s[1].items())), s[3]) for f in want for s in f[3]]
    return len(set(keys)) < len(keys)


def assert_same(text: str) -> None:
    want = oracle(text)
    if oracle_duplicate(want):
        with pytest.raises(ParseError, match="appears twice"):
            parse(text)
        return
    got = ours(text)
    assert [f[:3] for f in got] == [f[:3] for f in want]
    for (name, _, _, ws), (_, _, _, gs) in zip(want, got):
        assert len(gs) == len(ws), name
        for w, g in zip(ws, gs):
            assert (g[0], g[1], g[3]) == (w[0], w[1], w[3]), name
            assert _same_value(g[2], w[2]), (name, g, w)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixtures_match_oracle_cold_and_warm(path: Path):
    text = path.read_text()
    clear_caches()
    assert_same(text)  # cold: every series key seen for the first time
    assert_same(text)  # warm: keys from the cache


def test_fixture_shape_is_what_the_dialects_rely_on():
    fams = {f.name: f for f in parse((METRICS / "vllm-0.32-busy.prom").read_text())}
    assert fams["vllm:prompt_tokens"].type == "counter"
    assert fams["vllm:prompt_tokens"].samples[0].name == "vllm:prompt_tokens_total"
    assert fams["vllm:prompt_tokens_created"].type == "gauge"  # its own family
    ttft = fams["vllm:time_to_first_token_seconds"]
    assert ttft.type == "histogram"
    assert {s.name.rsplit("_", 1)[-1] for s in ttft.samples} == {"bucket", "sum", "count"}
    assert ttft.samples[-3].labels["le"] == "+Inf"


EDGE_CASES = {
    "help_escapes": '# HELP foo a\\nb \\\\ c \\t d\n# TYPE foo gauge\nfoo 1\n',
    "colons": "# TYPE vllm:x:y gauge\nvllm:x:y 2\n",
    "escaped_label_values": '# TYPE foo gauge\nfoo{a="x\\"q\\\\b\\nc",b="ok"} 1\n',
    "comma_brace_in_values": '# TYPE foo gauge\nfoo{a="x,}y",b="{=#}"} 1\nfoo{a="} 2"} 2\n',
    "histogram_and_created": (
        "# HELP h_seconds lat\n# TYPE h_seconds histogram\n"
        'h_seconds_bucket{le="0.1"} 1.0\nh_seconds_bucket{le="+Inf"} 3.0\n'
        "h_seconds_count 3.0\nh_seconds_sum 0.7\n"
        "# HELP h_seconds_created lat\n# TYPE h_seconds_created gauge\n"
        "h_seconds_created 1.7e9\n"),
    "summary": ('# TYPE s summary\ns{quantile="0.5"} 1\ns{quantile="0.99"} NaN\n'
                "s_sum 4\ns_count 2\n"),
    "special_values": ("# TYPE g gauge\ng{k=\"a\"} NaN\ng{k=\"b\"} +Inf\ng{k=\"c\"} -Inf\n"
                       'g{k="d"} 1e3\ng{k="e"} -2.5E-3\ng{k="f"} +5\ng{k="g"} -0\n'
                       'g{k="h"} .5\ng{k="i"} 5.\ng{k="j"} 123456789012345678901234\n'
                       'g{k="k"} nan\ng{k="l"} Inf\n'),
    "timestamps": ("# TYPE t gauge\nt 1 1700000000123\nt{a=\"b\"} 2 -5\n"
                   "t{a=\"c\"}\t3\t1700000000000\nt 4 1.5\n"),
    "openmetrics_eof": "# TYPE c counter\nc_total 1\n# EOF\n",
    "untyped_without_type": "a 1\na 2\nb{x=\"y\"} 3\n",
    "crlf": "# HELP c_total n\r\n# TYPE c_total counter\r\nc_total{a=\"b\"} 1\r\n\r\n",
    "blank_and_space_lines": "\n\n# TYPE g gauge\n\n   \ng 1\n\t\n  g 2  \n",
    "tgi_counter_without_total": ("# TYPE tgi_request_count counter\ntgi_request_count 7\n"
                                  "# TYPE tgi_queue_size gauge\ntgi_queue_size 0\n"),
    "help_only": "# HELP lonely doc here\nlonely 1\n",
    "type_untyped": "# TYPE u untyped\nu 1\n",
    "type_then_help": "# TYPE g gauge\n# HELP g the doc\ng 1\n",
    "stray_sample_in_histogram": ("# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh 5\n"
                                  "h_count 1\nh_sum 2\n"),
    "created_inside_histogram": ("# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n"
                                 "h_created 3\nh_sum 2\n"),
    "quoted_utf8_names": ('# HELP "my.metric" utf8 name\n# TYPE "my.metric" gauge\n'
                          '{"my.metric",a="b"} 1\n'),
    "empty_braces": "# TYPE g gauge\ng{} 1\n",
    "trailing_comma": '# TYPE g gauge\ng{a="b",} 1\n',
    "spaces_in_labels": '# TYPE g gauge\ng{ a = "b" , c="d" } 1\n',
    "space_before_brace": '# TYPE g gauge\ng {a="b"} 1\n',
    "no_space_after_brace": '# TYPE g gauge\ng{a="b"}1\n',
    "colon_label_name": '# TYPE g gauge\ng{a:b="c"} 1\n',
    "no_trailing_newline": "# TYPE g gauge\ng 1",
    "family_repeated": "# TYPE g gauge\ng 1\n# TYPE h gauge\nh 1\n# TYPE g gauge\ng 2\n",
    "other_types": "# TYPE i info\ni_info 1\n# TYPE gh gaugehistogram\ngh 1\n",
    "comments_between": "# TYPE g gauge\n# just a comment\ng 1\n#HELP g x\n# UNIT g s\ng 2\n",
    "hash_forms": "#x HELP g odd help\n# TYPE g gauge\ng 1\n# HELP\n g 2\n",
    "unicode": '# HELP g héllo wörld ✓\n# TYPE g gauge\ng{a="ünï ✓"} 1\n',
    "multiple_spaces_help": "# HELP g    lots   of  space  \n# TYPE g  gauge\ng 1\n",
    "multiple_spaces_sample": "# TYPE g gauge\ng    1\ng{a=\"b\"}   2    3\n",
    "tab_separated": "# TYPE g gauge\ng\t1\n",
    "help_with_quotes": '# HELP g say "hi there" now\n# TYPE g gauge\ng 1\n',
    "counter_help_type_mismatch": "# HELP a_total x\n# TYPE a counter\na 1\n",
    "empty_text": "",
    "only_comments": "# HELP a x\n# TYPE a gauge\n",
    "long_label_set": ("# TYPE g gauge\n" + "g{" + ",".join(f'l{i}="v{i}"' for i in range(30))
                       + "} 1\n"),
    # an escaped quote right before a "}" or "," must not end the value there
    "escaped_quote_before_brace": '# TYPE m gauge\nm{a="x\\"}y",b="2"} 1\n',
    "escaped_quote_before_comma": '# TYPE m gauge\nm{a="x\\",y",b="2"} 1\n',
    "escaped_backslash_then_quote": '# TYPE m gauge\nm{a="x\\\\",b="2"} 1\n',
    "bare_help": "# HELP\nm 1\n",
    "empty_value_on_the_slow_path": 'm{a="",b="x\\\\"} 1\n',
}


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_edge_cases_match_oracle(name: str):
    clear_caches()
    assert_same(EDGE_CASES[name])
    assert_same(EDGE_CASES[name])


ERRORS = {
    "html": "<!DOCTYPE html>\n<html><body>Not Found</body></html>\n",
    "json": '{"error": "not found", "code": 404}\n',
    "json_empty_object": "{}\n",
    "no_value": "# TYPE g gauge\ng\n",
    "word_value": "g hello\n",
    "underscore_value": "g 1_000\n",
    "unquoted_label_value": "g{a=b} 1\n",
    "reserved_label": 'g{__x="y"} 1\n',
    "duplicate_label": 'g{a="1",a="2"} 1\n',
    "type_without_type": "# TYPE g\ng 1\n",
    "bad_help_name": "# HELP 1g doc\n",
    "unclosed_labels": 'g{a="b" 1\n',
    "unknown_type": "# TYPE g bogus\ng 1\n",
    "bad_name": "1abc 2\n",
    "invalid_label_name": 'm{a-b="x"} 1\n',
    "label_name_with_digit_first": 'm{1a="x"} 1\n',
    "bare_type": "# TYPE\nm 1\n",
    "bare_type_after_a_family": "# TYPE g gauge\n# TYPE\ng 1\n",
    "no_metric_name": '{a="b"} 1\n',
    "empty_label_name": 'g{="x"} 1\n',
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_garbage_raises_like_the_oracle(name: str):
    text = ERRORS[name]
    with pytest.raises(Exception):  # noqa: B017 - whatever the oracle raises: it refuses
        list(text_string_to_metric_families(text))
    with pytest.raises(ParseError) as e:
        parse(text)
    assert "line " in str(e.value)


def test_slow_path_errors_say_what_is_wrong():
    with pytest.raises(ParseError, match=r"^line 1: invalid label name 'a-b': 'm\{a-b=\"x\"\} 1'$"):
        parse('m{a-b="x"} 1\n')
    with pytest.raises(ParseError, match=r"^line 2: TYPE line without a type: '# TYPE'$"):
        parse("# TYPE g gauge\n# TYPE\ng 1\n")
    with pytest.raises(ParseError, match=r"^line 1: reserved label name '__x'"):
        parse('g{__x="y"} 1\n')
    with pytest.raises(ParseError, match=r"^line 1: duplicate label 'a'"):
        parse('g{a="1",a="2"} 1\n')
    with pytest.raises(ParseError, match=r"^line 1: label value without quotes"):
        parse("g{a=b} 1\n")
    with pytest.raises(ParseError, match=r"^line 1: unexpected text after a label value"):
        parse('g{a="b"c} 1\n')
    with pytest.raises(ParseError, match=r"^line 1: invalid value '1_000'"):
        parse("g 1_000\n")
    with pytest.raises(ParseError, match=r"^line 1: missing value"):
        parse("g{a=\"b\"}\n")
    with pytest.raises(ParseError, match=r"^line 1: invalid label name ''"):
        parse('g{="x"} 1\n')
    with pytest.raises(ParseError, match=r"^line 2: sample without a metric name"):
        parse('g 1\n{a="b"} 1\n')


def test_a_series_written_once_plainly_and_once_oddly_is_a_duplicate():
    """One copy on the fast path, the other on the slow path (odd spacing): still the
    same series twice in one page."""
    for text in ('g{a="b"} 1\ng {a="b"} 2\n', "# TYPE g gauge\ng 1\ng  2\n",
                 'g {a="b"} 1\ng{a="b"} 2\n'):
        clear_caches()
        with pytest.raises(ParseError, match=r"^series g(\{a=\"b\"\})? appears twice"):
            parse(text)


def test_escaped_quotes_in_label_values_are_read_to_the_real_closing_quote():
    for text, want in (('m{a="x\\"}y",b="2"} 1\n', 'x"}y'),
                       ('m{a="x\\",y",b="2"} 1\n', 'x",y'),
                       ('m{a="x\\\\",b="2"} 1\n', "x\\")):
        clear_caches()
        (fam,) = parse(text)
        (smp,) = fam.samples
        assert dict(smp.labels) == {"a": want, "b": "2"} and smp.value == 1.0


def test_a_long_duplicated_series_is_named_shortened():
    name = "m" * 150
    for text in (f"{name} 1\n{name} 2\n",                        # the fast path
                 f'{name}{{a="x\\n"}} 1\n{name}{{a="x\\n"}} 2\n'):  # the slow path
        clear_caches()
        with pytest.raises(ParseError) as e:
            parse(text)
        msg = str(e.value)
        assert msg.startswith(f"series {name[:119]}… appears twice in one page")
        assert name not in msg
    clear_caches()
    short = "m" * 120
    with pytest.raises(ParseError, match=f"^series {short} appears twice"):
        parse(f"{short} 1\n{short} 2\n")


def test_error_names_the_offending_line():
    text = "# TYPE g gauge\ng 1\ng 2\ng oops\ng 4\n"
    with pytest.raises(ParseError, match=r"^line 4: .*'g oops'"):
        parse(text)


def test_html_and_json_say_what_they_look_like():
    with pytest.raises(ParseError, match="line 1: .*looks like HTML"):
        parse(ERRORS["html"])
    with pytest.raises(ParseError, match="line 1: .*looks like JSON"):
        parse(ERRORS["json"])
    assert issubclass(ParseError, ValueError)


def test_exemplar_is_ignored_not_read_as_timestamp():
    # Deliberate difference: prometheus_client reads the exemplar value as the timestamp.
    fams = parse('# TYPE c_total counter\nc_total 5 # {trace_id="abc"} 1.0\n')
    assert [(s.name, s.value, s.timestamp) for s in fams[0].samples] == [("c_total", 5.0, None)]


def test_more_than_value_and_timestamp_is_an_error():
    with pytest.raises(ParseError, match="line 1"):
        parse("g 1 2 3\n")


def test_labels_are_read_only_and_shared_between_parses():
    text = '# TYPE g gauge\ng{a="b"} 1\ng{a="c"} 2\n'
    first = parse(text)[0].samples
    labels = first[0].labels
    assert isinstance(labels, FrozenLabels) and labels == {"a": "b"}
    mutators = [lambda d: d.__setitem__("a", "x"), lambda d: d.__delitem__("a"),
                lambda d: d.pop("a"), lambda d: d.popitem(), lambda d: d.clear(),
                lambda d: d.update(a="x"), lambda d: d.setdefault("z", "x"),
                lambda d: d.__ior__({"a": "x"})]
    for mutate in mutators:
        with pytest.raises(TypeError, match="read-only"):
            mutate(labels)
    with pytest.raises(TypeError):
        labels["a"] = "x"
    assert labels == {"a": "b"} and parse("g 1\n")[0].samples[0].labels == {}
    with pytest.raises(TypeError):
        parse("g 1\n")[0].samples[0].labels["x"] = "y"  # the shared empty labels too
    # copies are plain, editable dicts; copy/deepcopy/pickle keep it read-only and equal
    for editable in (dict(labels), labels.copy(), labels | {"c": "d"}):
        assert type(editable) is dict
        editable["a"] = "changed"
    for clone in (copy.copy(labels), copy.deepcopy(labels), pickle.loads(pickle.dumps(labels))):
        assert isinstance(clone, FrozenLabels) and clone == {"a": "b"}
    second = parse(text)[0].samples
    assert second[0] is first[0]  # unchanged line: the very same (frozen) sample object
    assert second[0].labels == {"a": "b"}


def test_earlier_results_survive_later_scrapes():
    busy = (METRICS / "vllm-0.32-busy.prom").read_text()
    idle = (METRICS / "vllm-0.32-idle.prom").read_text()
    clear_caches()
    first = ours(busy)
    fams = parse(idle)  # same shape, other values: the template is updated in place
    fams[0].samples.clear()  # a caller editing its lists does not reach the cache either
    assert first == ours(busy)
    assert ours(idle) != first


def test_samples_are_frozen_with_values_as_floats():
    s = parse("g 3\n")[0].samples[0]
    assert s == PromSample("g", {}, 3.0, None)
    assert isinstance(s.value, float)
    with pytest.raises(AttributeError):   # frozen
        s.value = 4.0  # type: ignore[misc]


def test_caches_stay_bounded(monkeypatch):
    monkeypatch.setattr(promtext, "_CACHE_MAX", 50)
    clear_caches()
    for i in range(20):
        text = "".join(f'g{{id="{i}-{j}"}} {j}\n' for j in range(10))
        assert [s.value for s in parse(text)[0].samples] == [0.0]  # untyped: one per family
        assert len(promtext._SERIES) <= 50
        assert len(promtext._COMMENTS) <= 50
        assert len(promtext._TEMPLATES) <= promtext._TEMPLATES_MAX
    clear_caches()


def test_a_churning_page_keeps_memory_bounded():
    # Every scrape brings new values and, every 3rd, a new label value (a new page shape):
    # templates stay at their maximum and each still holds one page, not a history.
    clear_caches()
    for i in range(3 * promtext._TEMPLATES_MAX + 5):
        text = (f'# TYPE g gauge\ng{{id="{i // 3}"}} {i}\n'
                + "".join(f'g{{k="{j}"}} {i + j}\n' for j in range(20)))
        samples = parse(text)[0].samples
        assert [s.value for s in samples] == [float(i)] + [float(i + j) for j in range(20)]
        assert len(promtext._TEMPLATES) <= promtext._TEMPLATES_MAX
        assert all(len(t.samples) == 21 for t in promtext._TEMPLATES)
    clear_caches()


# --- value churn: diffing a scrape against the last page of its shape -----------------------

def _sample_line(line: str) -> bool:
    return bool(line) and not line.startswith("#")


def _with_values(text: str, value_of) -> str:
    out = []
    for n, line in enumerate(text.split("\n")):
        if _sample_line(line):
            head, _, old = line.rpartition(" ")
            new = value_of(n, head, old)
            if new is not None:
                line = f"{head} {new}"
        out.append(line)
    return "\n".join(out)


def test_every_value_changed_matches_oracle():
    busy = (METRICS / "vllm-0.32-busy.prom").read_text()
    clear_caches()
    assert_same(busy)
    for k in range(1, 4):  # every sample line differs from the scrape before
        assert_same(_with_values(busy, lambda n, h, v: repr(float(v) + k)))  # noqa: B023


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_random_value_churn_matches_oracle(path: Path):
    # Scrape after scrape of one page where random lines change: new numbers, special
    # values, a timestamp, a changed series, or garbage (then both must reject).
    rng = random.Random(path.name)
    base = path.read_text()
    odd = ["NaN", "+Inf", "-Inf", "1e-3", "-0", "1_0", "x", "", "5 1700000000000",
           '7 # {a="b"} 1']
    odd_rate = 0.0

    def churn(n: int, head: str, old: str) -> str | None:
        r = rng.random()
        if r < odd_rate:
            return rng.choice(odd)
        return None if r < 0.6 else repr(rng.uniform(0, 1e6))

    clear_caches()
    for _ in range(30):
        odd_rate = 0.0 if rng.random() < 0.7 else 0.01  # most scrapes: only numbers move
        text = _with_values(base, churn)
        if rng.random() < 0.1:  # a series changes (same line count): a new page shape
            text = text.replace('le="+Inf"', 'le="+Inf",x="y"', 1)
        try:
            want = oracle(text)
        except Exception:
            with pytest.raises(ParseError):
                parse(text)
            continue
        if "# {" in text:  # the deliberate exemplar difference: compare only other pages
            parse(text)
            continue
        got = ours(text)
        assert [f[:3] for f in got] == [f[:3] for f in want]
        for (name, _, _, ws), (_, _, _, gs) in zip(want, got):
            assert [(g[0], g[1], g[3]) for g in gs] == [(w[0], w[1], w[3]) for w in ws], name
            assert all(_same_value(g[2], w[2]) for g, w in zip(gs, ws)), name


def test_changed_line_with_garbage_is_named_and_the_template_survives():
    text = "# TYPE g gauge\ng{a=\"1\"} 1\ng{a=\"2\"} 2\n"
    clear_caches()
    assert ours(text)[0][3][1][2] == 2.0
    for bad in ("oops", "1_0"):  # float() would take "1_0"; the exposition does not
        with pytest.raises(ParseError, match=re.escape(f"line 3: invalid value '{bad}'")):
            parse(text.replace("} 2", "} " + bad))
    # a whole line replaced by a bare number: no series at all, not a new value for one
    with pytest.raises(Exception):  # noqa: B017 - whatever the oracle raises: it refuses
        oracle(text.replace('g{a="2"} 2', "2"))
    with pytest.raises(ParseError, match="line 3"):
        parse(text.replace('g{a="2"} 2', "2"))
    assert_same(text.replace('g{a="2"} 2', "NaN"))  # both read it as series "Na", value "N"
    assert ours(text.replace("} 2", "} 3"))[0][3][1][2] == 3.0
    assert ours(text)[0][3][1][2] == 2.0


def test_two_servers_with_the_same_shape_alternate():
    page = "# TYPE m gauge\nm{model=\"%s\"} %d\n"
    clear_caches()
    for i in range(6):
        for model in ("llama", "qwen"):
            assert ours(page % (model, i)) == [("m", "gauge", "", [("m", {"model": model},
                                                                      float(i), None)])]
    assert len(promtext._TEMPLATES) == 2


# --- random mixes of lines: same result or both reject ---------------------------------------

LINE_POOL = [
    "# HELP g a doc", "# TYPE g gauge", "# TYPE g counter", "# TYPE g histogram",
    "# TYPE g summary", "# TYPE g untyped", "# HELP g_total doc", "# TYPE g_total counter",
    "g 1", "g 2.5", "g NaN", "g_total 3", "g_bucket{le=\"1\"} 1", "g_bucket{le=\"+Inf\"} 2",
    "g_sum 3", "g_count 2", "g_created 1.7e9", 'g{quantile="0.5"} 1', 'g{a="b"} 4',
    'g{a="x,}y"} 5', 'g{a="q\\"uote"} 6', "g 7 1700000000000", "h 8", "", "  ", "# EOF",
    "# comment words", '{"g",a="b"} 9', 'g {a="b"} 10', 'g{a="b",} 11', "g\t12",
    "g{} 13", "g 1_0", "g x", "<html>", 'g{a="1",a="2"} 1', "# TYPE g", "g",
    '# HELP "g" quoted', "g 5\r", "# TYPE g bogus",
]


def test_random_line_mixes_agree_with_oracle():
    rng = random.Random(20261129)
    for _ in range(400):
        text = "\n".join(rng.choice(LINE_POOL) for _ in range(rng.randint(1, 8)))
        if rng.random() < 0.5:
            text += "\n"
        if rng.random() < 0.3:
            clear_caches()
        try:
            want = oracle(text)
        except Exception:
            with pytest.raises(ParseError):
                parse(text)
            continue
        if oracle_duplicate(want):
            with pytest.raises(ParseError, match="appears twice"):
                parse(text)
            continue
        got = ours(text)
        assert [f[:3] for f in got] == [f[:3] for f in want], text
        assert len(got) == len(want)
        for (_, _, _, ws), (_, _, _, gs) in zip(want, got):
            assert [(g[0], g[1], g[3]) for g in gs] == [(w[0], w[1], w[3]) for w in ws], text
            assert all(_same_value(g[2], w[2]) for g, w in zip(gs, ws)), text


def test_a_new_page_shape_reuses_what_earlier_pages_taught(monkeypatch):
    """The speed of a first scrape of a new shape comes from the caches: comment lines and
    series keys seen on any earlier page are not parsed again, and plain HELP/TYPE lines
    skip the quote-aware scanner."""
    clear_caches()
    calls = {"line": 0, "head": 0, "split": 0}
    real_line, real_head, real_split = (promtext._line_event, promtext._HEAD_RE,
                                        promtext._split_quoted)

    def line_event(line):
        calls["line"] += 1
        return real_line(line)

    def split_quoted(*args):
        calls["split"] += 1
        return real_split(*args)

    class Head:
        def fullmatch(self, text):
            calls["head"] += 1
            return real_head.fullmatch(text)

    monkeypatch.setattr(promtext, "_line_event", line_event)
    monkeypatch.setattr(promtext, "_HEAD_RE", Head())
    monkeypatch.setattr(promtext, "_split_quoted", split_quoted)
    page = '# HELP g the doc\n# TYPE g gauge\ng{a="1"} 1\ng{a="2"} 2\n'
    parse(page)
    # each line's head is looked up once (comments are cached as "not a series"); the
    # comment lines go to the line parser (the blank one is known from the start)
    assert calls == {"line": 2, "head": 5, "split": 0}
    parse(page + 'g{a="3"} 3\n')          # a new shape: one new series, the same comments
    assert calls == {"line": 2, "head": 6, "split": 0}
    parse(page + 'g{a="3"} 3\ng{a="4"} 4\n')   # and again: only the newest series is new
    assert calls == {"line": 2, "head": 7, "split": 0}
    assert [s.value for s in parse(page + 'g{a="3"} 5\n')[0].samples] == [1.0, 2.0, 5.0]
