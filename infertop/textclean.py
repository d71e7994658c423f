"""Make attacker-influenced text safe for a terminal: ``clean(text)``.

Label values, HELP text, HTTP error bodies, process command lines, thread names and
recordings all come from outside.  A label value of ``"\\x1b[2J\\x1b]0;TITLE\\x07"`` printed
raw clears the screen and retitles the terminal; a bidi override (U+202E) makes text read
backwards.  ``clean`` replaces every such character with a visible stand-in and keeps
ordinary Unicode (accents, CJK, emoji) as it is:

* C0 controls and DEL -> their Unicode "control pictures" (``\\x1b`` -> ``␛``, ``\\x07`` -> ``␇``);
  with ``multiline=True`` newline and tab are kept (report and error texts have lines).
* C1 controls (U+0080-U+009F, among them the 8-bit CSI U+009B), bidi controls
  (U+061C, U+200E/F, U+202A-U+202E, U+2066-U+2069), line/paragraph separators and lone
  surrogates (which no terminal encoding can write) -> ``\\x9b``/``\\u202e`` spelled out.

Cheap on the common path: ``str.isprintable`` (C) says "nothing to do" for almost every
string; only text that needs it goes through the regex.  Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["clean", "clean_deep", "is_clean", "one_line"]

# What must not reach a terminal raw.  \t and \n are in the class; ``multiline`` keeps them.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029"
                     "\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_ONE_LINE = _UNSAFE
_UNSAFE_MULTI = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029"
                           "\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _visible(m: re.Match) -> str:
    c = m.group(0)
    o = ord(c)
    if o < 0x20:
        return chr(0x2400 + o)      # ␀ ... ␟ (␛ for ESC)
    if o == 0x7f:
        return "\u2421"             # ␡
    if o <= 0xff:
        return f"\\x{o:02x}"
    return f"\\u{o:04x}"


def clean(text: str, *, multiline: bool = False) -> str:
    """``text`` with control, escape and bidi characters made visible (see module doc)."""
    if text.isprintable():  # fast path: no control or format character at all
        return text
    return (_UNSAFE_MULTI if multiline else _UNSAFE_ONE_LINE).sub(_visible, text)


def is_clean(text: str, *, multiline: bool = False) -> bool:
    """Whether ``text`` holds nothing ``clean`` would replace."""
    return (_UNSAFE_MULTI if multiline else _UNSAFE_ONE_LINE).search(text) is None


def one_line(text: Any, limit: int = 200) -> str:
    """``clean`` text folded to one line (runs of whitespace, newlines included, become
    one space) and cut to ``limit`` characters with "…": for reasons and labels."""
    out = " ".join(clean(str(text), multiline=True).split())
    return out if len(out) <= limit else out[:limit - 1] + "…"


def clean_deep(obj: Any) -> Any:
    """Every string (keys too) inside JSON-like data cleaned: dicts, lists, tuples."""
    if isinstance(obj, str):
        return clean(obj)
    if isinstance(obj, dict):
        return {clean_deep(k): clean_deep(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(clean_deep(v) for v in obj)
    return obj
