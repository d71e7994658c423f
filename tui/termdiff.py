"""CellDiff: what Textual writes to the terminal, cut down to the cells that changed.

Over SSH every byte crosses the link each second (issue 35: infertop wrote 3.9 kB/s at
80x24 beside nvitop's 236 B/s).  Textual writes a changed span whole, every segment with
its full style (``ESC[0m`` after each, 24-bit colours of ~30 bytes again before the next
one) and the cells of a repainted row that did not change.  This filter keeps the screen
the terminal shows (a character and a style per cell) and, for each write, sends only
the cells that differ, with the shortest style change from the one the terminal has
(``ESC[38;2;...m`` for a new foreground, not a reset and the whole style) and a short
cursor move between runs.  The terminal ends up showing what Textual's own bytes would
have shown (tests/test_termdiff.py replays both on a model terminal).

It understands only what Textual's compositor writes: cursor positions (``ESC[y;xH``),
SGR styles (``ESC[...m``), text, CR and LF.  Anything else (modes, clears, titles, a write
that runs past the screen's edge) is passed through in order, and a sequence that may
change the screen's cells (a clear, the alternate screen) or a cell the filter cannot
place makes it forget what the terminal shows, so the next writes go out whole.  The
cells are kept only while the filter is sure of them.
"""

from __future__ import annotations

import re
from functools import lru_cache

from rich.cells import get_character_cell_size

# ESC [ params final | ESC ] ... (BEL | ESC \) | other ESC x | one control character
_TOKEN = re.compile(r"\x1b\[([0-9;:?<=>]*)([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|"
                    r"\x1b[^\[\]]|[\x00-\x1f\x7f]")
# CSI finals that change cells or where the cursor is, beyond what the filter models
_CELL_CHANGING = frozenset("JKLMPX@STbr")
# what a write of only cursor positions, SGR, printable text, CR and LF (the common case)
# lacks: a control character but CR, LF and ESC (and an ESC not followed by [, counted;
# each ESC [ is then checked to be H or m where the write is split on it).  A character
# class alone is searched at C speed; a pattern with an alternative is tried at each place
_CONTROLS = re.compile(r"[\x00-\x09\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f]")
_CSI_HEAD = re.compile(r"([0-9;]*)([Hm])")
_LINE_ENDS = re.compile(r"(\r|\n)")
# CSI finals and single keys that move the cursor in ways the filter does not follow
_CURSOR_MOVING = frozenset("ABCDEFGIZd`aefsu")
_CURSOR_MOVING_KEYS = frozenset({"\x08", "\t", "\x0b", "\x0c", "\x1b7", "\x1b8", "\x1bD",
                                 "\x1bE", "\x1bM"})
# private modes that swap or clear the screen: 47, 1047, 1049 (alternate screen), 3 (DECCOLM)
_SCREEN_MODES = frozenset({"?47", "?1047", "?1049", "?3"})
# SGR attribute -> the code that turns it off (22 turns off bold and dim both)
_OFF = {"1": "22", "2": "22", "3": "23", "4": "24", "21": "24", "5": "25", "6": "25",
        "7": "27", "8": "28", "9": "29", "53": "55"}

Style = tuple   # (frozenset of attributes, fg params or "", bg params or "")
PLAIN: Style = (frozenset(), "", "")
_UNKNOWN: Style = (frozenset({"?"}), "?", "?")   # a state no style equals: a full SGR


@lru_cache(maxsize=4096)
def parse_sgr(params: str, current: Style) -> Style | None:
    """The style after ``ESC[params m`` from ``current``; None: a parameter this filter
    does not model (the caller then forgets the terminal's state)."""
    attrs, fg, bg = current
    parts = params.split(";") if params else ["0"]
    i = 0
    new_attrs = set(attrs)
    while i < len(parts):
        p = parts[i]
        if p in ("", "0"):
            new_attrs, fg, bg = set(), "", ""
        elif p in ("38", "48"):
            if i + 1 < len(parts) and parts[i + 1] == "5" and i + 2 < len(parts):
                colour, i = ";".join(parts[i:i + 3]), i + 2
            elif i + 1 < len(parts) and parts[i + 1] == "2" and i + 4 < len(parts):
                colour, i = ";".join(parts[i:i + 5]), i + 4
            else:
                return None
            if p == "38":
                fg = colour
            else:
                bg = colour
        elif p == "39":
            fg = ""
        elif p == "49":
            bg = ""
        elif p.isdigit() and (30 <= int(p) <= 37 or 90 <= int(p) <= 97):
            fg = p
        elif p.isdigit() and (40 <= int(p) <= 47 or 100 <= int(p) <= 107):
            bg = p
        elif p in _OFF:
            new_attrs.add(p)
        elif p in ("22", "23", "24", "25", "27", "28", "29", "55"):
            new_attrs = {a for a in new_attrs if _OFF[a] != p}
        else:
            return None
        i += 1
    return (frozenset(new_attrs), fg, bg)


