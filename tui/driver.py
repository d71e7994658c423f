"""Textual's Linux driver with an input thread that sleeps until there is input.

Textual's LinuxDriver reads keys in a thread that wakes ten times a second (select with a
0.1 s timeout) to look at its exit flag and the parser's escape-key timeout.  On an idle
screen that is all the CPU a Textual app uses: 0.43 % of a core measured on the dev box
for an app that draws nothing (0.13 % at one wake a second), a sixth of infertop's whole
budget beside nvitop (issue 11, benchmarks/bench_cpu_vs_nvitop.py prints it per thread).

This driver's thread waits with no timeout unless the parser holds a lone ESC that it
must time out, and its exit flag writes to a pipe the thread also waits on, so leaving
(``q``, suspend) still wakes it at once.  The loop is Textual 8.2's ``run_input_thread``
otherwise line for line (pinned in pyproject.toml; tests/test_quiet_driver.py runs it on
a pipe: keys, a lone ESC after its timeout, prompt exit).

It also survives its terminal going away (issue 22: an SSH session dropped under a shell
left infertop deadlocked for good, deaf to SIGTERM).  The hang was: the hangup's SIGCONT
made Textual's handler start application mode a second time (a second writer thread, not
suspended before); that writer died on EIO, and the next 30 writes filled its queue, so
the main thread blocked for ever in ``Queue.put`` inside ``App._shutdown``.  Here SIGCONT
resumes only what SIGTSTP suspended; a write error (EIO), the end of input on a terminal
or a writer that died is a lost terminal: later writes are dropped and the app is asked
to exit (status 129, as after SIGHUP).  A terminal that is there but reads nothing (a
frozen session) is waited on as Textual does while the screen runs, since it may come
back; once the app is leaving (``leaving``: shutdown began, or a signal came), a write
waits at most WRITE_WAIT and is dropped, and ``close`` never waits on the writer longer.
``exit_deadline`` is the last guard: the process is gone EXIT_GRACE after it was asked.

Every write goes through tui/termdiff.py's CellDiff first, so only the cells that changed
reach the terminal (issue 35: bytes over SSH; INFERTOP_WRITE_ALL=1 turns it off).

Textual's private modules come through tui/textual_gate.py, and the private attributes of
LinuxDriver this class uses are listed there: tui/app.py picks this driver only on the
Textual versions the gate knows (elsewhere Textual's LinuxDriver runs, without the
lost-terminal guard above; ``exit_deadline`` still ends a process a signal asked to end).
"""

from __future__ import annotations

import os
import queue
import selectors
import signal
import threading
from codecs import getincrementaldecoder
from typing import Any

from textual.drivers.linux_driver import LinuxDriver

from infertop.probes.base import exit_deadline as _exit_deadline

from .termdiff import CellDiff
from .textual_gate import XTermParser, get_time, loop_last

# Upper bound on one wait even with nothing pending: a lost wake-up costs at most this.
LONGEST_WAIT = 30.0
# While leaving, the longest a write (or the writer's stop) waits on a terminal that
# reads nothing before it is dropped; also the slice in which a running screen's blocked
# write looks at ``leaving`` again.
WRITE_WAIT = 0.5
# After the app was asked to exit (signal, lost terminal), the process ends within this
# however shutdown goes: recordings are flushed line by line, so a forced end keeps every
# tick written (a gzip file then lacks only its trailer, which readers tolerate).
EXIT_GRACE = 1.5
TERMINAL_LOST = 128 + signal.SIGHUP    # the status a shell shows after a hangup
POLL_AS_TEXTUAL = object()   # the parser has no _timeout_time (another Textual)
# Set to 1 to write Textual's bytes as they are (no tui/termdiff.py filter): for comparing
# bytes, or a terminal the filter gets wrong.
WRITE_ALL_ENV = "INFERTOP_WRITE_ALL"


def exit_deadline(code: int, seconds: float = EXIT_GRACE, restore: Any = None,
                  fd: int = -1) -> threading.Timer:
    """probes.base.exit_deadline with the screen's grace (EXIT_GRACE)."""
    return _exit_deadline(code, seconds, restore, fd)


