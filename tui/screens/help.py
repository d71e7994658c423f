"""``?``: every key from the live bindings, and the rule catalogue with its thresholds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from infertop.rules.engine import Diagnoser

if TYPE_CHECKING:    # the app imports this screen
    from ..app import InfertopApp

_NAMES = {"question_mark": "?", "f1": "F1", "space": "space", "plus": "+",
          "equals_sign": "=", "minus": "-", "slash": "/", "escape": "Esc",
          "ctrl+c": "Ctrl+C", "right_square_bracket": "]", "left_square_bracket": "[",
          "right_curly_bracket": "}", "left_curly_bracket": "{", "enter": "Enter",
          "backspace": "Backspace", "greater_than_sign": ">", "less_than_sign": "<",
          "full_stop": ".", "comma": ","}


def all_keys(b: Binding) -> str:
    """Every key of a binding ("space / Z", "? / F1"): the key line shows one."""
    return " / ".join(_NAMES.get(k.strip(), k.strip()) for k in b.key.split(","))


def bindings_table(app: InfertopApp) -> Table:
    t = Table(box=None, padding=(0, 2), show_header=True, header_style="bold")
    t.add_column("key")
    t.add_column("does")
    seen = set()
    for b in app.BINDINGS:
        if not isinstance(b, Binding):
            continue
        keys = all_keys(b)
        if b.action.startswith("zoom(") or keys in seen:   # 1-6 get one row below
            continue
        seen.add(keys)
        t.add_row(keys, b.description or b.action)
    t.add_row("1-6", "zoom a pane / back (hardware kernels memory scheduling parallelism decoding)")
    t.add_row("tab", "move focus between panes")
    if any(b.action.startswith("zoom(") for b in app.BINDINGS if isinstance(b, Binding)):
        from ..zoom_table import TABLE_HELP  # the keys of a zoomed pane's table
        for keys, does in TABLE_HELP:
            t.add_row(keys, does)
    return t


def catalogue_table(app: InfertopApp) -> Table | Text:
    """One block per rule, as the findings screen: its code, then what it detects, its
    thresholds and its remedy in one wide column.  Five columns side by side gave each
    about 13 cells at 80 columns and broke words ("synchronisati|on")."""
    diagnoser = app.pipeline.diagnoser
    if not isinstance(diagnoser, Diagnoser):
        return Text("diagnosis rules are off")
    t = Table(box=None, padding=(0, 1), show_header=False, expand=True)
    t.add_column("code", no_wrap=True, width=10)
    t.add_column("text", ratio=1, overflow="fold")   # fold: only a token wider than it
    for n, spec in enumerate(diagnoser.catalogue()):
        if n:
            t.add_row("", "")
        t.add_row(Text(spec.code, style="bold"), Text(f"{spec.layer.value}: {spec.detects}"))
        if spec.thresholds:
            t.add_row("thresholds",
                      ", ".join(f"{k}={v}" for k, v in spec.thresholds.items()))
        t.add_row("remedy", spec.remedy)
    return t


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "close")]

    def __init__(self, app: InfertopApp) -> None:
        super().__init__()
        self._app = app

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog"):
            yield Static(Text("infertop keys", style="bold"))
            yield Static(bindings_table(self._app))
            yield Static(Text("\nWhat is flagged and when (thresholds from the config)",
                              style="bold"))
            yield Static(catalogue_table(self._app))
            yield Static(Text("\nesc closes", style="dim"))
