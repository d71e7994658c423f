"""A first line on the terminal before Textual is imported (issue 35: instant start).

Importing Textual and building the app take about half a second on a small box, more on a
loaded one; the user saw nothing meanwhile.  ``show`` switches to the alternate screen
Textual draws on (Textual's own switch is then a no-op) and writes one line; once the app
runs, Textual owns the screen (``handed_over``).  An error before that (a bad --record
target, a source that cannot start) calls ``hide`` first, so its one line lands on the
normal screen (cli/main.py), and an exit without either restores the screen too.
"""

from __future__ import annotations

import atexit
import os
import sys

# the alternate screen, cleared, the cursor hidden, and one line
SPLASH = "\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J infertop: starting\u2026"
SPLASH_OFF = "\x1b[2J\x1b[?25h\x1b[?1049l"

_shown = False


def _write(text: str) -> bool:
    stream = sys.__stderr__       # Textual draws on stderr
    if stream is None:
        return False
    try:     # written at once, past any Python buffer
        os.write(stream.fileno(), text.encode())
    except (OSError, ValueError, AttributeError):
        return False
    return True


def show() -> None:
    """Draw the splash (the caller checked stdin, stdout and stderr are terminals)."""
    global _shown
    if _shown or os.environ.get("TERM", "") in ("", "dumb"):
        return
    if _write(SPLASH):
        _shown = True
        atexit.register(hide)


def handed_over() -> None:
    """Textual's app takes the screen (it leaves the alternate screen when it ends)."""
    global _shown
    _shown = False


def hide() -> None:
    """Back to the normal screen, if the splash is still up."""
    global _shown
    if _shown:
        _shown = False
        _write(SPLASH_OFF)
