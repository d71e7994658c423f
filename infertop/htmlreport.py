"""``infertop report``: one self-contained file to attach to an incident ticket (pure).

HTML: inline CSS and inline SVG charts, no script, no font, no image, no link that
fetches anything, so it opens offline and in a ticket system's sandbox.  Markdown: the
same facts as tables, for a chat.

Sections: the findings timeline (raise and clear times; a Gantt strip), per-layer charts
of the key readings with the findings of that layer shaded, each finding's evidence and
remedy, the server's settings, what the rules could not check, and optionally a
before/after comparison (infertop.compare).  A recording is hostile input: every string
from it is stripped of control characters and HTML-escaped (Markdown: its markup
characters backslash-escaped) before it is written.
"""

from __future__ import annotations

import html
import math
import re
import time
from collections.abc import Iterable, Sequence

from .compare import Comparison, median, printable
from .findings import Finding, Severity, leads
from .keys import SPECS
from .mdtext import md_text
from .model import LAYERS, Labels
from .report import KEY_READINGS
from .rules.engine import cause_first
from .runsummary import RunSummary, SeriesId, stable_labels
from .units import fmt_value, natural_key

SEVERITY_COLOUR = {"crit": "#c62828", "warn": "#ef6c00", "notice": "#1565c0"}
LINE_COLOURS = ("#1565c0", "#2e7d32", "#6a1b9a", "#ad1457", "#00838f", "#5d4037")
MAX_CHARTS_PER_LAYER = 8
MAX_LINES_PER_CHART = 4
MAX_POINTS_PER_LINE = 600
QUANTILES = ("0.5", "0.99")
W, H, PAD_L, PAD_R, PAD_T, PAD_B = 720, 150, 64, 12, 10, 22

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0 auto;
max-width:980px;padding:16px 24px;color:#222;background:#fff}
h1{font-size:22px;margin:8px 0}h2{font-size:18px;border-bottom:1px solid #ccc;padding-bottom:4px;
margin-top:28px}h3{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;margin:6px 0;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}code{font:12px ui-monospace,Menlo,Consolas,monospace}
.meta td:first-child{color:#555}.sev{font-weight:600}
.crit{color:#c62828}.warn{color:#ef6c00}.notice{color:#1565c0}
figure{margin:10px 0}figcaption{font-size:12px;color:#444}
svg{display:block;max-width:100%;height:auto}.muted{color:#666}
.remedy{background:#f6f8fa;border-left:3px solid #2e7d32;padding:4px 10px}
"""


# ---- escaping ---------------------------------------------------------------------------------
def esc(text: object, limit: int = 300) -> str:
    """Text from a recording, safe inside HTML text and attribute values."""
    return html.escape(printable(str(text), limit), quote=True)


def md(text: object, limit: int = 300) -> str:
    """Text from a recording, inert in Markdown (infertop.mdtext), one line."""
    return md_text(printable(str(text).replace("\n", " "), limit))


# ---- shared facts -------------------------------------------------------------------------------
def utc(t: float | None) -> str:
    if t is None or not math.isfinite(t):
        return "–"
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) + " UTC"
    except (OverflowError, OSError, ValueError):   # 1e308: past any calendar time_t holds
        return "–"


def rel(t: float | None, start: float) -> str:
    if t is None:
        return "–"
    s = t - start
    return f"+{s:.0f} s" if s < 120 else f"+{s / 60:.1f} min"


def labels_text(labels: Labels) -> str:
    return ",".join(f"{k}={v}" for k, v in labels)


def sid_text(sid: SeriesId) -> str:
    key, labels = sid
    return key + ("{" + labels_text(labels) + "}" if labels else "")


def layer_of(code: str) -> str:
    prefix = code.split("-")[0]
    return {"HW": "hardware", "KRN": "kernels", "MEM": "memory", "SCH": "scheduling",
            "PAR": "parallelism", "DEC": "decoding"}.get(prefix, "other")


def _since_raised(r: dict, start: float) -> str:
    """"since 00:00:26, raised 00:00:29 (+29 s)": the onset and the raise, as doctor and
    the findings screen say them."""
    raised = time.strftime("%H:%M:%S", time.gmtime(r["raised"]))
    return f"since {utc(r['since'])}, raised {raised} ({rel(r['raised'], start)})"


# where a raise's summary ("CODE title: first evidence") turns from title to evidence: the
# first ": " followed by a reading key (a title may hold ": caused by ...")
_EVIDENCE_START = re.compile(r": (?=[a-z_]+\.[a-z0-9_]+[{ ])")


def episode_title(code: str, summary: str) -> str:
    """A finding's title as its raise event's summary gives it."""
    text = summary[len(code) + 1:] if summary.startswith(code + " ") else summary
    m = _EVIDENCE_START.search(text)
    return text[:m.start()] if m else text


def timeline(run: RunSummary) -> list[dict]:
    """One row per raise: code, subject, severity, title, raised, cleared, still active."""
    rows = []
    for code, subject, t_raise, t_clear, ev in run.intervals():
        f = run.findings.get((code, subject))
        end = t_clear if t_clear is not None else math.inf
        # one severity in every view: the worst this episode reached (its escalations),
        # as the finding's own evidence says it, not the severity it was raised at
        sev = max([ev.severity] + [e.severity for e in run.events
                                   if e.kind == "escalated" and e.code == code
                                   and stable_labels(e.subject) == subject
                                   and t_raise <= e.time <= end])
        if f is not None and t_clear is None:
            sev = max(sev, f.severity)
        # the still-active episode: the finding's title now; an earlier one: its own (the
        # raise's), not the last episode's ("TTFT p99 980 ms" then "478 ms", not 478 twice)
        title = f.title if f is not None and t_clear is None else \
            episode_title(code, ev.summary)
        rows.append({"code": code, "subject": subject, "severity": sev.value,
                     "title": title, "raised": t_raise,
                     "since": ev.since if ev.since is not None else t_raise,
                     "cleared": t_clear, "layer": layer_of(code)})
    return cause_first(rows, lambda r: (r["code"], r["subject"]),
                       lambda r: (r["since"], r["cleared"] if r["cleared"] is not None
                                  else math.inf))


def chart_groups(run: RunSummary, layer: str, limit: int | None = MAX_CHARTS_PER_LAYER
                 ) -> list[tuple[str, list[SeriesId]]]:
    """(key, series) to chart for a layer: the doctor report's key readings that the
    recording has numbers for, latency quantiles p50 and p99 only; at most ``limit``
    keys (None: all of them, for the tables)."""
    groups: list[tuple[str, list[SeriesId]]] = []
    flags: list[tuple[str, list[SeriesId]]] = []    # not charted: tabled after the others
    for key in KEY_READINGS.get(layer, ()):
        sids = [sid for sid in run.series if sid[0] == key and len(run.series[sid]) >= 2]
        if key.startswith("latency."):
            sids = [s for s in sids if dict(s[1]).get("quantile") in QUANTILES]
        if not sids:
            continue
        sids.sort(key=lambda s: [natural_key(v) for _, v in s[1]])
        if not chartable(run, key, sids):
            flags.append((key, sids[:MAX_LINES_PER_CHART]))
            continue
        groups.append((key, sids[:MAX_LINES_PER_CHART]))
        if limit is not None and len(groups) >= limit:
            break
    return groups if limit is not None else groups + flags


def chartable(run: RunSummary, key: str, sids: Sequence[SeriesId]) -> bool:
    """A line chart says something of a quantity: not of a bitmask (throttle reasons:
    its "0.05" between two codes means nothing) nor of a yes/no reading (0 or 1 only)."""
    if run.units.get(key, "") == "bitmask":
        return False
    return not all(v in (0.0, 1.0) for sid in sids for _, v in run.series[sid])


def _thin(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    if len(points) <= MAX_POINTS_PER_LINE:
        return points
    step = math.ceil(len(points) / MAX_POINTS_PER_LINE)
    return points[::step] + ([points[-1]] if (len(points) - 1) % step else [])


# ---- SVG ----------------------------------------------------------------------------------------
def svg_chart(run: RunSummary, key: str, sids: Sequence[SeriesId],
              shades: Iterable[tuple[float, float, str]]) -> str:
    unit = run.units.get(key, "")
    t0, t1 = run.start, max(run.end, run.start + 1.0)
    lines = [(sid, _thin(run.series[sid])) for sid in sids]
    vals = [v for _, pts in lines for _, v in pts]
    lo, hi = min(vals), max(vals)
    if unit == "ratio":
        lo, hi = 0.0, max(1.0, hi)
    else:
        lo = min(0.0, lo)
        hi = hi * 1.05 if hi > 0 else hi + 1.0
    if hi <= lo:
        hi = lo + 1.0
    if not 0 < hi - lo < math.inf:
        # values near the float limits: the span overflows (1e308 - -1e308) or rounds to
        # nothing (-1e308 + 1): no scale to draw them on, only a clamped line
        lo, hi = 0.0, 1.0
    # the y labels' room: as wide as the longer one ("1.2 ktokens/s" was cut to its end)
    pad_l = max(PAD_L, 8 + math.ceil(6.2 * max(len(fmt_value(v, unit)) for v in (lo, hi))))
    pw, ph = W - pad_l - PAD_R, H - PAD_T - PAD_B

    def x(t: float) -> float:
        return pad_l + (t - t0) / (t1 - t0) * pw

    def y(v: float) -> float:
        f = (v - lo) / (hi - lo)
        return PAD_T + (1 - (min(1.0, max(0.0, f)) if math.isfinite(f) else 0.5)) * ph

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" '
             f'height="{H}" role="img" aria-label="{esc(key)} over the recording">',
             f'<rect x="{pad_l}" y="{PAD_T}" width="{pw}" height="{ph}" fill="#fafafa" '
             'stroke="#ccc"/>']
    for a, b, sev in shades:
        xa, xb = x(max(a, t0)), x(min(b, t1))
        if xb > xa:
            parts.append(f'<rect class="shade" x="{xa:.1f}" y="{PAD_T}" width="{xb - xa:.1f}" '
                         f'height="{ph}" fill="{SEVERITY_COLOUR.get(sev, "#999")}" '
                         'fill-opacity="0.13"/>')
    for i, (sid, pts) in enumerate(lines):
        colour = LINE_COLOURS[i % len(LINE_COLOURS)]
        coords = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in pts)
        parts.append(f'<polyline class="line" fill="none" stroke="{colour}" stroke-width="1.6" '
                     f'points="{coords}"><title>{esc(sid_text(sid))}</title></polyline>')
    for v in (lo, hi):
        parts.append(f'<text x="{pad_l - 4}" y="{y(v) + 4:.1f}" font-size="10" '
                     f'text-anchor="end" fill="#555">{esc(fmt_value(v, unit))}</text>')
    for t, anchor in ((t0, "start"), (t1, "end")):
        parts.append(f'<text x="{x(t):.1f}" y="{H - 6}" font-size="10" text-anchor="{anchor}" '
                     f'fill="#555">{esc(rel(t, t0))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def svg_timeline(rows: list[dict], start: float, end: float) -> str:
    if not rows:
        return ""
    t1 = max(end, start + 1.0)
    row_h, label_w = 20, 230
    height = PAD_T + row_h * len(rows) + PAD_B
    pw = W - label_w - PAD_R

    def x(t: float) -> float:
        return label_w + (t - start) / (t1 - start) * pw

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {height}" width="{W}" '
             f'height="{height}" role="img" aria-label="findings timeline">']
    for i, r in enumerate(rows):
        yy = PAD_T + i * row_h
        end_t = r["cleared"] if r["cleared"] is not None else t1
        colour = SEVERITY_COLOUR.get(r["severity"], "#999")
        subj = labels_text(r["subject"])
        label = r["code"] + (f" {subj}" if subj else "")
        parts.append(f'<text x="4" y="{yy + 14}" font-size="11" fill="#222">{esc(label, 40)}'
                     '</text>')
        parts.append(f'<rect class="bar" x="{x(r["raised"]):.1f}" y="{yy + 3}" '
                     f'width="{max(2.0, x(end_t) - x(r["raised"])):.1f}" height="{row_h - 6}" '
                     f'fill="{colour}"><title>{esc(r["title"])}</title></rect>')
    for t, anchor in ((start, "start"), (t1, "end")):
        parts.append(f'<text x="{x(t):.1f}" y="{height - 6}" font-size="10" '
                     f'text-anchor="{anchor}" fill="#555">{esc(rel(t, start))}</text>')
    parts.append("</svg>")
    return "".join(parts)


# ---- HTML ---------------------------------------------------------------------------------------
def _evidence_html(f: Finding) -> str:
    items = "".join(f"<li><code>{esc(e.describe(), 500)}</code></li>" for e in f.evidence)
    return f"<ul>{items}</ul>" if items else ""


def render_html(run: RunSummary, *, title: str, version: str,
                comparison: Comparison | None = None) -> str:
    rows = timeline(run)
    out: list[str] = ["<!DOCTYPE html>", '<html lang="en">', "<head>",
                      '<meta charset="utf-8">',
                      '<meta name="viewport" content="width=device-width, initial-scale=1">',
                      f"<title>infertop report: {esc(title)}</title>",
                      f"<style>{CSS}</style>", "</head>", "<body>",
                      "<h1>infertop incident report</h1>"]
    meta = [("recording", title), ("host", run.meta.get("host") or "–"),
            ("from", utc(run.start)), ("to", utc(run.end)),
            ("duration", f"{run.duration:.0f} s, {run.ticks} ticks"),
            ("findings", f"{len(rows)} raised" if rows else "none"),
            ("made by", f"infertop {version}: rules and rates recomputed from the raw "
                        "readings")]
    if run.dropped_ticks:
        meta.append(("left out", f"{run.dropped_ticks} ticks past the limit"))
    for note in run.meta.get("notes") or ():
        meta.append(("note", note))
    out.append('<table class="meta">' + "".join(
        f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in meta) + "</table>")
    # -- findings timeline
    out.append('<section id="findings"><h2>Findings timeline</h2>')
    if rows:
        out.append(f"<figure>{svg_timeline(rows, run.start, run.end)}"
                   "<figcaption>each bar: from raise to clear (to the end when still active)"
                   "</figcaption></figure>")
        out.append("<table><tr><th>code</th><th>severity</th><th>finding</th><th>subject</th>"
                   "<th>since, raised</th><th>cleared</th></tr>")
        for r in rows:
            cleared = (f"{utc(r['cleared'])} ({rel(r['cleared'], run.start)})"
                       if r["cleared"] is not None else "still active at the end")
            out.append(f"<tr><td>{esc(r['code'])}</td><td class=\"sev {esc(r['severity'])}\">"
                       f"{esc(r['severity'])}</td><td>{esc(r['title'])}</td>"
                       f"<td>{esc(labels_text(r['subject'])) or '–'}</td>"
                       f"<td>{esc(_since_raised(r, run.start))}</td>"
                       f"<td>{esc(cleared)}</td></tr>")
        out.append("</table>")
    else:
        out.append("<p>No finding was raised in this recording.</p>")
    out.append("</section>")
    # -- per-layer charts
    out.append('<section id="layers"><h2>Key readings by layer</h2>'
               '<p class="muted">Shaded: while a finding of that layer was active.</p>')
    for layer in LAYERS:
        groups = chart_groups(run, layer.value)
        shades = [(r["raised"], r["cleared"] if r["cleared"] is not None else run.end,
                   r["severity"]) for r in rows if r["layer"] == layer.value]
        out.append(f'<h3 id="layer-{layer.value}">{layer.value}</h3>')
        if not groups:
            out.append("<p class=\"muted\">no readings of this layer in the recording</p>")
            continue
        for key, sids in groups:
            legend = ", ".join(sid_text(s) for s in sids)
            help_ = SPECS[key].help if key in SPECS else ""
            out.append(f'<figure class="chart">{svg_chart(run, key, sids, shades)}'
                       f"<figcaption><code>{esc(legend, 400)}</code> {esc(help_)}"
                       "</figcaption></figure>")
        # the key readings past the charts' cap: a line each, none left out
        more = chart_groups(run, layer.value, None)[len(groups):]
        if more:
            out.append('<table class="more"><tr><th>more readings</th><th>min</th>'
                       "<th>median</th><th>max</th></tr>")
            for key, sids in more:
                unit = run.units.get(key, "")
                for sid in sids:
                    vs = run.values(sid)
                    out.append(f"<tr><td><code>{esc(sid_text(sid), 400)}</code></td>"
                               f"<td>{esc(fmt_value(min(vs), unit))}</td>"
                               f"<td>{esc(fmt_value(median(vs), unit))}</td>"
                               f"<td>{esc(fmt_value(max(vs), unit))}</td></tr>")
            out.append("</table>")
    out.append("</section>")
    # -- evidence and remedies
    out.append('<section id="evidence"><h2>Evidence and remedies</h2>')
    if not run.findings:
        out.append("<p>No finding.</p>")
    worst_sev: dict[tuple[str, Labels], str] = {}
    for r in rows:   # the timeline's severity (the worst reached), so the two agree
        k = (r["code"], r["subject"])
        worst_sev[k] = max(worst_sev.get(k, r["severity"]), r["severity"],
                           key=lambda v: Severity(v).rank)
    # a dead server first (findings.LEADS), then the worst, as the screen and doctor order
    ordered = sorted(run.findings.items(), key=lambda kv: (
        not leads(kv[0][0]), -Severity(worst_sev.get(kv[0], kv[1].severity.value)).rank, kv[0]))
    for (code, subject), f in cause_first(ordered, lambda kv: kv[0]):
        subj = labels_text(subject)
        sev = worst_sev.get((code, subject), f.severity.value)
        out.append(f"<h3>{esc(code)} {esc(f.title)}"
                   + (f" <span class=\"muted\">[{esc(subj)}]</span>" if subj else "") + "</h3>")
        raised = f", raised {utc(f.raised)}" if f.raised is not None else ""
        out.append(f"<p>severity <span class=\"sev {esc(sev)}\">"
                   f"{esc(sev)}</span>, since {esc(utc(f.since))}{esc(raised)}; "
                   "the evidence as last seen:</p>")
        out.append(_evidence_html(f))
        out.append(f'<p class="remedy">{esc(f.remedy, 600)}</p>')
    out.append("</section>")
    # -- settings
    out.append('<section id="settings"><h2>Server settings and facts</h2>')
    if run.settings:
        out.append("<table><tr><th>name</th><th>value</th></tr>" + "".join(
            f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>"
            for k, v in sorted(run.settings.items())) + "</table>")
    else:
        out.append("<p>None recorded.</p>")
    out.append("</section>")
    # -- what was not checked
    out.append('<section id="unchecked"><h2>Not checked</h2>')
    if run.unchecked:
        out.append("<table><tr><th>rule</th><th>missing input</th></tr>" + "".join(
            f"<tr><td>{esc(code)}</td><td>{esc('; '.join(why), 500)}</td></tr>"
            for code, why in sorted(run.unchecked.items())) + "</table>")
    else:
        out.append("<p>Every rule had its inputs.</p>")
    if run.sources:
        out.append("<p>Sources at the last tick: " + esc("; ".join(
            f"{n}: {s}" for n, s in sorted(run.sources.items())), 800) + "</p>")
    out.append("</section>")
    if comparison is not None:
        out.append(compare_html(comparison))
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"


def _window_text(c: Comparison) -> str:
    """" of rates and quantiles over 60 s windows": what a median here is a median of
    (compare's default window is 10 s: the same recordings give other numbers there)."""
    w = c.after.get("window_s", c.before.get("window_s"))
    return f" of rates and quantiles over {w:g} s windows" if isinstance(w, (int, float)) \
        else ""


def compare_html(c: Comparison) -> str:
    out = ['<section id="compare"><h2>Compared with the baseline</h2>',
           f"<p>baseline <code>{esc(c.before.get('file', ''))}</code>, "
           f"{c.before.get('ticks', 0)} ticks; this recording {c.after.get('ticks', 0)} ticks. "
           f"Medians over {esc(c.params.get('ticks', ''))}{_window_text(c)}; a reading "
           "moved when its "
           f"{int(c.params.get('confidence', 0.95) * 100)} % block-bootstrap interval excludes "
           f"0 and it changed by at least {c.params.get('min_relative_change', 0):.0%}.</p>",
           "<h3>Settings that differ</h3>"]
    if c.settings:
        out.append("<table><tr><th>name</th><th>baseline</th><th>this</th></tr>" + "".join(
            f"<tr><td>{esc(n)}</td><td>{esc(b) if b is not None else '(not set)'}</td>"
            f"<td>{esc(a) if a is not None else '(not set)'}</td></tr>"
            for n, b, a in c.settings) + "</table>")
    else:
        out.append("<p>none</p>")
    out.append("<h3>Findings</h3><table><tr><th></th><th>code</th><th>finding</th></tr>")
    for word, items in (("appeared", c.appeared), ("vanished", c.vanished),
                        ("persisted", c.persisted)):
        for f in items:
            out.append(f"<tr><td>{word}</td><td>{esc(f['code'])}</td><td>{esc(f['title'])}"
                       "</td></tr>")
    out.append("</table><h3>Readings that moved</h3>")
    if c.moved:
        out.append("<table><tr><th>layer</th><th>reading</th><th>baseline</th><th>this</th>"
                   "<th>change</th><th>95 % interval</th></tr>")
        for m in c.moved:
            ch = f"{m.rel * 100:+.0f} %" if m.rel is not None else \
                ("a bound" if m.bounded else "new")
            out.append(f"<tr><td>{esc(m.layer)}</td><td><code>{esc(sid_text((m.key, m.labels)))}"
                       f"</code></td><td>{esc(m.before_bound + fmt_value(m.before, m.unit))}</td>"
                       f"<td>{esc(m.after_bound + fmt_value(m.after, m.unit))}</td>"
                       f"<td>{esc(ch)}</td>"
                       f"<td>{esc(fmt_value(m.low, m.unit))} … {esc(fmt_value(m.high, m.unit))}"
                       "</td></tr>")
        out.append("</table>")
    else:
        out.append("<p>none</p>")
    out.append(f"<p class=\"muted\">{c.steady} readings steady, {c.too_few} with too few "
               "points.</p></section>")
    return "\n".join(out)


# ---- Markdown -----------------------------------------------------------------------------------
def render_markdown(run: RunSummary, *, title: str, version: str,
                    comparison: Comparison | None = None) -> str:
    rows = timeline(run)
    out = [f"# infertop report: {md(title)}", "",
           f"{md(utc(run.start))} to {md(utc(run.end))}, {run.duration:.0f} s, {run.ticks} "
           f"ticks, host {md(run.meta.get('host') or '–')} (infertop {md(version)})", ""]
    # lines left out (corrupt, a meta of the wrong type): said, as the HTML's header does
    out += [f"Note: {md(str(n), 600)}" for n in run.meta.get("notes") or ()]
    out += ["", "## Findings timeline", ""] if run.meta.get("notes") else \
        ["## Findings timeline", ""]
    if rows:
        out += ["| code | severity | finding | subject | since, raised | cleared |",
                "|---|---|---|---|---|---|"]
        for r in rows:
            cleared = rel(r["cleared"], run.start) if r["cleared"] is not None else "active"
            out.append(f"| {md(r['code'])} | {md(r['severity'])} | {md(r['title'])} | "
                       f"{md(labels_text(r['subject'])) or '–'} | "
                       f"{md(_since_raised(r, run.start))} | "
                       f"{md(cleared)} |")
    else:
        out.append("No finding was raised.")
    out += ["", "## Evidence and remedies", ""]
    # a cause before its symptom, as the HTML section and the screen order them
    for (code, _subject), f in cause_first(sorted(run.findings.items(), key=lambda kv: kv[0]),
                                           lambda kv: kv[0]):
        out.append(f"**{md(code)} {md(f.title)}** ({md(f.severity.value)})")
        out += [f"- {md(e.describe(), 500)}" for e in f.evidence]
        out += [f"- remedy: {md(f.remedy, 600)}", ""]
    if not run.findings:
        out += ["No finding.", ""]
    out += ["## Key readings", "", "| layer | reading | min | median | max |", "|---|---|---|---|---|"]
    for layer in LAYERS:
        for key, sids in chart_groups(run, layer.value, None):
            unit = run.units.get(key, "")
            for sid in sids:
                vs = run.values(sid)
                out.append(f"| {layer.value} | {md(sid_text(sid))} | {md(fmt_value(min(vs), unit))}"
                           f" | {md(fmt_value(median(vs), unit))} | "
                           f"{md(fmt_value(max(vs), unit))} |")
    out += ["", "## Server settings", ""]
    if run.settings:
        out += ["| name | value |", "|---|---|"]
        out += [f"| {md(k)} | {md(v)} |" for k, v in sorted(run.settings.items())]
    else:
        out.append("None recorded.")
    if run.unchecked:
        out += ["", "## Not checked", ""]
        out += [f"- {md(code)}: {md('; '.join(why), 500)}"
                for code, why in sorted(run.unchecked.items())]
    if comparison is not None:
        c = comparison
        out += ["", f"## Compared with {md(c.before.get('file', 'the baseline'))}", "",
                f"Medians over {md(str(c.params.get('ticks', '')))}{_window_text(c)}.", ""]
        out += [f"- setting {md(n)}: {md(b) if b is not None else '(not set)'} -> "
                f"{md(a) if a is not None else '(not set)'}" for n, b, a in c.settings]
        for word, items in (("appeared", c.appeared), ("vanished", c.vanished)):
            out += [f"- {word}: {md(f['code'])} {md(f['title'])}" for f in items]
        out += [f"- moved: {md(sid_text((m.key, m.labels)))} "
                f"{md(m.before_bound + fmt_value(m.before, m.unit))} -> "
                f"{md(m.after_bound + fmt_value(m.after, m.unit))}"
                for m in c.moved]
    return "\n".join(out).rstrip() + "\n"