class WakingEvent(threading.Event):
    """A threading.Event whose ``set`` also writes a byte to a pipe, so a thread blocked in
    select on the pipe's read end sees it without polling."""

    def __init__(self) -> None:
        super().__init__()
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        os.set_blocking(self.write_fd, False)

    def set(self) -> None:
        super().set()
        try:
            os.write(self.write_fd, b"x")
        except OSError:      # the pipe is full (already woken) or closed: the flag is set
            pass

    def drain(self) -> None:
        try:
            while os.read(self.read_fd, 512):
                pass
        except OSError:      # BlockingIOError: empty
            pass

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            try:
                os.close(fd)
            except OSError:
                pass


def select_timeout(parser, now: float) -> float:
    """How long the input thread may wait for input: until the parser's escape timeout is
    due (a lone ESC), else LONGEST_WAIT; a parser without ``_timeout_time`` (a Textual that
    keeps it elsewhere) gets Textual's own 0.1 s polling back, never a busy loop."""
    due = getattr(parser, "_timeout_time", POLL_AS_TEXTUAL)
    if due is None:
        return LONGEST_WAIT
    if due is POLL_AS_TEXTUAL or not isinstance(due, (int, float)):
        return 0.1
    return max(0.0, min(LONGEST_WAIT, due - now))


class TerminalOutput:
    """The terminal file the writer thread writes to, made to outlive the terminal: a
    write or flush that fails (EIO once the terminal is hung up) calls ``lost`` and is
    dropped, so Textual's writer thread keeps draining its queue instead of dying with a
    traceback and leaving the queue to fill."""

    def __init__(self, file, lost) -> None:
        self._file = file
        self._lost = lost
        self.dead = False

    def write(self, text: str) -> int:
        if not self.dead:
            try:
                return self._file.write(text)
            except (OSError, ValueError):     # EIO, EPIPE; ValueError: closed file
                self._die()
        return len(text)

    def flush(self) -> None:
        if not self.dead:
            try:
                self._file.flush()
            except (OSError, ValueError):
                self._die()

    def _die(self) -> None:
        self.dead = True
        self._lost()

    def __getattr__(self, name: str):
        return getattr(self._file, name)


