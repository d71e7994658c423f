"""The bottom line of keys: Textual's Footer lists its keys in binding order and cuts the
line at the terminal's edge (at 80 columns "+ faste", never `f`).  This one always shows
`q`, `?` and `f` first, then the keys of what is active now (a zoomed pane's table keys,
the mode's own: demo, replay, live captures), then the general ones as far as they fit.

One Static line, rebuilt only when the bindings change (focus, zoom, a screen pushed) or
the terminal is resized: no widget per key, nothing done per tick.
"""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.widgets import Static

PINNED = ("quit", "help", "findings")     # always on the line, in this order


def key_label(b: Binding) -> str:
    if b.key_display:
        return b.key_display
    key = b.key.split(",")[0]
    return {"slash": "/", "question_mark": "?", "escape": "Esc", "space": "space",
            "left": "←", "right": "→", "home": "Home", "end": "End"}.get(key, key)


def key_items(active: dict, general: set[str]) -> list[tuple[str, str]]:
    """(key, what) for the shown bindings of ``active`` (Screen.active_bindings): the
    pinned ones first, then the focused widget's and the mode's, then ``general``'s
    (actions every mode shares), each action once."""
    pinned: dict[str, tuple[str, str]] = {}
    mode: list[tuple[str, str]] = []
    rest: list[tuple[str, str]] = []
    seen: set[str] = set()
    for ab in active.values():
        b = ab.binding
        if not b.show or not ab.enabled or b.action in seen:
            continue
        seen.add(b.action)
        item = (key_label(b), b.description or b.action)
        if b.action in PINNED:
            pinned[b.action] = item
        elif b.action in general:
            rest.append(item)
        else:
            mode.append(item)
    return [pinned[a] for a in PINNED if a in pinned] + mode + rest


def key_line(items: list[tuple[str, str]], width: int, key_style: str = "bold") -> Text:
    """The items that fit in ``width``, whole, in order (the first three always)."""
    t = Text(no_wrap=True, end="")
    for n, (key, what) in enumerate(items):
        piece = f"{key} {what}"
        if n >= 3 and t.cell_len + 2 + len(piece) > width:
            continue        # a shorter one further on may still fit
        if n:
            t.append("  ")
        t.append(key, style=key_style)
        t.append(f" {what}")
    return t


class KeyBar(Static):
    DEFAULT_CSS = """
    KeyBar { height: 1; dock: bottom; background: $panel; color: $foreground; padding: 0 1; }
    """

    def __init__(self, general: set[str] | None = None, **kwargs) -> None:
        super().__init__("", **kwargs)
        self.general = general or set()
        self._line: Text | None = None

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self.bindings_changed)
        self.call_after_refresh(self.bindings_changed, self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def on_resize(self, _event) -> None:
        self.bindings_changed(self.screen)

    def bindings_changed(self, screen) -> None:
        if not self.is_attached or screen is not self.screen:
            return
        line = key_line(key_items(screen.active_bindings, self.general),
                        max(10, self.size.width or self.app.size.width - 2), "bold reverse")
        if line != self._line:
            self._line = line
            self.update(line)
