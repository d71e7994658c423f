"""tui/driver.py: the input thread sleeps until input or exit, and still reads every key.

The driver's input loop runs here on a pipe instead of a terminal (its ``fileno``), with
``process_message`` collecting what it would hand the app.
"""

from __future__ import annotations

import asyncio
import os
import selectors
import threading
import time

import pytest
from textual import events

from infertop.tui.driver import LONGEST_WAIT, QuietLinuxDriver, select_timeout


class Collecting(QuietLinuxDriver):
    def __init__(self, *a, **k) -> None:
        super().__init__(*a, **k)
        self.got: list = []
        self.arrived = threading.Event()

    def process_message(self, message) -> None:   # the thread's output, not the app's
        self.got.append(message)
        self.arrived.set()


@pytest.fixture
def driver():
    async def make():
        return Collecting(app=None)

    d = asyncio.run(make())
    r, w = os.pipe()
    d.fileno = r
    thread = threading.Thread(target=d.run_input_thread, daemon=True)
    d.test_thread, d.test_write = thread, w
    yield d
    d.exit_event.set()
    thread.join(5)
    for fd in (r, d.test_write):
        try:
            os.close(fd)
        except OSError:
            pass
    d.exit_event.close()


def count_selects(monkeypatch) -> list:
    """The timeouts of every select the input thread makes from now on."""
    calls: list = []
    real = selectors.SelectSelector.select

    def counting(self, timeout=None):
        calls.append(timeout)
        return real(self, timeout)

    monkeypatch.setattr(selectors.SelectSelector, "select", counting)
    return calls


def keys(d) -> list[str]:
    return [m.key for m in d.got if isinstance(m, events.Key)]


