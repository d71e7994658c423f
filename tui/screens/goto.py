"""``g`` in replay: go to a time from the start of the recording (s, m:ss or h:mm:ss)."""

from __future__ import annotations

import math

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


def parse_time(text: str) -> float:
    """'90', '1:30', '0:01:30' -> 90.0 seconds; ValueError on anything else."""
    parts = text.strip().split(":")
    if not parts or len(parts) > 3 or any(not p.strip() for p in parts):
        raise ValueError(f"not a time: {text!r}")
    total = 0.0
    for p in parts:
        try:
            v = float(p)
        except ValueError:   # float's own message ("could not convert ...") says less
            raise ValueError(f"not a time: {text[:40]!r} (e.g. 90, 1:30 or 0:01:30)") from None
        if not math.isfinite(v) or v < 0:   # "nan" and "inf" are floats, not times
            raise ValueError(f"not a time: {text[:40]!r} (e.g. 90, 1:30 or 0:01:30)")
        total = total * 60 + v
    return total


class GotoScreen(ModalScreen[float | None]):
    BINDINGS = [Binding("escape", "cancel", "cancel")]
    DEFAULT_CSS = """
    GotoScreen Vertical { width: 50; height: auto; border: round $primary;
                          background: $surface; padding: 0 1; }
    """

    def __init__(self, duration: float) -> None:
        super().__init__()
        self.duration = duration

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"Go to (s, m:ss or h:mm:ss; recording is {self.duration:.0f} s):")
            yield Input(placeholder="e.g. 2:30", id="goto-input")
            yield Label("", id="goto-error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            t = parse_time(event.value)
        except ValueError as e:
            self.query_one("#goto-error", Label).update(str(e))
            return
        self.dismiss(min(t, self.duration))

    def action_cancel(self) -> None:
        self.dismiss(None)
