"""DirectRepaint: a widget's repaint handed to its screen at once, without the widget's own
message round.

In Textual (8.2, pinned) ``refresh()`` marks the widget dirty and prompts the widget's
own message pump; when that pump next goes idle it posts an ``Update`` message to the
screen, whose pump then adds the widget to the set its next compositor pass paints.  For
each widget repainted that is a wake-up of its task, a Prompt, an Idle and an Update
dispatched: infertop repaints eight widgets every tick (six panes, the status line, the
findings strip), ~25 loop iterations a tick in all (issue 23).  A plain repaint (no
layout, no recompose) of a widget that is shown needs none of that: this mixin does what
``refresh`` and the Update handler do, in one step, and prompts only the screen.
Anything else (a layout, a recompose, a widget not mounted or not on a screen) goes
through Textual's ``refresh``, and so does every repaint on stock Textual (the private
names this uses live in tui/textual_gate.py, which says when they may be used).
"""

from __future__ import annotations

from typing import Any

from textual.widget import Widget

from . import textual_gate


class DirectRepaint(Widget):
    """A Widget whose plain repaints reach its screen without its own message round."""

    def refresh(self, *regions: Any, repaint: bool = True, layout: bool = False,
                recompose: bool = False) -> Any:
        screen = self._screen_if_direct() if textual_gate.FAST else None
        if screen is None or layout or recompose or not repaint:
            return super().refresh(*regions, repaint=repaint, layout=layout,
                                   recompose=recompose)
        # Widget.refresh's repaint, less its check_idle (the widget's own round), and
        # what _check_refresh and Screen._on_update then do
        textual_gate.repaint_on_screen(self, screen, regions)
        return self

    def _screen_if_direct(self):
        """The screen this widget is on, when a direct repaint applies; else None."""
        if not textual_gate.attached(self):
            return None
        try:
            return self.screen
        except Exception:     # NoScreen: not on a screen (yet)
            return None