@lru_cache(maxsize=4096)
def sgr_between(old: Style, new: Style) -> str:
    """The shortest SGR sequence this filter knows that takes ``old`` to ``new``."""
    if old == new:
        return ""
    attrs, fg, bg = new
    full = ";".join(["0", *sorted(attrs), *(c for c in (fg, bg) if c)])
    if old == _UNKNOWN:
        return f"\x1b[{full}m"
    old_attrs, old_fg, old_bg = old
    codes: list[str] = []
    dropped = old_attrs - attrs
    kept = set(attrs)
    for a in sorted(dropped):
        off = _OFF[a]
        if off not in codes:
            codes.append(off)
            # 22 also turns off the other of bold/dim: put it back if it stays
            kept |= {b for b in old_attrs & attrs if _OFF[b] == off}
    codes += sorted(kept - (old_attrs - {b for b in old_attrs if _OFF[b] in codes}))
    if fg != old_fg:
        codes.append(fg or "39")
    if bg != old_bg:
        codes.append(bg or "49")
    delta = ";".join(codes)
    return f"\x1b[{full if len(full) <= len(delta) else delta}m"


@lru_cache(maxsize=4096)
def _width(char: str) -> int:
    return get_character_cell_size(char)


@lru_cache(maxsize=4096)
def _narrow(text: str) -> bool:
    """Every character of ``text`` takes one cell."""
    return (text.isascii() and text.isprintable()) or all(_width(c) == 1 for c in text)


class _Write:
    """The cells one write lays down: per touched row a list of characters and one of
    styles (None: not written), and the span of columns touched."""

    __slots__ = ("cols", "chars", "styles", "span", "wide")

    def __init__(self, cols: int) -> None:
        self.cols = cols
        self.chars: dict[int, list[str | None]] = {}
        self.styles: dict[int, list[Style | None]] = {}
        self.span: dict[int, list[int]] = {}
        self.wide: set[int] = set()       # rows with a wide character in this write

    def row(self, y: int) -> tuple[list[str | None], list[Style | None], list[int]]:
        chars = self.chars.get(y)
        if chars is None:
            chars = self.chars[y] = [None] * self.cols
            styles = self.styles[y] = [None] * self.cols
            span = self.span[y] = [self.cols, 0]
            return chars, styles, span
        return chars, self.styles[y], self.span[y]

    def put(self, text: str, x: int, y: int, style: Style, rows: int) -> int:
        """Lay ``text`` down from (x, y); the column after it, or -1 when it leaves the
        screen or lands on part of a wide character laid down earlier in this write (what
        a terminal then shows differs between terminals: not modelled)."""
        n = len(text)
        cols = self.cols
        if not 0 <= y < rows or x < 0:
            return -1
        chars, styles, span = self.row(y)
        if y not in self.wide and x + n <= cols and _narrow(text):
            # the common case, at C speed: one cell per character, nothing wide under it
            chars[x:x + n] = text
            styles[x:x + n] = [style] * n
            if x < span[0]:
                span[0] = x
            if x + n > span[1]:
                span[1] = x + n
            return x + n
        for ch in text:
            w = _width(ch)
            if w == 0:                    # a combining mark: part of the cell before it
                before = chars[x - 1] if x > 0 else None
                if not before:
                    return -1
                chars[x - 1] = before + ch
                continue
            if x + w > cols:
                return -1
            for cx in range(x, x + w):
                old = chars[cx]
                if old is not None and (not old or _width(old[0]) != 1) and \
                        not (cx == x and w == 2 and old and _width(old[0]) == 2):
                    return -1
            chars[x] = ch
            styles[x] = style
            for extra in range(1, w):
                chars[x + extra] = ""
                styles[x + extra] = style
                self.wide.add(y)
            span[0] = min(span[0], x)
            span[1] = max(span[1], x + w)
            x += w
        return x