def wait_for(d, n: int, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while len(keys(d)) < n and time.monotonic() < end:
        d.arrived.wait(0.05)
        d.arrived.clear()


def test_keys_typed_are_delivered(driver):
    driver.test_thread.start()
    os.write(driver.test_write, b"q3")
    wait_for(driver, 2)
    assert keys(driver) == ["q", "3"]


def test_a_lone_escape_is_delivered_without_more_input(driver):
    """ESC alone may begin a sequence: the parser waits for its timeout, so the thread must
    wake for that timeout although nothing else arrives."""
    driver.test_thread.start()
    os.write(driver.test_write, b"\x1b")
    wait_for(driver, 1)
    assert keys(driver) == ["escape"]


def test_exit_wakes_the_thread_at_once(driver):
    driver.test_thread.start()
    time.sleep(0.2)                       # blocked in select with nothing to read
    assert driver.test_thread.is_alive()
    driver.exit_event.set()
    driver.test_thread.join(LONGEST_WAIT / 2)
    assert not driver.test_thread.is_alive(), "exit did not wake the input thread"


def test_an_idle_thread_does_not_poll(driver, monkeypatch):
    """Textual's own loop selects every 0.1 s (ten wake-ups a second while idle); this one
    waits until something happens."""
    calls = count_selects(monkeypatch)
    driver.test_thread.start()
    time.sleep(0.6)
    assert len(calls) == 1 and calls[0] == LONGEST_WAIT, calls


def test_the_app_uses_it_where_textual_would_use_its_linux_driver(monkeypatch):
    from textual.drivers.linux_driver import LinuxDriver

    from infertop.tui.app import quiet_driver_class

    class App:
        def __init__(self, chosen):
            self.chosen = chosen

        def get_driver_class(self):
            return self.chosen

    # App: a stand-in with the one method quiet_driver_class reads
    assert quiet_driver_class(App(LinuxDriver)) is QuietLinuxDriver  # type: ignore[arg-type]
    other = type("Other", (LinuxDriver,), {})       # TEXTUAL_DRIVER names another: kept
    assert quiet_driver_class(App(other)) is other  # type: ignore[arg-type]


def test_input_that_ends_is_not_waited_on_again(driver, monkeypatch):
    """The terminal going away without a SIGHUP (or stdin at its end) makes the input
    readable forever: the thread must stop watching it, not spin a core; exit still works."""
    calls = count_selects(monkeypatch)
    driver.test_thread.start()
    os.write(driver.test_write, b"q")
    wait_for(driver, 1)
    os.close(driver.test_write)              # end of input
    time.sleep(0.5)
    assert len(calls) <= 4, f"{len(calls)} selects in 0.5 s after the input ended"
    driver.exit_event.set()
    driver.test_thread.join(LONGEST_WAIT / 2)
    assert not driver.test_thread.is_alive()
    assert keys(driver) == ["q"]


def test_the_wait_follows_the_parsers_escape_timeout_and_never_spins():
    class Parser:
        _timeout_time: float | None     # declared, not set: the test deletes it below

    p = Parser()
    p._timeout_time = None                       # nothing pending: sleep until input
    assert select_timeout(p, 100.0) == LONGEST_WAIT
    p._timeout_time = 100.25                     # a lone ESC due in 0.25 s
    assert select_timeout(p, 100.0) == pytest.approx(0.25)
    p._timeout_time = 99.0                       # overdue: at once
    assert select_timeout(p, 100.0) == 0.0
    del p._timeout_time                          # a Textual that keeps it elsewhere
    assert select_timeout(p, 100.0) == 0.1       # Textual's own polling, not 0 (a spin)


# ---- writes to a terminal that reads nothing, or is gone (issue 22) ----------------------
class _Stuck:
    """A writer thread's file that blocks until released, like a terminal nobody reads."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.written: list[str] = []

    def write(self, text: str) -> int:
        self.release.wait()
        self.written.append(text)
        return len(text)

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        return 1


@pytest.fixture
def writing(monkeypatch):
    """A driver whose writer thread writes to a _Stuck file; deadlines recorded, not
    armed (one would end the test process)."""
    from textual.drivers._writer_thread import MAX_QUEUED_WRITES, WriterThread

    import infertop.tui.driver as drv
    deadlines: list = []
    monkeypatch.setattr(drv, "exit_deadline", lambda *a, **k: deadlines.append(a))

    async def make():
        return Collecting(app=None)

    d = asyncio.run(make())
    d.cells = None     # every write reaches the queue (the cell filter would drop repeats)
    stuck = _Stuck()
    out = drv.TerminalOutput(stuck, d.lose_terminal)
    d._writer_thread = WriterThread(out)  # type: ignore[arg-type]  # file-like, as the driver's
    d._writer_thread.start()
    for _ in range(MAX_QUEUED_WRITES + 1):   # one in the write, the queue full
        d.write("frame")
    d.stuck, d.deadlines = stuck, deadlines
    yield d
    stuck.release.set()
    d.leaving = True
    d.close()


def test_a_slow_terminal_is_waited_on_while_the_screen_runs(writing):
    done = threading.Event()

    def write_late() -> None:
        writing.write("late")
        done.set()
    threading.Thread(target=write_late, daemon=True).start()
    assert not done.wait(1.5)                 # 3 slices of WRITE_WAIT: still waiting
    writing.stuck.release.set()               # the link recovers
    assert done.wait(10)
    writing.close()
    assert writing.stuck.written[-1] == "late" and not writing.terminal_lost


def test_once_leaving_a_write_is_dropped_instead_of_waiting_for_ever(writing):
    writing.leaving = True                    # shutdown began, or a signal came
    t0 = time.monotonic()
    writing.write("\x1b[?1000l")
    writing.close()                           # never waits on the stuck writer for long
    assert time.monotonic() - t0 < 10         # was: blocked for ever (WRITE_WAIT: 0.5 s)
    assert not writing.terminal_lost


def test_a_write_error_is_a_lost_terminal_and_later_writes_are_dropped(monkeypatch):
    from textual.drivers._writer_thread import WriterThread

    import infertop.tui.driver as drv
    deadlines: list = []
    monkeypatch.setattr(drv, "exit_deadline", lambda *a, **k: deadlines.append(a))

    class Gone:
        def write(self, text):
            raise OSError(5, "Input/output error")

        def flush(self):
            raise OSError(5, "Input/output error")

    exits: list = []
    app = type("App", (), {"exit": lambda self, *a: exits.append(a)})()

    async def make():
        d = Collecting(app=app)
        out = drv.TerminalOutput(Gone(), d.lose_terminal)
        d._writer_thread = WriterThread(out)  # type: ignore[arg-type]  # file-like, as the driver's
        d._writer_thread.start()
        for _ in range(100):                  # more than the queue holds: none blocks
            d.write("frame")
        for _ in range(1000):                 # the exit request, made from the writer
            if exits:
                break
            await asyncio.sleep(0.02)
        return d

    d = asyncio.run(asyncio.wait_for(make(), 30))
    assert d.terminal_lost and deadlines == [(drv.TERMINAL_LOST,)]
    assert exits == [(None, drv.TERMINAL_LOST)]        # the app is asked to leave, 129
    assert d._writer_thread.is_alive()        # it drains the queue, no traceback
    d.close()
    assert not d._writer_thread.is_alive()


class _Queued:
    """A writer thread that keeps what it was given."""

    def __init__(self) -> None:
        self.items: list = []
        self._queue = self

    def is_alive(self) -> bool:
        return True

    def put(self, item, timeout=None) -> None:
        self.items.append(item)


@pytest.mark.parametrize("write_all", ["", "1"])
def test_writes_reach_the_terminal_through_the_cell_filter(monkeypatch, write_all):
    """Only changed cells are queued (tui/termdiff.py); INFERTOP_WRITE_ALL=1 queues
    Textual's bytes as they are."""
    monkeypatch.setenv("INFERTOP_WRITE_ALL", write_all)

    async def make():
        return Collecting(app=None)

    d = asyncio.run(make())
    d._writer_thread = writer = _Queued()
    monkeypatch.setattr(d, "_get_terminal_size", lambda: (20, 4))
    frame = "\x1b[2;1H\x1b[1mGPU 0 71 %\x1b[0m"
    d.write(frame)
    d.write(frame)
    d.write(frame.replace("71", "72"))
    if write_all:
        assert d.cells is None and writer.items == [frame, frame, frame.replace("71", "72")]
    else:
        assert len(writer.items) == 2 and "GPU 0" in writer.items[0]
        assert writer.items[1] == "\x1b[2;8H2"
