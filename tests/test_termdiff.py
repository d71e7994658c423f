"""Only the cells that changed reach the terminal (tui/termdiff.py), and the terminal shows
exactly what Textual's own bytes would have shown.  Both byte streams are played on a
model terminal that keeps each cell's character and its style as meaning (bold, colours),
not as the codes that set it; after every write the two screens must be equal."""

from __future__ import annotations

import random
import re

import pytest
from rich.cells import cell_len

from infertop.tui.termdiff import CellDiff

ESCAPE = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
ATTR_ON = {"1": "bold", "2": "dim", "3": "italic", "4": "underline", "7": "reverse",
           "9": "strike"}
ATTR_OFF = {"22": ("bold", "dim"), "23": ("italic",), "24": ("underline",),
            "27": ("reverse",), "29": ("strike",)}


class Terminal:
    """Cells of (character, style as a frozenset of facts); cursor moves (H, C), SGR, text,
    CR/LF, a clear (2J fills with the current background)."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.cells: list[list[tuple[str, frozenset]]] = [[("?", frozenset())] * width
                                                          for _ in range(height)]
        self.x = self.y = 0
        self.state: dict[str, str] = {}

    def play(self, data: str) -> None:
        pos = 0
        for m in ESCAPE.finditer(data):
            self._text(data[pos:m.start()])
            pos = m.end()
            params, final = m.group(1), m.group(2)
            if final == "H":
                row, _, col = (params or "1;1").partition(";")
                self.y, self.x = int(row or 1) - 1, int(col or 1) - 1
            elif final == "C":
                self.x += int(params or 1)
            elif final == "m":
                self._sgr(params)
            elif final == "J" and params == "2":
                blank = (" ", self._style())
                self.cells = [[blank] * self.width for _ in range(self.height)]
        self._text(data[pos:])

    def _sgr(self, params: str) -> None:
        parts = params.split(";") if params else ["0"]
        i = 0
        while i < len(parts):
            p = parts[i]
            if p in ("", "0"):
                self.state = {}
            elif p in ("38", "48"):
                n = 3 if parts[i + 1] == "5" else 5
                self.state["fg" if p == "38" else "bg"] = ":".join(parts[i + 2:i + n])
                i += n - 1
            elif p in ("39", "49"):
                self.state.pop("fg" if p == "39" else "bg", None)
            elif p.isdigit() and (30 <= int(p) <= 37 or 90 <= int(p) <= 97):
                self.state["fg"] = p
            elif p.isdigit() and (40 <= int(p) <= 47 or 100 <= int(p) <= 107):
                self.state["bg"] = p
            elif p in ATTR_ON:
                self.state[ATTR_ON[p]] = "on"
            elif p in ATTR_OFF:
                for name in ATTR_OFF[p]:
                    self.state.pop(name, None)
            else:
                raise AssertionError(f"unexpected SGR {p!r}")
            i += 1

    def _style(self) -> frozenset:
        return frozenset(self.state.items())

    def _text(self, text: str) -> None:
        for ch in text:
            if ch == "\r":
                self.x = 0
                continue
            if ch == "\n":
                self.x, self.y = 0, self.y + 1
                continue
            width = cell_len(ch)
            assert 0 <= self.y < self.height and 0 <= self.x + width <= self.width, \
                (ch, self.x, self.y)
            self.cells[self.y][self.x] = (ch, self._style())
            for extra in range(1, width):
                self.cells[self.y][self.x + extra] = ("", self._style())
            self.x = min(self.x + width, self.width - 1)


STYLES = ["", "1", "38;2;216;222;228;48;2;16;20;24", "1;38;2;239;160;48;48;2;16;20;24",
          "48;2;16;20;24", "2;3", "7", "38;5;208", "31;44", "1;2;4"]
TEXTS = ["0", "12.5", "H100", "██░", " ", "  ", "%", "中文", "é", "▄█▅"]


def frame(rng: random.Random, width: int, height: int) -> str:
    """A write as Textual's compositor makes one: spans with a cursor move, each a run of
    segments in a style with a reset after each."""
    # a title now and then: such a write takes the filter's general path
    out = ["\x1b]0;infertop\x07"] if rng.random() < 0.3 else []
    for _ in range(rng.randint(1, 6)):
        y = rng.randrange(height)
        x = rng.randrange(width - 6)
        out.append(f"\x1b[{y + 1};{x + 1}H")
        room = width - x
        for _ in range(rng.randint(1, 4)):
            text = rng.choice(TEXTS)
            if cell_len(text) > room:
                break
            room -= cell_len(text)
            style = rng.choice(STYLES)
            out.append(f"\x1b[{style}m{text}\x1b[0m" if style else text)
        if rng.random() < 0.2 and y + 1 < height:
            out.append("\n" + rng.choice(TEXTS[:3]))     # the next line, from its start
    return "".join(out)


@pytest.mark.parametrize("seed", range(16))
def test_the_terminal_shows_what_textual_wrote(seed):
    rng = random.Random(seed)
    width, height = 24, 6
    raw, filtered = Terminal(width, height), Terminal(width, height)
    cells = CellDiff(width, height)
    start = "\x1b[2J" + "".join(f"\x1b[{y + 1};1H" + " " * width for y in range(height))
    for data in [start] + [frame(rng, width, height) for _ in range(300)]:
        raw.play(data)
        filtered.play(cells.feed(data))
        assert filtered.cells == raw.cells


def test_an_unchanged_write_sends_nothing_and_a_change_only_its_cells():
    cells = CellDiff(40, 3)
    line = "\x1b[2;1H\x1b[38;2;216;222;228;48;2;16;20;24mGPU 0  71 %  37/80 GiB\x1b[0m"
    first = cells.feed(line)
    assert "GPU 0" in first
    assert cells.feed(line) == ""
    changed = cells.feed(line.replace("71", "72"))
    assert changed == "\x1b[2;9H2"        # one cell, in the style the terminal already has


def test_a_style_change_sends_only_what_differs():
    cells = CellDiff(40, 1)
    cells.feed("\x1b[1;1H\x1b[38;2;1;2;3;48;2;16;20;24mab\x1b[0m")
    out = cells.feed("\x1b[1;1H\x1b[38;2;1;2;3;48;2;16;20;24ma\x1b[38;2;9;9;9;48;2;16;20;24mc"
                     "\x1b[0m")
    assert out == "\x1b[1;2H\x1b[38;2;9;9;9mc"     # the foreground only, not the background


def test_a_sequence_it_does_not_model_passes_through_and_forgets_the_screen():
    cells = CellDiff(10, 2)
    line = "\x1b[1;1Habc"
    cells.feed(line)
    out = cells.feed("\x1b[2J")
    assert out == "\x1b[2J"
    assert "abc" in cells.feed(line)       # the clear wiped it: written again


def test_a_cursor_move_it_does_not_follow_sends_the_write_as_it_came():
    cells = CellDiff(10, 2)
    cells.feed("\x1b[1;1Habc")
    data = "\x1b[1;1Hab\x1b[2Dxy"
    assert cells.feed(data) == data
    assert cells.feed("\x1b[1;1Habc") == "\x1b[1H\x1b[0mabc"    # forgotten: whole again


def test_a_title_or_link_passes_through_and_keeps_the_screen():
    cells = CellDiff(10, 2)
    cells.feed("\x1b[1;1Habc")
    assert cells.feed("\x1b]0;infertop\x07\x1b[1;1Habc") == "\x1b]0;infertop\x07"


def test_a_write_past_the_edge_goes_out_as_it_came():
    cells = CellDiff(4, 2)
    cells.feed("\x1b[1;1H\x1b[1mab\x1b[0m")
    data = "\x1b[1;1Habcdefgh"
    assert cells.feed(data) == "\x1b[0m" + data     # from the plain style it expects
    assert cells.feed("\x1b[1;1Hab") == "\x1b[1H\x1b[0mab"   # nothing assumed after it


def test_a_resize_forgets_the_screen():
    cells = CellDiff(10, 2)
    cells.feed("\x1b[1;1Habc")
    cells.resize(12, 3)
    assert "abc" in cells.feed("\x1b[1;1Habc")


@pytest.mark.slow
async def test_the_app_s_frames_through_the_filter_show_the_same_screen_in_fewer_bytes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from helpers.tui_demo import demo_app
    app = demo_app("healthy")
    writes: list[str] = []
    display = app._display

    def spy(screen, update):
        if update is not None and screen is app.screen:
            writes.append(update.render_segments(app.console))
        return display(screen, update)

    async with app.run_test(size=(120, 36)) as pilot:
        while app.ticks < 1:
            await pilot.pause(0.01)
        monkeypatch.setattr(app, "_display", spy)
        app.screen.refresh()           # the whole screen once, then partial updates
        await pilot.pause()
        raw, filtered, cells = Terminal(120, 36), Terminal(120, 36), CellDiff(120, 36)
        sent = written = 0
        for step in range(12):
            if step == 6:
                await pilot.press("3")     # a zoom: a new layout
            await app._poll()
            await pilot.pause()
            for data in writes:
                out = cells.feed(data)
                raw.play(data)
                filtered.play(out)
                written += len(data.encode())
                sent += len(out.encode())
            writes.clear()
            assert filtered.cells == raw.cells, step
    print(f"Textual wrote {written} bytes, the filter sent {sent}")
    assert sent * 2 < written


SEQUENCES = ["\x1b[?25l", "\x1b[2J", "\x1b[0;1;1H", "\x1b[3C", "\x1b7", "\x1b", "\x07", "\t",
             "\x1b[0;1m", "\x1b[1;2;3H", "\x1b[?2026h", "\x1b[12", "\x1b]0;t\x07"]


def textual_frame(rng: random.Random, width: int, height: int) -> str:
    """A write shaped as Textual's compositor makes them every tick (a move to each line,
    segments each in its full style with a reset after it, a line end), now and then with
    something the filter's fast path does not take (a mode, a clear, a relative move, a
    lone ESC, a CUP with three numbers, a reset spelt ``0;``)."""
    out = []
    for _ in range(rng.randint(1, 8)):
        y, x = rng.randrange(height), rng.randrange(width // 2)
        out.append(f"\x1b[{y + 1};{x + 1}H")
        room = width - x
        for _ in range(rng.randint(1, 5)):
            text = rng.choice(TEXTS + ["abc", "GPU 3", "  ", "—"])
            if cell_len(text) > room:
                break
            room -= cell_len(text)
            out.append(f"\x1b[{rng.choice(STYLES) or '0'}m{text}\x1b[0m")
        out.append(rng.choice(["", "\r\n", "\n"]))
    if rng.random() < 0.15:
        out.insert(rng.randrange(len(out) + 1), rng.choice(SEQUENCES))
    return "".join(out)


@pytest.mark.parametrize("seed", range(12))
def test_the_filter_sends_the_bytes_its_reference_sent(seed: int) -> None:
    """The filter made cheaper (issue 35's CPU) sends, write for write, the bytes of the one
    measured before (tests/helpers/termdiff_reference.py), over random frame pairs."""
    from helpers.termdiff_reference import CellDiff as Reference
    rng = random.Random(1000 + seed)
    width, height = rng.choice([(24, 6), (40, 8), (80, 4)])
    new, old = CellDiff(width, height), Reference(width, height)
    start = "\x1b[2J" + "".join(f"\x1b[{y + 1};1H" + " " * width for y in range(height))
    writes = [start] + [rng.choice([textual_frame, frame])(rng, width, height)
                        for _ in range(250)]
    for i, data in enumerate(writes):
        if i == 120:
            new.resize(width, height)
            old.resize(width, height)
        assert new.feed(data) == old.feed(data), (i, data)
