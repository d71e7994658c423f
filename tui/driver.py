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
"""

from __future__ import annotations

import os
import selectors
import threading
from codecs import getincrementaldecoder

from textual._loop import loop_last
from textual._time import get_time
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver

# Upper bound on one wait even with nothing pending: a lost wake-up costs at most this.
LONGEST_WAIT = 30.0
POLL_AS_TEXTUAL = object()   # the parser has no _timeout_time (another Textual)


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


class QuietLinuxDriver(LinuxDriver):
    """LinuxDriver whose input thread blocks until a key, a resize report or exit."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Textual's exit_event, typed there as a plain Event: ours is kept as what it is
        self.exit_event = self._waking = WakingEvent()

    def close(self) -> None:
        super().close()
        self._waking.close()

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

        def process_selector_events(selector_events, final: bool = False) -> None:
            keys = [(key, mask) for key, mask in selector_events if key.fd == fileno]
            if len(keys) != len(selector_events):
                exit_event.drain()
            for last, (_key, mask) in loop_last(keys):
                if mask & EVENT_READ:
                    data = read(fileno, 1024 * 4)
                    if not data:
                        # the input ended (the terminal went away without a SIGHUP, or
                        # stdin is not a terminal): stop waiting on it, or every select
                        # returns at once and this thread spins a core
                        watching[0] = False
                        selector.unregister(fileno)
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
