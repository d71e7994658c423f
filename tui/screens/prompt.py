"""Small modal questions: a number with a default (record seconds), or yes/no.  (A zoomed
table's filter is typed inline: widgets/filter_line.py.)"""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


class NumberPrompt(ModalScreen[float | None]):
    """Ask for a number in [lo, hi]; Enter accepts (the default when empty), Esc cancels."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]
    DEFAULT_CSS = """
    NumberPrompt Vertical, ConfirmPrompt Vertical { width: 64; height: auto;
        border: round $primary; background: $surface; padding: 0 1; }
    """

    def __init__(self, question: str, default: float, lo: float, hi: float) -> None:
        super().__init__()
        self.question, self.default, self.lo, self.hi = question, default, lo, hi

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.question)
            yield Input(value=f"{self.default:g}", id="prompt-input")
            yield Label("", id="prompt-error")

    typed_ahead = False

    async def on_key(self, event: events.Key) -> None:
        """Keys typed before the box has the focus (P, then "5", Enter, in one burst over
        SSH) are sent to the screen: they went to the app's bindings ("5" zoomed a pane) and
        Enter took the default.  They go into the box, typed over the default as the
        focused box would have it selected."""
        box = self.query_one("#prompt-input", Input)
        # a printable key the box typed has been stopped there; Enter is the box's binding,
        # checked after the key bubbles up: submitted here, once, stopped
        if event.is_printable and event.character:
            if not self.typed_ahead:
                box.value = ""
                box.select_on_focus = False     # focused later: keep what was typed
            self.typed_ahead = True
            box.insert_text_at_cursor(event.character)
        elif event.key == "enter":
            await box.action_submit()
        else:
            return
        event.stop()
        event.prevent_default()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        try:
            v = float(text) if text else self.default
        except ValueError:
            self.query_one("#prompt-error", Label).update(f"not a number: {text!r}")
            return
        if not self.lo <= v <= self.hi:
            self.query_one("#prompt-error", Label).update(
                f"must be between {self.lo:g} and {self.hi:g}")
            return
        self.dismiss(v)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmPrompt(ModalScreen[bool]):
    """y confirms, n or Esc declines."""

    BINDINGS = [Binding("y", "answer(True)", "yes"), Binding("n,escape", "answer(False)", "no")]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.question)
            yield Label("[b]y[/b] yes   [b]n[/b] no")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
