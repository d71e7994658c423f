"""Outside text made inert in Markdown: shown as typed, never markup, HTML or a link.

Used by every Markdown writer (``doctor --format markdown``, ``report --format
markdown``).  A model name with a backtick and ``<img src=x onerror=...>`` broke out of
the doctor's code span and ran when the page was rendered as CommonMark (issue 22); the
old escaping covered only ``|`` and newlines.

``md_text`` backslash-escapes every character that can open inline markup in CommonMark
and GitHub's tables (emphasis, code, links, images, raw HTML, entities, autolinks,
strikethrough, cell separators), breaks the bare-URL and e-mail autolinks of GitHub's
extension (``http\\://``, ``www\\.``, ``\\@``), and escapes what would start a block if
the value began a line.  ``md_code`` puts text in a code span only when nothing in it can
end the span or split a table cell; otherwise it falls back to ``md_text``.
tests/test_markdown_inert.py renders the output with markdown-it-py (CommonMark + tables,
and linkify where installed) and parses the HTML with html5lib.
"""

from __future__ import annotations

import re

from .textclean import clean

# CommonMark inline openers, raw HTML and entities, table cells, GFM strikethrough
_INLINE = frozenset("\\`*_[]<>()!&|~")
_URL = re.compile(r"(?i)(:)(?=//)|(?<=www)(\.)|(@)")
_BLOCK_START = re.compile(r"^(\s*)([#+=>-]|\d{1,9}(?=[.)]))")


def md_text(text: object, limit: int | None = None) -> str:
    """One line of outside text that renders as itself in CommonMark/GFM."""
    t = clean(str(text).replace("\r", " ").replace("\n", " "))
    if limit is not None and len(t) > limit:
        t = t[:limit] + "…"
    t = "".join("\\" + ch if ch in _INLINE else ch for ch in t)
    t = _URL.sub(lambda m: "\\" + m.group(0), t)
    m = _BLOCK_START.match(t)
    if m:
        lead, mark = m.group(1), m.group(2)
        if mark.isdigit():   # "1." or "1)" would start a list: escape the dot
            end = len(lead) + len(mark)
            t = t[:end] + "\\" + t[end:]
        else:
            t = lead + "\\" + t[len(lead):]
    return t


def md_code(text: object) -> str:
    """Outside text in a code span when it cannot leave it (no backtick, no ``|`` that a
    table would split on, not blank); else the same text escaped as plain text."""
    t = clean(str(text).replace("\r", " ").replace("\n", " "))
    if not t.strip() or "`" in t or "|" in t:
        return md_text(t)
    return f"`{t}`"
