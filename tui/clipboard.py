"""`y`: a finding's evidence and remedy to the clipboard, for the incident ticket.

Through OSC 52 (the terminal sets its clipboard from an escape sequence), so it works
over SSH, where no local clipboard tool can reach the user's machine.  Inside tmux the
sequence is also sent wrapped in tmux's passthrough (DCS ``tmux;``), which tmux hands to
the outer terminal when ``allow-passthrough`` is on; with ``set-clipboard on`` tmux takes
the plain one itself.  Terminals that ignore OSC 52 (macOS Terminal) copy nothing: the
notice says which way was used.
"""

from __future__ import annotations

import base64
from collections.abc import Callable

from infertop.findings import Finding
from infertop.textclean import clean

MAX_BYTES = 74_994    # xterm's and tmux's limit for one OSC 52 payload (base64: ~100 kB)


def ticket_text(f: Finding, clock: Callable[[float], str]) -> str:
    """The finding as plain lines for a ticket: what, since when, evidence, remedy."""
    lines = [f"{f.code} {f.severity.value.upper()}: {clean(f.title)}",
             f"since {clock(f.since)}" + (f", raised {clock(f.raised)}" if f.raised else "")]
    lines += ["evidence:"] + [f"  {clean(e.describe())}" for e in f.evidence]
    if f.caused_by:
        lines.append("cause: explained by " + ", ".join(f.caused_by))
    if f.remedy:
        lines.append(f"remedy: {clean(f.remedy)}")
    return "\n".join(lines) + "\n"


def osc52(text: str, in_tmux: bool) -> str:
    """The escape sequence(s) that put ``text`` on the terminal's clipboard (cut to
    MAX_BYTES of UTF-8 at a character boundary: longer payloads are dropped whole)."""
    data = text.encode("utf-8")[:MAX_BYTES].decode("utf-8", "ignore").encode("utf-8")
    seq = f"\x1b]52;c;{base64.b64encode(data).decode('ascii')}\x07"
    if in_tmux:    # tmux passthrough: every ESC inside doubled
        seq += "\x1bPtmux;" + seq.replace("\x1b", "\x1b\x1b") + "\x1b\\"
    return seq