class CellDiff:
    """The filter described in the module's docstring, for a screen of ``cols`` x ``rows``."""

    def __init__(self, cols: int, rows: int) -> None:
        self.cols, self.rows = cols, rows
        # what the terminal shows, per row and column; None: not known
        self.chars: list[list[str | None]] = [[None] * cols for _ in range(rows)]
        self.styles: list[list[Style | None]] = [[None] * cols for _ in range(rows)]
        self._forget_output_state()
        self._style_before: Style | None = None

    def _forget_output_state(self) -> None:
        self.out_style: Style | None = None      # the terminal's SGR state; None: unknown
        self.out_at: tuple[int, int] | None = None   # where the terminal's cursor is

    def forget(self) -> None:
        """The terminal's cells are no longer known (resize, resume, a clear)."""
        blank = [None] * self.cols
        for row in self.chars:
            row[:] = blank
        self._forget_output_state()

    def resize(self, cols: int, rows: int) -> None:
        if (cols, rows) != (self.cols, self.rows):
            self.cols, self.rows = cols, rows
            self.chars = [[None] * cols for _ in range(rows)]
            self.styles = [[None] * cols for _ in range(rows)]
        self.forget()

    # ---- one write ------------------------------------------------------------------------
    def feed(self, data: str) -> str:
        """The bytes to send for ``data`` (what Textual would have written)."""
        self._style_before = self.out_style     # what a write given up starts from
        if data.count("\x1b") == data.count("\x1b[") and _CONTROLS.search(data) is None:
            return self._feed_frame(data)     # or _feed_any, after a look at each CSI
        return self._feed_any(data)

    def _feed_frame(self, data: str) -> str:
        """feed for a write of cursor positions, styles, text and line ends only (what the
        compositor writes every tick; a write with another CSI goes to _feed_any before
        anything is changed): split on ESC [ instead of a token at a time, and
        the common text (one row, one cell per character) laid down here, not in put.

        This is the filter's hot loop (a 160x48 tick is ~600 chunks): every name it uses
        is local, and what it does per chunk is kept to a dict look-up and a slice."""
        out: list[str] = []
        cols, rows = self.cols, self.rows
        pending = _Write(cols)
        put = pending.put
        wide = pending.wide
        row_of = pending.row
        sgr = parse_sgr
        narrow = _narrow
        x = y = 0
        style: Style | None = PLAIN
        row_y = -1                      # the row whose lists are in chars/styles/span
        chars: list[str | None] = []
        styles: list[Style | None] = []
        span: list[int] = []
        # Textual ends every segment with a reset and starts the next with its style:
        # ESC[0m ESC[38;...m is taken as the one ESC[0;38;...m (the same style), and
        # ESC[0m ESC[y;xH as ESC[0;y;xH (a reset, then the move), halving the chunks;
        # only where the write has no ESC[0; of its own, so each "0;" is one of these
        merged = "\x1b[0;" not in data
        chunks = (data.replace("\x1b[0m\x1b[", "\x1b[0;") if merged else data).split("\x1b[")
        text = chunks[0]
        final = ""
        for i in range(len(chunks)):
            if i:
                chunk = chunks[i]
                if chunk[:2] == "0m":
                    final, text = "m", chunk[2:]
                    if style is not None:
                        style = PLAIN
                    if not text:
                        continue
                else:
                    head = _CSI_HEAD.match(chunk)
                    if head is None:      # not H or m: nothing is changed yet
                        return self._feed_any(data)
                    params, final = head.groups()
                    text = chunk[head.end():]
                    if final == "m":
                        if style is not None:
                            style = sgr(params, style)
                    else:
                        if merged and params[:2] == "0;":     # ESC[0m ESC[y;xH
                            params = params[2:]
                            if style is not None:
                                style = PLAIN
                        row, _, col = params.partition(";")
                        try:
                            y = int(row or 1) - 1
                            x = int(col or 1) - 1
                        except ValueError:            # more than two numbers
                            return self._give_up(data, out)
                    if not text:
                        continue
            elif not text:
                continue
            if style is None:
                return self._give_up(data, out)
            n = len(text)
            end = x + n
            if 0 <= y < rows and x >= 0 and end <= cols and y not in wide and \
                    "\n" not in text and "\r" not in text and \
                    ((text.isascii() and text.isprintable()) or narrow(text)):
                # put's common case: one cell per character, nothing wide under it
                if y != row_y:
                    chars, styles, span = row_of(y)
                    row_y = y
                chars[x:end] = text
                styles[x:end] = [style] * n
                if x < span[0]:
                    span[0] = x
                if end > span[1]:
                    span[1] = end
                x = end
            elif "\n" in text or "\r" in text:
                for piece in _LINE_ENDS.split(text):
                    if piece == "\n":
                        y, x = y + 1, 0
                    elif piece == "\r":
                        x = 0
                    elif piece:
                        x = put(piece, x, y, style, rows)
                        if x < 0:
                            return self._give_up(data, out)
            else:
                x = put(text, x, y, style, rows)
                if x < 0:
                    return self._give_up(data, out)
        self._flush(pending, out)
        if final == "H" and not text and 0 <= y < rows and 0 <= x < cols:
            self._move(y, x, out)     # the write ends with a cursor move: its place
        return "".join(out)

    def _feed_any(self, data: str) -> str:
        """feed for any write: a token at a time."""
        out: list[str] = []
        cols, rows = self.cols, self.rows
        pending = _Write(cols)
        x = y = 0
        style: Style | None = PLAIN
        pos = 0
        placed = False          # the write ends with a cursor move (a visible cursor's place)
        for m in _TOKEN.finditer(data):
            start = m.start()
            if start > pos:                      # text
                if style is None:
                    return self._give_up(data, out)
                x = pending.put(data[pos:start], x, y, style, rows)
                if x < 0:
                    return self._give_up(data, out)
            pos = m.end()
            token = m.group(0)
            final = m.group(2)
            placed = final == "H" or final == "f"
            if placed:
                params = m.group(1).split(";")
                try:
                    y = int(params[0] or 1) - 1
                    x = int(params[1] or 1) - 1 if len(params) > 1 else 0
                except ValueError:
                    return self._give_up(data, out)
            elif final == "m":
                style = parse_sgr(m.group(1), style) if style is not None else None
            elif token == "\r":
                x = 0
            elif token == "\n":
                y += 1
                x = 0
            elif final in _CURSOR_MOVING or token in _CURSOR_MOVING_KEYS:
                return self._give_up(data, out)   # where text lands: not modelled
            else:                                 # anything else: in order, as it came
                self._flush(pending, out)
                pending = _Write(cols)
                self._reset_out(out)
                out.append(token)
                params = m.group(1) or ""
                if token.startswith("\x1b]"):
                    pass                          # OSC (a title, a link): no cell changes
                elif final in _CELL_CHANGING or token == "\x1bc" \
                        or final in ("h", "l") and set(params.split(";")) & _SCREEN_MODES:
                    self.forget()
                else:
                    self.out_at = None            # it may have moved the cursor
        if pos < len(data):
            if style is None:
                return self._give_up(data, out)
            x = pending.put(data[pos:], x, y, style, rows)
            if x < 0:
                return self._give_up(data, out)
        self._flush(pending, out)
        if placed and pos == len(data) and 0 <= y < rows and 0 <= x < cols:
            self._move(y, x, out)
        # the terminal keeps our last style: the next write starts from it (every write
        # comes through here; anything else passed through gets a reset first)
        return "".join(out)

    def _give_up(self, data: str, out: list[str]) -> str:
        """A write the filter cannot follow: Textual's own bytes, from the plain style
        they expect, and nothing kept."""
        reset = "" if self._style_before == PLAIN else "\x1b[0m"
        self.forget()
        return reset + data

    def _reset_out(self, out: list[str]) -> None:
        """The plain style before a sequence passed through, as Textual's writes leave it
        (a clear fills with the current background)."""
        if self.out_style != PLAIN:
            out.append("\x1b[0m")
            self.out_style = PLAIN

    def _flush(self, pending: _Write, out: list[str]) -> None:
        """Write the cells of ``pending`` that differ from what the terminal shows."""
        append = out.append
        cols = self.cols
        for y in sorted(pending.chars):
            lo, hi = pending.span[y]
            if lo >= hi:
                continue
            new_c, new_s = pending.chars[y], pending.styles[y]
            old_c, old_s = self.chars[y], self.styles[y]
            if new_c[lo:hi] == old_c[lo:hi] and new_s[lo:hi] == old_s[lo:hi]:
                continue                          # the terminal shows all of it already
            xs = self._changed(new_c, new_s, old_c, old_s, lo, hi)
            if not xs:
                continue
            # runs of changed cells, bridging short gaps of known cells (a cursor move
            # costs more than rewriting a few cells); a gap lies inside lo..hi, so when
            # the write laid down all of lo..hi every gap is known
            whole = None not in new_c[lo:hi]
            narrow_row = whole and y not in pending.wide and "" not in new_c[lo:hi]
            runs: list[list[int]] = [[xs[0], xs[0] + 1]]
            for cx in xs[1:]:
                run = runs[-1]
                if cx - run[1] <= 4 and (whole or all(
                        (new_c[g] if new_c[g] is not None else old_c[g]) is not None
                        for g in range(run[1], cx))):
                    run[1] = cx + 1
                else:
                    runs.append([cx, cx + 1])
            unwritten: list[int] = []
            for start, end in runs:
                if start > 0 and (new_c[start] if new_c[start] is not None
                                  else old_c[start]) == "":
                    start -= 1                    # the right half of a wide character
                self._move(y, start, out)
                style = self.out_style
                if narrow_row:
                    # one cell per character and all known: a slice per style, not a
                    # step per cell (the same bytes as the loop below)
                    i = start
                    while i < end:
                        cstyle = new_s[i]
                        j = i + 1
                        while j < end and new_s[j] == cstyle:
                            j += 1
                        if cstyle != style:
                            append(sgr_between(style if style is not None else _UNKNOWN,
                                               cstyle))
                            style = cstyle
                        append("".join(new_c[i:j]))   # type: ignore[arg-type]
                        i = j
                    self.out_style = style
                    self.out_at = (y, end) if end < cols else None
                    continue
                cursor = start
                for cx in range(start, end):
                    if cx < cursor:
                        continue                  # covered by a wide character
                    if new_c[cx] is not None:
                        text, cstyle = new_c[cx], new_s[cx]
                    else:
                        text, cstyle = old_c[cx], old_s[cx]
                    if not text:
                        # not known, or an orphan half: stop here, and do not claim the
                        # rest of the run is on the terminal
                        unwritten.extend(range(cx, end))
                        break
                    if cstyle != style:
                        append(sgr_between(style if style is not None else _UNKNOWN,
                                           cstyle))
                        style = cstyle
                    append(text)
                    cursor = cx + (_width(text[0]) if not text.isascii() else 1)
                self.out_style = style
                # after the last column the cursor waits to wrap: its place is not known
                self.out_at = (y, cursor) if start < cursor < cols else None
            if None in new_c[lo:hi]:
                for cx in range(lo, hi):
                    if new_c[cx] is not None:
                        old_c[cx] = new_c[cx]
                        old_s[cx] = new_s[cx]
            else:
                old_c[lo:hi] = new_c[lo:hi]
                old_s[lo:hi] = new_s[lo:hi]
            for cx in unwritten:
                old_c[cx] = None

    def _changed(self, new_c: list, new_s: list, old_c: list, old_s: list, lo: int,
                 hi: int) -> list[int]:
        """The columns in lo..hi whose new cell the terminal does not show.  A wide
        character half overwritten takes its other half with it on the terminal: that
        half is then not known either."""
        cols = self.cols
        for _ in range(2):
            changed = [cx for cx in range(lo, hi) if new_c[cx] is not None
                       and (new_c[cx] != old_c[cx] or new_s[cx] != old_s[cx])]
            partners = False
            for cx in changed:
                old = old_c[cx]
                if old is None:
                    continue
                if not old and cx > 0 and old_c[cx - 1] is not None:
                    old_c[cx - 1] = None
                    partners = True
                elif old and not old.isascii() and _width(old[0]) == 2 and cx + 1 < cols \
                        and old_c[cx + 1] is not None:
                    old_c[cx + 1] = None
                    partners = True
            if not partners:
                return changed
        return changed

    def _move(self, y: int, x: int, out: list[str]) -> None:
        at = self.out_at
        if at == (y, x):
            return
        if at is not None and at[0] == y and x > at[1]:
            step = x - at[1]
            out.append("\x1b[C" if step == 1 else f"\x1b[{step}C")
        elif x == 0:
            out.append(f"\x1b[{y + 1}H")
        else:
            out.append(f"\x1b[{y + 1};{x + 1}H")
        self.out_at = (y, x)
