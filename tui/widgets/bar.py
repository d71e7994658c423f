"""Bar: a line of text across the main screen redrawn every tick or so (the header, the
findings strip, the banner, the status line).

A Static whose repaints reach the screen without its own message round
(tui/repaint.py) and whose rows are joined from pieces like a pane's
(tui/panes/styles_cache.py): Textual's whole line routine (padding, border and style
lookups, three Strips) for the status line's one row was ~0.45 ms of the ~0.6 ms its
new "tick N" cost a tick (issue 23).
"""

from __future__ import annotations

from typing import Any

from textual.widgets import Static

from ..panes import styles_cache
from ..repaint import DirectRepaint


class Bar(DirectRepaint, Static):
    """A Static drawn through the pane's line cache, repainted straight to its screen."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        styles_cache.install(self)
