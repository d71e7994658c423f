"""The infertop screen: header, findings strip, six layer panes, status line.

One poll timer drives everything.  A tick that finds the previous poll still running is
skipped and counted (never queued); the poll itself awaits the source (probes run in
their own threads or as async I/O), feeds the pipeline and applies the Frame in one
batch_update.  Nothing here blocks the event loop.
"""

from __future__ import annotations

import asyncio
import gc
import os
import queue
import signal
import socket
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import events, on, work
from textual.app import App, ComposeResult, ScreenStackError
from textual.binding import Binding
from textual.containers import Container
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Static

from infertop import __version__
from infertop.meta import meta_url
from infertop.model import Status
from infertop.pipeline import Frame, Pipeline
from infertop.probes.sources.hub import deadline_for
from infertop.source import SnapshotSource, pace
from infertop.textclean import clean
from infertop.themes import DEFAULT_THEME, THEMES, roles, stylesheet_path

from . import textual_gate
from .compositor import use_lean_compositor
from .mute import Mutes
from .options import AppOptions, CaptureSummaries
from .panes.cells import TickMemo
from .panes.context import FrameLookups
from .panes.decoding import DecodingPane
from .panes.hardware import HardwarePane
from .panes.kernels import KernelsPane
from .panes.memory import MemoryPane
from .panes.parallelism import ParallelismPane
from .panes.scheduling import SchedulingPane
from .panes.widget import LayerPane
from .widgets.bar import Bar
from .widgets.filter_line import FilterLine
from .widgets.history_plot import HistoryPlot, sync_history_plot, toggle_history_plot
from .widgets.keybar import KeyBar
from .zoom_table import ZOOM_BINDINGS

if TYPE_CHECKING:    # imported when `R` is pressed (aiofiles)
    from infertop.probes.sources.recorder import Recorder

PANE_CLASSES: tuple[type[LayerPane], ...] = (HardwarePane, KernelsPane, MemoryPane,
                                             SchedulingPane, ParallelismPane, DecodingPane)
INTERVALS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0)


# how long the first paint waits for the first snapshot's draw (_first_frame_first)
FIRST_FRAME_WAIT = 0.3
MIN_SIZE = (80, 24)   # below this the panes cannot show a reading per GPU: say so


def strip_text(findings, styles: dict[str, str], width: int, lines: int,
               lead=None) -> Text:
    """The findings strip in ``lines`` rows of ``width``, in the Diagnoser's order (worst
    chain first, each cause before the symptoms it explains; never re-sorted here).  The
    first finding shows its code, title and value ("MEM-001 KV cache full · e0 KV usage
    98 % >= 95 %"): its title gives way word by word, never its code or value.  The others
    follow as code and title, then bare codes, and what still does not fit is "+N more
    (f)".  ``lead(finding)``: what goes before each code, in bold (the fleet's node and a
    space), part of the finding like its code."""
    lead_of = lead or (lambda f: "")
    ordered = list(findings)
    if not ordered:
        return Text()
    room = width * lines - 1 if lines > 1 else width
    head, others = ordered[0], ordered[1:]
    style = styles.get(head.severity.value, "")
    value = finding_value(head)
    tail_room = len(f"  +{len(others)} more (f)") if others else 0
    head_lead = lead_of(head)
    title = fit_words(head.title, room - tail_room - len(head_lead) - len(head.code) - 1
                      - (len(value) + 3 if value else 0))
    t = Text()
    if head_lead:
        t.append(head_lead, style="bold")
    t.append(head.code, style=style)
    if title:
        t.append(f" {title}")
    if value:
        t.append(f" · {value}", style=style)
    if not others:
        return t
    left = room - t.cell_len
    leads = [lead_of(f) for f in others]   # once: pieces() runs once per count of titles

    def pieces(titles: int) -> list[str]:
        return [leads[n] + f.code + (f" {f.title}" if n < titles else "")
                for n, f in enumerate(others)]

    def draw(parts: list[str], rest: int) -> Text:
        out = t.copy()
        for f, ahead, piece in zip(others, leads, parts):
            out.append("  ")
            if ahead:
                out.append(ahead, style="bold")
            out.append(f.code, style=styles.get(f.severity.value, ""))
            out.append(piece[len(ahead) + len(f.code):])
        if rest:
            out.append(f"  +{rest} more (f)")
        return out

    for titles in range(len(others), -1, -1):   # as many titles as fit, first first
        parts = pieces(titles)
        if 2 * len(parts) + len("  ".join(parts)) <= left:
            return draw(parts, 0)
    parts = pieces(0)
    for k in range(len(parts), -1, -1):
        tail = len(f"  +{len(parts) - k} more (f)")
        if 2 * k + len("  ".join(parts[:k])) + tail <= left:
            return draw(parts[:k], len(parts) - k)
    return draw([], len(parts))