class QuietLinuxDriver(LinuxDriver):
    """LinuxDriver whose input thread blocks until a key, a resize report or exit."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Textual's exit_event, typed there as a plain Event: ours is kept as what it is
        self.exit_event = self._waking = WakingEvent()
        self.terminal_lost = False
        self.leaving = False          # shutting down, or a signal asked to: do not wait
        self._suspended_by_tstp = False
        # the writer thread writes here (Textual's Driver keeps it as a TextIO)
        self._file = TerminalOutput(self._file, self.lose_terminal)  # type: ignore[assignment]
        # only the cells that changed reach the terminal (tui/termdiff.py)
        self.cells: CellDiff | None = None
        if os.environ.get(WRITE_ALL_ENV, "") in ("", "0"):
            self.cells = CellDiff(*self._get_terminal_size())

    # ---- a terminal that goes away -----------------------------------------------------
    def lose_terminal(self) -> None:
        """The terminal is gone (hangup seen on input, writer dead or stuck): drop every
        later write and ask the app to exit as after SIGHUP, with a deadline.  Any thread."""
        if self.terminal_lost:
            return
        self.terminal_lost = True
        self.leaving = True
        exit_deadline(TERMINAL_LOST, restore=getattr(self, "attrs_before", None),
                      fd=self.fileno)
        loop = self._loop    # Textual's Driver: the app's event loop
        if not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._app.exit, None, TERMINAL_LOST)
            except RuntimeError:
                pass   # the loop closed meanwhile: the app is leaving anyway

    def write(self, data: str) -> None:
        """Queue ``data`` for the writer thread (Textual's write blocks for ever on a full
        queue, also one whose writer died).  Dropped once the terminal is gone; while the
        screen runs a full queue is waited on in WRITE_WAIT slices (a slow or frozen link
        may recover), and dropped once the app is leaving."""
        writer = self._writer_thread
        if self.terminal_lost or writer is None:
            return
        cells = self.cells
        if cells is not None:
            size = self._get_terminal_size()     # what Textual draws for (a resize: all)
            if size != (cells.cols, cells.rows):
                cells.resize(*size)
            data = cells.feed(data)
            if not data:
                return
        while writer.is_alive():
            try:
                writer._queue.put(data, timeout=WRITE_WAIT)   # Textual 8.2's WriterThread
                return
            except queue.Full:
                if self.leaving or self.terminal_lost:
                    return
        self.lose_terminal()

    def start_application_mode(self) -> None:
        # also on resume after Ctrl+Z, whose suspend went through disable_input
        self.leaving = bool(getattr(self._app, "_exit_signalled", False))
        super().start_application_mode()

    def disable_input(self) -> None:
        """Textual's first step of shutdown: from here no write waits on the terminal."""
        self.leaving = True
        super().disable_input()

    def close(self) -> None:
        """Stop the writer thread without waiting on a terminal that does not read."""
        writer = self._writer_thread
        if writer is not None and writer.is_alive():
            try:
                writer._queue.put(None, timeout=WRITE_WAIT)
            except queue.Full:
                pass   # stuck on a terminal that reads nothing: the daemon is left behind
            else:
                writer.join(WRITE_WAIT)
        self._waking.close()

    # ---- suspend and resume ------------------------------------------------------------
    def _sigtstp_application(self, *args) -> None:
        self._suspended_by_tstp = self._auto_restart
        super()._sigtstp_application(*args)

    def _sigcont_application(self, *args) -> None:
        """Resume only what SIGTSTP suspended.  A terminal hangup sends SIGCONT too, and
        Textual's handler then started application mode again over the running one: a
        second writer thread on the dead terminal, the first step of the hang."""
        if not self._suspended_by_tstp:
            return
        self._suspended_by_tstp = False
        super()._sigcont_application(*args)

    def run_input_thread(self) -> None:
        """Wait for input and dispatch events (Textual's loop, with waits that end only
        on input, on exit, or when the parser's escape timeout is due)."""
        exit_event = self._waking
        selector = selectors.SelectSelector()   # as Textual's: also works on a file
        selector.register(self.fileno, selectors.EVENT_READ)
        selector.register(exit_event.read_fd, selectors.EVENT_READ)

        fileno = self.fileno
        EVENT_READ = selectors.EVENT_READ

        parser = XTermParser(self._debug)
        feed = parser.feed
        tick = parser.tick
        decode = getincrementaldecoder("utf-8")().decode
        read = os.read

        watching = [True]    # input still open (False after its end: nothing to wait on)
        on_tty = os.isatty(fileno)

        def process_selector_events(selector_events, final: bool = False) -> None:
            keys = [(key, mask) for key, mask in selector_events if key.fd == fileno]
            if len(keys) != len(selector_events):
                exit_event.drain()
            for last, (_key, mask) in loop_last(keys):
                if mask & EVENT_READ:
                    try:
                        data = read(fileno, 1024 * 4)
                    except OSError:      # EIO: the terminal was hung up
                        data = b""
                    if not data:
                        # the input ended (the terminal went away without a SIGHUP, or
                        # stdin is not a terminal): stop waiting on it, or every select
                        # returns at once and this thread spins a core
                        watching[0] = False
                        selector.unregister(fileno)
                        if on_tty:       # raw mode has no EOF key: this is a hangup
                            self.lose_terminal()
                        break
                    unicode_data = decode(data, final=final and last)
                    if not unicode_data:
                        break    # part of a character: the rest comes with the next read
                    for event in feed(unicode_data):
                        self.process_message(event)
            for event in tick():
                self.process_message(event)

        try:
            while not exit_event.is_set():
                process_selector_events(selector.select(select_timeout(parser, get_time())))
            if watching[0]:
                selector.unregister(self.fileno)
            process_selector_events(selector.select(0.1), final=True)
        finally:
            selector.close()
