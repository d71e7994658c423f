"""``f``: active findings with evidence and remedy, and the history of raises and clears."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from infertop.findings import Finding, FindingEvent
from infertop.rules.engine import Diagnoser

if TYPE_CHECKING:    # the app imports this screen
    from ..app import InfertopApp


def _wall_clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


LABEL_SET = re.compile(r"\{[^{}]*\}")


def wrappable(text: str) -> str:
    """A series' label set with a space after each comma ("{engine=0, model=...}"): the
    line wraps between labels, not inside a value ("model=me|ta-llama")."""
    return LABEL_SET.sub(lambda m: m.group(0).replace(",", ", "), text)


def findings_renderable(findings: list[Finding], styles: dict[str, str],
                        clock: Callable[[float], str] = _wall_clock) -> Table | Text:
    """One block per finding, in the engine's order: code, severity, title and onset on
    its first line, then its evidence and remedy in one wide column.  Five columns side by
    side gave each 14 cells at 80x24 and broke "evidence" and metric names mid-word."""
    if not findings:
        return Text("No active findings: every rule with inputs is within its thresholds.")
    t = Table(box=None, padding=(0, 1), show_header=False, expand=True)
    t.add_column("what", no_wrap=True, width=9)
    t.add_column("text", ratio=1, overflow="fold")
    for n, f in enumerate(findings):
        sev = f.severity.value
        if n:
            t.add_row("", "")
        since = f"since {clock(f.since)}"   # as doctor and the report say it
        if f.raised is not None:
            since += f", raised {clock(f.raised)}"
        head = Text()
        head.append(f"{sev.upper()}  ", style=styles.get(sev, "bold"))
        head.append(f.title, style="bold")
        head.append(f"  {since}", style=styles.get("muted", "dim"))
        t.add_row(Text(f.code, style=styles.get(sev, "bold")), head)
        for i, e in enumerate(f.evidence):
            t.add_row("evidence" if i == 0 else "", wrappable(e.describe()))
        if f.caused_by:
            t.add_row("cause", "explained by " + ", ".join(f.caused_by))
        if f.remedy:
            t.add_row("remedy", f.remedy)
    return t


def events_renderable(events: list[FindingEvent],
                      clock: Callable[[float], str] = _wall_clock) -> Table | Text:
    if not events:
        return Text("no raises or clears yet", style="dim")
    t = Table(box=None, padding=(0, 1), show_header=True, header_style="bold", expand=True)
    for col in ("time", "code", "event"):      # short: never wrapped
        t.add_column(col, no_wrap=True)
    t.add_column("summary", ratio=1, overflow="fold")
    for e in list(events)[-30:][::-1]:
        onset = e.since
        kind = f"{e.kind} (since {clock(onset)})" if e.kind == "raised" and onset else e.kind
        t.add_row(clock(e.time), e.code, kind, e.summary)
    return t


class FindingsScreen(ModalScreen):
    """Every active finding, one block each; ↑/↓ (j/k, Home/End) select one, `y` copies
    the selected finding's evidence and remedy to the clipboard (OSC 52)."""

    BINDINGS = [Binding("escape,q,f", "dismiss", "close"),
                # priority: the scrolling dialog would take the arrows for itself
                Binding("down,j", "select(1)", "next finding", priority=True),
                Binding("up,k", "select(-1)", "previous finding", priority=True),
                Binding("home", "select_edge(0)", "first", priority=True),
                Binding("end", "select_edge(1)", "last", priority=True),
                Binding("y", "copy", "copy the finding"),
                Binding("m", "mute", "mute / unmute")]

    DEFAULT_CSS = """
    FindingsScreen .finding { margin-bottom: 1; }
    FindingsScreen .finding.-selected { background: $boost; }
    FindingsScreen .finding.-muted { text-opacity: 55%; }
    """

    def __init__(self, app: InfertopApp) -> None:
        super().__init__()
        self._app = app
        frame = app.frame
        self.findings = list(frame.findings) if frame else []
        self.selected = 0

    def compose(self) -> ComposeResult:
        findings = self.findings
        # the raises and clears of this screen's rules (a fleet's: the cross-node ones)
        diagnoser = self._app.pipeline.diagnoser
        events = diagnoser.events if isinstance(diagnoser, Diagnoser) else []
        clock = self._app.clock_text     # replay: the recording's
        with VerticalScroll(classes="dialog"):
            yield Static(Text("Active findings" + ("  (↑/↓ select, y copies evidence and "
                                                    "remedy, m mutes for 30 min)"
                                                    if findings else ""), style="bold"))
            if not findings:
                yield Static(findings_renderable([], self._app.role_styles, clock),
                             id="findings-list")
            for n, f in enumerate(findings):
                block = Static(self._block(f), id=f"finding-{n}",
                               classes="finding -selected" if n == 0 else "finding")
                block.set_class(self._muted_until(f) is not None, "-muted")
                yield block
            yield Static(Text("\nRaised and cleared", style="bold"))
            yield Static(events_renderable(events, clock), id="findings-events")
            yield Static(Text("\nesc closes", style="dim"))

    def action_select(self, step: int) -> None:
        self._select(self.selected + step)

    def action_select_edge(self, end: int) -> None:
        self._select(len(self.findings) - 1 if end else 0)

    def _select(self, n: int) -> None:
        if not self.findings:
            return
        n = max(0, min(n, len(self.findings) - 1))
        self.query_one(f"#finding-{self.selected}").remove_class("-selected")
        self.selected = n
        block = self.query_one(f"#finding-{n}")
        block.add_class("-selected")
        block.scroll_visible(animate=False)

    def _now(self) -> float:
        frame = self._app.frame
        return frame.time if frame is not None else time.time()

    def _muted_until(self, f: Finding) -> float | None:
        return self._app.mutes.muted(f, self._now())

    def _block(self, f: Finding):
        """A finding's block; a muted one says until when, and that it comes back."""
        body = findings_renderable([f], self._app.role_styles, self._app.clock_text)
        end = self._muted_until(f)
        if end is None:
            return body
        from rich.console import Group
        return Group(Text(f"muted until {self._app.clock_text(end)}: back sooner if it "
                          "worsens (m unmutes)", style="italic"), body)

    def action_mute(self) -> None:
        if not self.findings:
            return
        f = self.findings[self.selected]
        mutes = self._app.mutes
        if self._muted_until(f) is None:
            mutes.mute(f, self._now())
        else:
            mutes.unmute(f)
        block = self.query_one(f"#finding-{self.selected}", Static)
        block.update(self._block(f))
        block.set_class(self._muted_until(f) is not None, "-muted")
        if self._app.frame is not None:
            self._app._update_strip(self._app.frame)

    def action_copy(self) -> None:
        if self.findings:
            self._app.copy_finding(self.findings[self.selected])