def finding_value(f) -> str:
    """What a finding is about, with its value: 'e0 KV usage 98 % >= 95 %' (its first
    subject; the findings screen, `f`, has them all)."""
    from infertop.evidence_text import short_evidence, subject_evidence
    subjects = subject_evidence(f)
    return clean(short_evidence(subjects[0])) if subjects else ""


def fit_words(text: str, room: int) -> str:
    """``text`` in ``room`` columns, cut between words with "…" ('' when not one word
    fits)."""
    if len(text) <= room:
        return text
    words = text.split()
    out = ""
    for w in words:
        nxt = f"{out} {w}" if out else w
        if len(nxt) + 1 > room:
            break
        out = nxt
    if not out:
        return ""
    return f"{out} …" if out[-1].isdigit() else f"{out}…"   # "engine=0…" reads as a value


async def in_daemon_thread(fn, *args):
    """``fn(*args)`` in infertop's daemon worker thread: unlike asyncio.to_thread (whose
    executor is joined at exit), a long pipeline tick never holds up `q`: the process ends
    without it.  One thread for the process's life, not one per tick: starting a thread
    makes the event loop wait for it to take the GIL, every second."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()

    def run() -> tuple:
        try:
            return fn(*args), None
        except BaseException as e:  # handed to the awaiting coroutine, raised there
            return None, e

    _DaemonWorker.run(run, lambda out: loop.call_soon_threadsafe(_settle, fut, *out))
    return await fut


def settle_garbage_collector() -> None:
    """Once the first frame is drawn: collect, then freeze what is alive (imports, the
    widget tree, caches) out of the collector's sight.  A full collection otherwise
    walks those ~300k objects each time, 41-56 ms twice a minute on the event loop
    (~0.15 % of a core at 1 Hz, measured in place); this costs one such pause, once.
    What is frozen is never collected, which is what long-lived startup objects need
    anyway.  Once per process, and only where the CLI asks (AppOptions.settle_gc): a
    test run's process holds every earlier test's objects."""
    global _gc_settled
    if _gc_settled:
        return
    _gc_settled = True
    gc.collect()
    gc.freeze()
    # and collect the youngest generation every GEN0_THRESHOLD net allocations, not 700:
    # each tick allocates a few thousand objects that live a tick or more (the Frame's
    # indexes, the panes' Text, Textual's strips), so at 700 they were walked three times
    # a tick and again in the middle generation, 2.1 ms a tick on the 8-GPU recording
    # (bench_screen_ticks, gc callbacks); at 10,000 it is one walk every ~2 ticks, 0.7 ms
    # (issue 23).  Cyclic garbage waits a little longer: a few MB at most.
    gc.set_threshold(GEN0_THRESHOLD, *gc.get_threshold()[1:])


GEN0_THRESHOLD = 10_000


_gc_settled = False


class _DaemonWorker:
    """One daemon thread that runs in_daemon_thread's work.  While it is still busy (a
    tick that outlived its app, in tests), work gets a thread of its own, as before.  The
    thread says it is free before it hands the result over, so the next tick, which the
    result lets start at once, finds it free."""

    _queue: queue.SimpleQueue | None = None
    _busy = threading.Lock()

    @classmethod
    def run(cls, job, done) -> None:
        if not cls._busy.acquire(blocking=False):
            threading.Thread(target=lambda: done(job()), name="infertop-pipeline-extra",
                             daemon=True).start()
            return
        if cls._queue is None:
            cls._queue = queue.SimpleQueue()
            threading.Thread(target=cls._serve, args=(cls._queue,), name="infertop-pipeline",
                             daemon=True).start()
        cls._queue.put((job, done))

    @classmethod
    def _serve(cls, jobs: queue.SimpleQueue) -> None:
        while True:
            job, done = jobs.get()
            try:
                out = job()
            finally:
                cls._busy.release()
            try:
                done(out)
            except RuntimeError:   # its event loop closed (the app ended mid-tick): no one
                pass               # waits for it, and the thread must live on for the next


def _settle(fut, result, error) -> None:
    if fut.cancelled():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)


def quiet_driver_class(app: App):
    """QuietLinuxDriver where Textual would use its LinuxDriver (not one named in
    TEXTUAL_DRIVER, not Windows, not a Textual tui/textual_gate.py does not know): its
    input thread does not wake ten times a second."""
    from textual.drivers.linux_driver import LinuxDriver

    from . import textual_gate
    chosen = app.get_driver_class()
    if chosen is not LinuxDriver or not textual_gate.FAST:
        return chosen
    from .driver import QuietLinuxDriver
    return QuietLinuxDriver


def size_classes(screen: Screen, width: int, height: int, update: bool = True) -> bool:
    """The main screen's classes for a terminal of this size; True when it is too small.
    Set once before the first styling too (get_default_screen): added at the first
    resize, each restyled every widget, ~10-30 ms of the first frame at 80x24."""
    screen.set_class(height < 36, "-small", update=update)
    small = width < MIN_SIZE[0] or height < MIN_SIZE[1]
    screen.set_class(small, "-too-small", update=update)
    return small


class UnknownTheme(ValueError):
    """--theme names no registered theme."""


class InfertopApp(App):
    TITLE = "infertop"
    CSS_PATH = stylesheet_path()
    ENABLE_COMMAND_PALETTE = False

    BINDINGS = [
        Binding("q", "quit", "quit"),
        # Ctrl+C quits, as in top, htop and nvitop (Textual's default only says to press
        # ctrl+q, in markup that our plain-text notifications showed as "[b]ctrl+q[/b]")
        Binding("ctrl+c", "quit", "quit", show=False),
        Binding("question_mark,f1", "help", "help", key_display="?"),
        Binding("space,Z", "pause", "pause", key_display="space"),
        Binding("plus,equals_sign", "faster", "faster", key_display="+"),
        Binding("minus", "slower", "slower", key_display="-"),
        *ZOOM_BINDINGS,
        Binding("f", "findings", "findings"),
        Binding("o", "processes", "processes"),
        Binding("R", "record", "record"),
        # the worst finding's evidence and remedy to the clipboard (f: the selected one)
        Binding("y", "copy_finding", "copy finding", show=False),
    ]

    def __init__(self, source: SnapshotSource, *, interval: float = 1.0,
                 pipeline: Pipeline | None = None, theme: str | None = None,
                 options: AppOptions | None = None) -> None:
        super().__init__(driver_class=quiet_driver_class(self))
        self.source = source
        self.interval = interval
        self.pipeline = pipeline or Pipeline()
        self.options = options or AppOptions()
        self.frame: Frame | None = None
        self.body_at = 0.0             # the frames' clock at the last whole draw
        self.repaint_wanted = False    # a key asked for a whole draw (--low-bandwidth)
        self.strip_judged: list[tuple] = []   # the findings the strip last showed (code,
                                              # subject, severity rank)
        self.paused = False
        self.polling = False
        self.overruns = 0
        self.ticks = 0
        self.zoomed: int | None = None
        self.summaries = CaptureSummaries()     # capture results shown in panes
        self.mutes = Mutes()                     # findings acknowledged with `m` in `f`
        self.recorder: Recorder | None = None   # while `R` records
        self._signals: list[int] = []     # the signals whose handlers on_mount set
        self._exit_signalled = False      # a signal asked the app to exit
        self.status_note = ""
        self._timer: Timer | None = None
        self._wake = asyncio.Event()     # the timer's tick, for _serve_ticks
        self._mount_done = False         # on_mount's work done (it is called twice)
        self._first_drawn = asyncio.Event()   # the first poll has drawn (or ended)
        self.role_styles: dict[str, str] = {}
        self._shown: dict[str, Text] = {}
        self._bar_lines: dict[str, tuple[int, int] | None] = {}   # (width, lines) a bar was laid out at
        self._grid_rows = ""    # the panes grid's row sizes set by _fit_grid ("": CSS's)
        self._trends: dict = {}     # sparklines of this trend slot, across ticks (FrameLookups)
        self._values = TickMemo()   # the panes' value cells of this tick and the last one
        self.history_plot_of: tuple | None = None   # (main screen, its plot): _plot_of's
        self.host = socket.gethostname()   # once: the header is drawn every tick
        for extra in THEMES:
            self.register_theme(extra)
        name = theme or DEFAULT_THEME
        if name not in self.available_themes:
            import difflib
            close = difflib.get_close_matches(name, list(self.available_themes), n=1)
            raise UnknownTheme(f"unknown theme {name!r}"
                               + (f" (did you mean {close[0]}?)" if close else "")
                               + "; choose from " + ", ".join(sorted(self.available_themes)))
        self.theme = name

    # -- layout ---------------------------------------------------------------------------
    def get_default_screen(self) -> Screen:
        """Textual's main screen, with a compositor whose partial updates render only the
        rows they write (tui/compositor.py)."""
        screen = super().get_default_screen()
        use_lean_compositor(screen)
        size = self.size      # the terminal's, before anything is styled: on_resize's
        size_classes(screen, size.width, size.height, update=False)  # no restyle (issue 35)
        return screen

    def compose(self) -> ComposeResult:
        yield Bar(self._header_text(), id="header")
        yield Bar("", id="findings-strip", classes="-none")
        yield Bar("", id="banner")
        with Container(id="panes"):
            for cls in PANE_CLASSES:
                yield cls(id=f"pane-{cls.pane_layer.value}")
        yield HistoryPlot(id="history-plot")
        yield Static("", id="too-small")
        yield FilterLine(id="table-filter")
        yield Bar("", id="status")
        yield KeyBar(general=GENERAL_ACTIONS)

    def _shutting_down(self) -> bool:
        """While the app exits, Textual removes the main screen's widgets; a poll that
        finishes then has nothing to draw on (seen as NoMatches in busy test runs)."""
        if not self.screen_stack or not self.is_running:
            return True
        main = self.screen_stack[0]
        # Textual's private flags, through the gate (not part of its API)
        return textual_gate.closing(main) or textual_gate.closing(self)

    def _main_widget(self, selector: str, cls=None):
        """A widget of the main screen, also while a capture or help screen is on top
        (``query_one`` looks at the active screen only, so a tick landing while `p`'s
        screen is open failed with NoMatches)."""
        screen = self.screen_stack[0]
        return screen.query_one(selector, cls) if cls is not None else screen.query_one(selector)

    @property
    def panes(self) -> list[LayerPane]:
        return [self._main_widget(f"#pane-{cls.pane_layer.value}", LayerPane) for cls in PANE_CLASSES]

    async def on_mount(self) -> None:
        self._mount_once()

    def _mount_once(self) -> None:
        """on_mount's work, once: Textual calls each class's on_mount along the MRO, so a
        mode's (LiveApp, DemoApp, FleetApp), which calls this one through super(), was
        followed by a second call of it: the source's worker was started twice (the first
        cancelled), the signal handlers set twice."""
        if self._mount_done:
            return
        self._mount_done = True
        self._exit_on_signals()
        self.role_styles = roles(self.get_css_variables())
        self._main_widget("#status", Static).update("starting sources…")
        self._start_source()

    @on(events.Mount)
    async def _first_frame_first(self, _event: events.Mount) -> None:
        """The first paint shows the first snapshot (issue 35, instant start): Textual paints
        the screen only once the app's Mount handlers have returned, and this one runs after
        every mode's on_mount (a subclass's handlers come first along the MRO, a class's
        @on handlers before its on_mount), so it waits, without blocking the loop, for the
        first tick's draw, at most FIRST_FRAME_WAIT: a source slower than that gets the
        panes' "waiting for the first tick" paint first, as before.  Without it the first
        paint was that placeholder, and the values came ~40 ms later in a second paint."""
        # a mode without its own on_mount has not started yet (not self.on_mount(): a
        # mode's would run its own work, --record's recorder, a second time)
        self._mount_once()
        try:
            await asyncio.wait_for(self._first_drawn.wait(), FIRST_FRAME_WAIT)
        except asyncio.TimeoutError:
            pass

    def _exit_on_signals(self) -> None:
        """SIGTERM (kill, systemd), SIGHUP (the SSH session dropped) and SIGINT (kill -INT;
        Ctrl+C on the terminal is a key in raw mode) end the app the way `q` does: the
        terminal is restored (alternate screen, raw mode, mouse, cursor) and a recording is
        closed by on_unmount.  The default action would kill the process mid-frame.  SIGINT
        went through asyncio's own handler (which cancels the main task) until a CI run
        where the screen never exited after it; the likely cause is a cancel lost
        mid-await, so it takes this deterministic path too.  Exit status 128 + signal, as
        a shell reports a killed program.

        The loop runs that exit only when it gets control back, and a write to a terminal
        that reads nothing holds it (tui/driver.py), so the signal also runs
        ``_signal_now`` at once in the main thread (a Python-level handler; asyncio still
        gets the signal through its wakeup fd): the driver stops waiting on the terminal
        and a deadline is armed, so the process ends within EXIT_GRACE however shutdown
        goes; a second signal ends it at once."""
        loop = asyncio.get_running_loop()
        self._signals = []
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self.exit, None, 128 + sig)
                signal.signal(sig, self._signal_now)
                self._signals.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass   # not the main thread (tests' run_test), or no signals here

    def _signal_now(self, sig: int, _frame: object) -> None:
        from .driver import QuietLinuxDriver, exit_deadline
        if self._exit_signalled:
            os._exit(128 + sig)   # asked twice: the user means it
        self._exit_signalled = True
        driver = textual_gate.app_driver(self)
        if isinstance(driver, QuietLinuxDriver):
            driver.leaving = True     # writes stop waiting on the terminal
        exit_deadline(128 + sig, restore=getattr(driver, "attrs_before", None),  # Textual's
                      fd=getattr(driver, "fileno", -1))    # driver's, Linux drivers only

    def on_resize(self, event) -> None:
        # small terminals (80x24): banner and findings strip give their rows to the panes
        screen = self.screen_stack[0] if self.screen_stack else self.screen
        w, h = event.size.width, event.size.height
        small = size_classes(screen, w, h)
        notice = screen.query("#too-small")
        if small and notice:
            notice.first(Static).update(Text(
                f"terminal too small: {w}x{h}; infertop needs at least "
                f"{MIN_SIZE[0]}x{MIN_SIZE[1]} (resize, or use `infertop snapshot --json`)",
                style="bold"))

    def watch_theme(self, _theme: str) -> None:
        if not hasattr(self, "frame"):   # Textual calls this from App.__init__, before
            return  # ours has set anything (nothing to draw yet)
        self.role_styles = roles(self.get_css_variables())
        if self.frame is not None and self.is_running:
            self.redraw()

    @work(exclusive=True, group="start")
    async def _start_source(self) -> None:
        caps = await self.source.start()
        missing = [f"{c.source}: {c.reason}" for c in caps.values() if not c.available]
        if missing:
            self.status_note = " · ".join(missing)
        await self._poll()
        if not self.options.manual_ticks:   # tests and screenshots drive ticks by hand
            self._timer = self.set_interval(self.wall_interval, self._tick)
            await self._serve_ticks()

    async def _serve_ticks(self) -> None:
        """Poll each time the timer asks, in this one long-lived worker: a Textual worker
        per tick (created, scheduled, three state-change messages) was ~4 % of the event
        loop's samples at 1 Hz.  A crash still ends the app as a worker's does, and the
        worker is cancelled with the others when the app exits."""
        wake = self._wake
        while True:
            await wake.wait()
            wake.clear()
            await self._poll()

    @property
    def wall_interval(self) -> float:
        return pace(self.source.realtime, self.interval, float(self.options.speed or 1.0),
                    floor=0.02)

    # -- the tick -------------------------------------------------------------------------
    def _tick(self) -> None:
        if self.paused:
            return
        if self.polling:
            self.overruns += 1
            return
        self._wake.set()      # _serve_ticks polls

    async def _poll(self) -> None:
        self.polling = True
        try:
            snap = await self.source.next()
            if snap is None:
                self.paused = True
                self.status_note = self.end_note
                self._update_status()
                return
            # History, derived readings and rules in a thread: with thousands of series
            # they take long enough to hold `q` up (the panes draw only after it returns,
            # and the next feed starts only after they drew: one poll at a time)
            frame = await in_daemon_thread(self._feed, snap, self.source.epoch)
            self.ticks += 1
            await self.after_snapshot(snap, frame)
            if not self.screen_stack:   # the app is closing: nothing left to draw on
                return
            try:
                self._draw_tick(frame)
            except (NoMatches, ScreenStackError):
                if self._shutting_down():   # a tick that outlived the screen (`q` mid-poll)
                    return
                raise
            if self.ticks == 1 and self.options.settle_gc:
                # after the first frame is painted: its collection (20-50 ms) held up
                # the first full frame when it ran here (issue 35)
                self.call_after_refresh(settle_garbage_collector)
        finally:
            self.polling = False
            self._first_drawn.set()   # _first_frame_first stops waiting

    # what the status line says when a finite source (a replay) has ended
    end_note = "end of recording: press [ or { to go back, q to quit"

    def _feed(self, snap, epoch, prepare: bool = True) -> Frame:
        """The pipeline's tick and (``prepare``) the indexes the panes read through, in its
        thread; a tick that will not be drawn skips the indexes."""
        frame = self.pipeline.feed(snap, epoch)
        return frame.prepare() if prepare else frame

    async def after_snapshot(self, snap, frame: Frame) -> None:
        """Hook for recording and samplers (kept out of _apply: may await I/O)."""
        recorder = self.recorder
        if recorder is not None:
            try:
                await recorder.write(snap)
            except Exception as e:  # a full disk stops the recording, not the screen
                self.recorder = None
                self.notify(f"recording stopped: {e}", severity="error", timeout=8)

    def _draw_tick(self, frame: Frame) -> None:
        """A tick's drawing: all of it; with ``--low-bandwidth N`` (AppOptions) the body
        (header, banner, panes, status) only at N-second marks of the frames' clock or
        after a key, and between them the findings strip alone when a finding came, went
        or changed severity, so a new or worsened finding still shows at once (over a
        slow link every repainted cell is paid)."""
        every = self.options.low_bandwidth
        if not every:
            self._apply(frame)
            return
        now = frame.time
        # the strip's findings as they matter between marks: which, and how bad (their
        # titles carry live values, redrawn with the body)
        judged = [(f.code, f.subject, f.severity.rank) for f in frame.findings]
        if self.frame is not None and not self.repaint_wanted \
                and 0 <= now - self.body_at < every:
            self.frame = frame       # keys and redraws act on the newest
            if judged != self.strip_judged:
                self.strip_judged = judged
                self._update_strip(frame)
            return
        self.body_at = now
        self.strip_judged = judged
        self.repaint_wanted = False
        self._apply(frame)

    async def on_event(self, event: events.Event) -> None:
        # (asked before Textual forwards it to the screen, which marks it forwarded)
        key = self.options.low_bandwidth and isinstance(event, events.Key) \
            and not event.is_forwarded
        await super().on_event(event)
        if key:
            # a key repaints at once: its own action drew what it changed, this draws
            # the newest frame the low-bandwidth ticks held back
            self.repaint_wanted = True
            self.call_later(self._repaint_after_key)

    def _repaint_after_key(self) -> None:
        frame = self.frame
        if not self.repaint_wanted or frame is None or self.polling or not self.screen_stack:
            return           # a poll in flight draws it all (repaint_wanted) when done
        self.body_at = frame.time
        self.repaint_wanted = False
        self._apply(frame)

    def _apply(self, frame: Frame) -> None:
        self.frame = frame
        with self.batch_update():
            self._set_text("#header", self._header_text(frame), layout=False)
            self._update_strip(frame)
            self.update_banner()
            self._values.turn()
            lookups = FrameLookups(frame, self.role_styles, summaries=self.summaries,
                                   trends=self._trends, values=self._values)
            self._fit_grid(frame)
            for pane in self.panes:
                if pane.display:
                    pane.show(lookups)
            sync_history_plot(self, frame)
            self._update_status()
            from .screens.processes import ProcessScreen
            top = self.screen
            if isinstance(top, ProcessScreen):   # drawn on every tick while it is on top
                top.show(self)

    def _fit_grid(self, frame: Frame | None) -> None:
        """80x24 with many GPUs: the hardware row of the grid grows to one line per GPU
        (nvitop's compact mode), the other two rows keep at least 3 lines each."""
        rows = ""
        screen = self.screen_stack[0]
        if frame is not None and self.zoomed is None and screen.has_class("-small"):
            gpus = len(frame.by_label("gpu.info", "gpu").keys()
                       | frame.by_label("gpu.util_ratio", "gpu").keys())
            area = self._main_widget("#panes").size.height
            want = gpus + 2            # title line, column header, a line per GPU
            if want > area // 3:
                rows = f"{max(area // 3, min(want, area - 2 * 4))} 1fr 1fr"
        if rows != self._grid_rows:
            self._grid_rows = rows
            self._main_widget("#panes").styles.grid_rows = rows or None

    # -- header, strip, status ------------------------------------------------------------
    def _header_text(self, frame: Frame | None = None) -> Text:
        """'infertop 0.1 ✓nvml ✓server ✗proc  gpu-box  vllm Llama-3.1-8B  8 GPU  1s': the
        sources' state first, as glyphs (✓ read, ~ stale, ✗ failed, – not available), then
        what is watched; at 80 columns the URL, then the host go first, and the model's
        name is cut at its end (never a glyph or a count)."""
        width = max(20, (self.size.width or 80) - 2)
        t = Text()
        t.append(f"infertop {__version__}", style="bold")
        if frame is None:
            t.append(f"  {self.host}")
            return t
        snap = frame.snapshot
        styles = self.role_styles
        pm = snap.process_meta()
        for name, s in sorted(snap.samples.items()):
            short = name.split(":", 1)[0]
            if short == "process" and s.status is Status.OK and pm is not None and \
                    pm.server is None:     # host readings only: no server process found
                t.append(" –process", style=styles.get("muted", ""))
            elif s.status is Status.OK:
                t.append(f" ✓{short}", style=styles.get("ok", ""))
            elif s.status is Status.STALE:
                t.append(f" ~{short}", style=styles.get("warn", ""))
            elif s.status is Status.NODATA:   # working, nothing to read (no KV events)
                t.append(f" –{short}", style=styles.get("muted", ""))
            else:
                t.append(f" ✗{short}", style=styles.get("crit", ""))
        for name, cap in sorted(snap.capabilities.items()):
            if not cap.available:
                t.append(f" –{name.split(':', 1)[0]}", style=styles.get("muted", ""))
        sm, nm = snap.server_meta(), snap.nvml_meta()
        kind = (sm.dialect if sm else None) or (pm.server.kind if pm and pm.server else None)
        model = clean(str((sm.model if sm else None) or ""))
        url = clean(str(meta_url(snap) or ""))
        if url and sm is not None and sm.container:   # a server in a container or pod
            url += f" [{clean(sm.container)}]"
        engines = sm.engines if sm else None
        gpus = nm.gpus if nm else None
        counts = f"  {len(gpus) if gpus else 0} GPU" + \
            (f"  {len(engines)} engines" if engines and len(engines) > 1 else "") + \
            f"  {self.interval:g}s"
        kind_s = f"  {kind}" if kind else ""
        host = f"  {self.host}"
        free = width - t.cell_len - len(counts) - len(kind_s)
        if model:     # what is served says more than where: the host, then the URL go first
            if free < len(host) + 1 + len(model):
                host = ""
            if len(model) > free - 1:    # the org goes, then the name's end
                model = model.rsplit("/", 1)[-1]
            if len(model) > free - 1:
                from .panes.columns import cut_cell
                model = cut_cell(Text(model), max(2, free - 1)).plain
        elif free < len(host):
            host = ""
        t.append(host)
        if kind_s:
            t.append(kind_s, style=styles.get("accent", "bold"))
        if model:
            t.append(f" {model}")
        if url and t.cell_len + len(counts) + len(url) + 2 <= width:
            t.append(f"  {url}")
        t.append(counts)
        return t

    def _update_strip(self, frame: Frame) -> None:
        strip = self._main_widget("#findings-strip", Static)
        shown, muted = self.mutes.split(frame.findings, frame.time)
        if not shown and not muted:
            strip.set_class(True, "-none")
            self._shown.pop("#findings-strip", None)
            return
        strip.set_class(False, "-none")
        small = self.screen_stack[0].has_class("-small")
        width = max(20, self.size.width - 2)
        note = f"  ({muted} muted: f)" if muted else ""
        text = strip_text(shown, self.role_styles, width - len(note), 1 if small else 3) \
            if shown else Text()
        if note:        # acknowledged ones are not gone: said, dimmed, at the end
            text.append(note.lstrip() if not shown else note,
                        style=self.role_styles.get("muted", "dim"))
        self._set_text("#findings-strip", text)

    def _update_status(self) -> None:
        parts = []
        if self.paused:
            parts.append("PAUSED")
        parts.append(self.tick_text())
        if self.overruns:
            parts.append(f"{self.overruns} late ticks skipped")
        rec = self.recorder
        if rec is not None:
            parts.append(f"● REC {rec.path}")
        if self.status_note:
            parts.append(self.status_note)
        self._set_text("#status", Text(" · ".join(parts)), layout=False)

    def update_banner(self) -> None:
        """Demo and replay sources describe themselves in the banner (see cli wiring)."""
        banner = self._main_widget("#banner", Static)
        text = self.banner_text()
        banner.set_class(bool(text), "-visible")
        if text:
            self._set_text("#banner", text)

    def banner_text(self) -> Text | None:
        return None

    def tick_text(self) -> str:
        """The status line's clock (a replay counts on the recording's timeline)."""
        return f"tick {self.ticks}"

    def clock_text(self, t: float) -> str:
        """A finding's raise or clear time as this screen tells time (replay: the
        recording's, like its banner)."""
        return time.strftime("%H:%M:%S", time.localtime(t))

    def _set_text(self, selector: str, text: Text, layout: bool = True) -> None:
        """Update a bar only when its text changed (a repaint costs more than a compare)."""
        if self._shown.get(selector) == text:
            return
        self._shown[selector] = text
        widget = self._main_widget(selector, Static)
        widget.update(text, layout=False)
        if layout:
            # a bar of auto height (strip, banner) needs a layout only when the number of
            # lines it wraps to changes: a reflow of the whole screen was ~10 % of the main
            # thread's work at 1 Hz, paid each time a finding's value moved (issue 23)
            width = widget.content_region.width
            lines = (width, widget.visual.get_height(widget.styles, width)) if width > 0 else None
            if lines is None or lines != self._bar_lines.get(selector):
                self._bar_lines[selector] = lines
                widget.refresh(layout=True)

    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        """Every toast: plain text (a path like ``/x/[/x].jsonl`` or a server's error is
        not Textual markup) with control characters made visible."""
        super().notify(clean(str(message), multiline=True), title=clean(title),
                       severity=severity, timeout=timeout, markup=markup)

    # -- actions --------------------------------------------------------------------------
    # what a read-only screen (`infertop serve`) refuses: it writes on this machine
    WRITE_ACTIONS: frozenset[str] = frozenset({"record"})

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.options.read_only and action in self.WRITE_ACTIONS:
            return False       # not run, and not offered on the key line
        return super().check_action(action, parameters)

    def action_pause(self) -> None:
        self.paused = not self.paused
        self._update_status()

    def _set_interval(self, interval: float) -> None:
        self.interval = interval
        if self.source.deadline is not None:   # a source waiting on probes (Hub, FleetHub)
            # must answer within its tick
            self.source.deadline = deadline_for(interval)
        if self._timer is not None:
            self._timer.stop()
        if not self.options.manual_ticks:   # tests drive ticks by hand: no timer then either
            self._timer = self.set_interval(self.wall_interval, self._tick)
        if self.frame is not None:
            self._main_widget("#header", Static).update(self._header_text(self.frame))
        self.notify(f"interval {interval:g} s", timeout=2)

    def action_faster(self) -> None:
        smaller = [i for i in INTERVALS if i < self.interval]
        if smaller:
            self._set_interval(smaller[-1])

    def action_slower(self) -> None:
        larger = [i for i in INTERVALS if i > self.interval]
        if larger:
            self._set_interval(larger[0])

    def action_zoom(self, index: int) -> None:
        container = self._main_widget("#panes")
        if self.zoomed == index:
            self.zoomed = None
        else:
            self.zoomed = index
        for i, pane in enumerate(self.panes):
            pane.display = self.zoomed is None or i == self.zoomed
        container.set_class(self.zoomed is not None, "-zoomed")
        self._fit_grid(self.frame)
        self.screen_stack[0].refresh_bindings()   # the key line: the zoomed table's keys
        sync_history_plot(self)
        if self.zoomed is not None:
            self.panes[index].focus()
        if self.frame is not None:
            self.redraw()

    def redraw(self) -> None:
        """Draw the current frame again (zoom, theme), unless a poll is feeding the
        pipeline in its thread right now: History is not read while it is written; that
        poll draws when it is done."""
        if self.polling or self.frame is None:
            return
        self._apply(self.frame)

    def on_history_plot_shown(self, _message: HistoryPlot.Shown) -> None:
        """The plot was shown or resized: draw it from the current frame."""
        self.redraw()

    def action_history_plot(self) -> None:
        toggle_history_plot(self)

    def action_help(self) -> None:
        from .screens.help import HelpScreen
        self.push_screen(HelpScreen(self))

    def action_processes(self) -> None:
        from .screens.processes import ProcessScreen
        if isinstance(self.screen, ProcessScreen):
            self.pop_screen()
            return
        self.push_screen(ProcessScreen())

    def action_copy_finding(self) -> None:
        findings = self.mutes.split(self.frame.findings, self.frame.time)[0] \
            if self.frame else []
        if not findings:
            self.notify("no active finding to copy", timeout=2)
            return
        self.copy_finding(findings[0])

    def copy_finding(self, finding) -> None:
        """``finding`` as ticket text on the clipboard, through OSC 52 (clipboard.py)."""
        import os

        from .clipboard import osc52, ticket_text
        text = ticket_text(finding, self.clock_text)
        textual_gate.copy_with(self, text, osc52(text, in_tmux=bool(os.environ.get("TMUX"))))
        self.notify(f"{finding.code}: evidence and remedy copied (OSC 52)", timeout=3)

    def action_findings(self) -> None:
        from .screens.findings import FindingsScreen
        self.push_screen(FindingsScreen(self))

    async def action_record(self) -> None:
        from infertop.probes.sources.recorder import Recorder, default_recording_path
        from infertop.recording import make_header
        rec, self.recorder = self.recorder, None
        if rec is not None:
            await rec.close()
            self.notify(f"recording saved: {rec.path} ({rec.lines} ticks)", timeout=6)
            self._update_status()
            return
        try:
            path: str | Path | None = self.options.record_path
            if not path:
                path = await asyncio.to_thread(default_recording_path)   # mkdir: off the loop
            first = self.frame.snapshot if self.frame is not None else None
            header = make_header(self.source.describe(), first, host=socket.gethostname(),
                                 started=time.time(), interval=self.interval)
            rec = Recorder(path, header, force=self.options.record_force)
            if first is not None:
                await rec.write(first)   # opens the file now: errors show at once
        except Exception as e:
            self.notify(f"cannot record: {e}", severity="error", timeout=8)
            return
        self.recorder = rec
        self.notify(f"recording to {path}", timeout=4)
        self._update_status()

    async def on_unmount(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in self._signals:   # the loop may outlive the app (tests)
            loop.remove_signal_handler(sig)
        rec, self.recorder = self.recorder, None
        if rec is not None:
            await rec.close()
        await self.source.stop()


# the keys every mode shares: the key line lists them after the mode's own
GENERAL_ACTIONS = {b.action for b in InfertopApp.BINDINGS if isinstance(b, Binding)}
