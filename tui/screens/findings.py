"""``f``: active findings with evidence and remedy, and the history of raises and clears."""

from __future__ import annotations

import time
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static



def _wall_clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def findings_renderable(findings: list[Any], styles: dict[str, str],
                        clock=_wall_clock) -> Table | Text:
    """One block per finding, in the engine's order: code, severity, title and onset on
    its first line, then its evidence and remedy in one wide column.  Five columns side by
    side gave each 14 cells at 80x24 and broke "evidence" and metric names mid-word."""
    if not findings:
        return Text("No active findings: every rule with inputs is within its thresholds.")
    t = Table(box=None, padding=(0, 1), show_header=False, expand=True)
    t.add_column("what", no_wrap=True, width=9)
    t.add_column("text", ratio=1, overflow="fold")
    for n, f in enumerate(findings):
        sev = getattr(f.severity, "value", str(f.severity))
        ev = "\n".join(e.describe() for e in f.evidence)
        since = f"since {clock(f.since)}"   # as doctor and the report say it
        raised = getattr(f, "raised", None)
        if raised is not None:
            since += f", raised {clock(raised)}"
        t.add_row(Text(f.code, style=styles.get(sev, "")), sev, f"{f.title}\n{since}", ev,
                  f.remedy)
    return t


def events_renderable(events: list[Any], clock=_wall_clock) -> Table | Text:
    if not events:
        return Text("no raises or clears yet", style="dim")
    t = Table(box=None, padding=(0, 1), show_header=True, header_style="bold", expand=True)
    for col in ("time", "code", "event"):      # short: never wrapped
        t.add_column(col, no_wrap=True)
    t.add_column("summary", ratio=1, overflow="fold")
    for e in list(events)[-30:][::-1]:
        onset = getattr(e, "since", None)
        kind = f"{e.kind} (since {clock(onset)})" if e.kind == "raised" and onset else e.kind
        t.add_row(clock(e.time), e.code, kind, getattr(e, "summary", ""))
    return t


class FindingsScreen(ModalScreen):
    BINDINGS = [Binding("escape,q,f", "dismiss", "close")]

    def __init__(self, app: Any) -> None:
        super().__init__()
        self._app = app

    def compose(self) -> ComposeResult:
        frame = self._app.frame
        findings = frame.findings if frame else []
        diagnoser = getattr(self._app.pipeline, "diagnoser", None)
        events = getattr(diagnoser, "events", []) if diagnoser else []
        clock = getattr(self._app, "clock_text", _wall_clock)   # replay: the recording's
        with VerticalScroll(classes="dialog"):
            yield Static(Text("Active findings", style="bold"))
            yield Static(findings_renderable(findings, self._app.role_styles, clock),
                         id="findings-list")
            yield Static(Text("\nRaised and cleared", style="bold"))
            yield Static(events_renderable(events, clock), id="findings-events")
            yield Static(Text("\nesc closes", style="dim"))
