"""Hostile text never reaches a terminal raw: label values, HELP text, HTTP error bodies,
process names and notifications.  A real loopback server serves the hostile pages."""

from __future__ import annotations

import json

import pytest

from helpers.hostile_server import (
    EVIL,
    Route,
    evil_vllm_page,
    has_raw_control,
    hostile_server,
)
from helpers.snapkit import must
from infertop.cli.main import main
from infertop.pipeline import Pipeline
from infertop.promtext import clear_caches, parse
from infertop.report import render_report
from infertop.textclean import clean, clean_deep, is_clean


def strings_in(obj):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from strings_in(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from strings_in(v)


# ---- the cleaner -------------------------------------------------------------------------
def test_clean_makes_escapes_visible_and_keeps_ordinary_unicode():
    out = clean(EVIL)
    assert has_raw_control(out) == []
    assert out.startswith("␛[2J␛]0;PWNED␇\\x9b31m\\u202eevil")
    assert clean("héllo wörld ✓ 日本 🙂") == "héllo wörld ✓ 日本 🙂"
    plain = "vllm:num_requests_running"
    assert clean(plain) is plain                      # the common case allocates nothing
    assert clean("a\nb\tc") == "a␊b␉c"
    assert clean("a\nb\tc", multiline=True) == "a\nb\tc"
    assert clean("\x7f\x00\u2028\ud800") == "␡␀\\u2028\\ud800"
    assert is_clean(clean(EVIL)) and not is_clean(EVIL)
    assert clean_deep({"k\x1b": ["\x9b", ("\u202e",)]}) == {"k␛": ["\\x9b", ("\\u202e",)]}


def test_parser_cleans_label_values_help_and_quoted_names_once_per_series():
    clear_caches()
    text = (f'# HELP g {EVIL}\n# TYPE g gauge\ng{{a="{EVIL}"}} 1\n'
            f'g{{a="x\\n{EVIL}",b="ok"}} 2\n{{"q{EVIL}",c="d"}} 3\n')
    for _ in range(2):  # cold, then from the page template
        fams = parse(text)
        for f in fams:
            assert has_raw_control(f.help) == []
            for s in f.samples:
                assert has_raw_control(s.name) == []
                for k, v in s.labels.items():
                    assert has_raw_control(k) == [] and has_raw_control(v) == [], (k, v)
                    assert "\n" not in v
    assert fams[0].samples[0].labels["a"] == clean(EVIL)


# ---- end to end against a hostile server ------------------------------------------------
@pytest.fixture
def evil_url():
    with hostile_server({"/metrics": Route(evil_vllm_page)}) as url:
        yield url


def test_snapshot_json_holds_no_raw_control_characters(evil_url, capsys):
    rc = main(["snapshot", "--json", "--url", evil_url, "--no-gpu", "--window", "0.2",
               "--interval", "0.1"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    doc = json.loads(out)
    texts = list(strings_in(doc))
    assert any("PWNED" in t for t in texts)           # the value is there, made visible
    bad = [t for t in texts if has_raw_control(t)]
    assert bad == []
    assert has_raw_control(out + err) == []


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_doctor_report_holds_no_raw_control_characters(evil_url, capsys, fmt):
    main(["doctor", "--format", fmt, "--url", evil_url, "--no-gpu", "--duration", "0.2",
          "--interval", "0.1"])
    out, err = capsys.readouterr()
    assert "PWNED" in out                             # the model name is shown...
    assert has_raw_control(out) == [] and has_raw_control(err) == []   # ...made visible


def test_report_renderer_cleans_what_a_recording_may_still_hold():
    from infertop.model import Kind, Reading
    r = Reading("server.info", 1.0, "", (("instance", "h:1"), ("model", EVIL)),
                kind=Kind.INFO, text=f"vllm {EVIL}")
    for fmt in ("text", "markdown"):
        out = render_report([], {"decoding": [r]}, fmt, {"source": EVIL})
        assert "PWNED" in out and has_raw_control(out) == []


def test_http_error_body_escapes_do_not_reach_stderr(capsys):
    body = f"<h1>{EVIL}</h1>".encode()
    with hostile_server({"/metrics": Route(body, status=500)}) as url:
        rc = main(["snapshot", "--json", "--url", url, "--no-gpu", "--window", "0.2",
                   "--interval", "0.1"])
    out, err = capsys.readouterr()
    assert "HTTP 500" in err and "PWNED" in err
    assert has_raw_control(err) == [] and has_raw_control(out) == []
    assert rc in (0, 3)   # the process probe may still read this host


async def test_tui_panes_and_header_draw_no_raw_control_characters(evil_url):
    from infertop.probes.server.metrics import ServerMetricsProbe
    from infertop.probes.sources.hub import Hub
    from infertop.tui.app import InfertopApp
    hub = Hub([ServerMetricsProbe(evil_url)], deadline=2.0, label=evil_url)
    app = InfertopApp(hub, pipeline=Pipeline(), interval=0.1)
    async with app.run_test(size=(200, 60)) as pilot:
        for _ in range(1500):   # up to 30 s on a busy box; usually well under 1 s
            if app.ticks >= 3:
                break
            await pilot.pause(0.02)
        assert app.ticks >= 3
        svg = app.export_screenshot()
        await pilot.press("6")   # the decoding pane, zoomed: the model's name is there
        await pilot.pause(0.1)
        svg += app.export_screenshot()
    assert "PWNED" in svg
    assert has_raw_control(svg) == []


async def test_notification_with_markup_in_a_path_does_not_crash(tmp_path):
    from helpers.synthetic_source import SyntheticSource
    from infertop.tui.app import InfertopApp
    from infertop.tui.options import AppOptions
    d = tmp_path / "["
    d.mkdir()
    path = d / "x][b]rec.jsonl"           # the path reads "[/x][b]rec": bad markup
    assert "[/x]" in str(path)
    app = InfertopApp(SyntheticSource(), pipeline=Pipeline(), interval=0.05,
                      options=AppOptions(record_path=str(path)))
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(200):
            if app.ticks >= 1:
                break
            await pilot.pause(0.02)
        await pilot.press("R")
        await pilot.pause(0.1)
        assert app.recorder is not None, [n.message for n in app._notifications]
        app.notify(f"server says {EVIL} [/bogus]")
        await pilot.press("R")
        await pilot.pause(0.1)
        msgs = [n.message for n in app._notifications]
    assert any("[/x][b]rec.jsonl" in m for m in msgs)
    assert all(has_raw_control(m) == [] for m in msgs)
    assert path.exists()


async def test_a_hostile_recording_replays_with_its_text_made_visible(tmp_path):
    from infertop.probes.sources.replay import ReplaySource
    header = {"format": "infertop-recording", "schema": 1, "host": EVIL, "source": {}}
    reading = {"key": "server.info", "labels": {"instance": "h:1", "model": EVIL},
               "value": 1, "unit": "", "status": "ok", "kind": "info", "text": EVIL}
    snap = {"time": 1.0, "tick": 1, "capabilities": {},
            "samples": {"server:h:1": {"source": "server:h:1", "time": 1.0, "status": "error",
                                       "reason": EVIL, "readings": [reading],
                                       "meta": {"model": EVIL}}}}
    path = tmp_path / "evil.jsonl"
    # raw UTF-8 (ensure_ascii=False) and \u-escaped lines: both must come out clean
    path.write_text(json.dumps(header, ensure_ascii=False) + "\n"
                    + json.dumps(snap, ensure_ascii=False) + "\n"
                    + json.dumps({**snap, "time": 2.0}) + "\n", encoding="utf-8")
    src = ReplaySource(path)
    assert has_raw_control(json.dumps(src.describe(), ensure_ascii=False)) == []
    await src.start()
    for _ in range(2):
        s = must(await src.next(), "a replayed snapshot")
        text = json.dumps(s.to_dict(), ensure_ascii=False)
        assert "PWNED" in text and has_raw_control(text) == []
