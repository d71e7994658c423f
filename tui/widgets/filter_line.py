"""A zoomed table's filter typed on the bottom line while the rows keep updating (htop's
F4, nvitop's `/`): each keystroke filters the table at once; Enter keeps the filter, Esc
puts back the one there was.  A modal prompt hid the table being filtered."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.binding import Binding
from textual.widgets import Input

if TYPE_CHECKING:    # the zoom keys open this line
    from ..zoom_table import ZoomTableKeys


class FilterLine(Input):
    BINDINGS = [Binding("escape", "cancel", "cancel", show=False)]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(placeholder="filter: text anywhere in the row (Enter keeps, Esc "
                         "cancels)", max_length=200, **kwargs)
        self.target: ZoomTableKeys | None = None   # the zoomed pane whose table is filtered
        self._before = ""
        self.can_focus = False       # only while open: not the screen's first focus

    def open_for(self, pane: ZoomTableKeys) -> None:
        self.target = pane
        self._before = pane.table_view.query
        self.value = self._before
        self.add_class("-open")
        self.can_focus = True
        self.focus()

    def _apply(self, text: str) -> None:
        pane = self.target
        if pane is None:
            return
        pane.table_view.query = text
        pane.table_view.offset = 0
        pane.redraw_table()

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        if self.has_class("-open"):
            self._apply(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._apply(event.value.strip())
        self._close()

    def action_cancel(self) -> None:
        self._apply(self._before)
        self._close()

    def _close(self) -> None:
        self.remove_class("-open")
        self.can_focus = False
        pane, self.target = self.target, None
        if pane is not None and pane.display:
            pane.focus()
