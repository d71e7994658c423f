"""The capture screen (`p`, `P`, `n`): shows one capture's result, searchable.

It receives result objects (DumpResult, RecordResult, NsysResult, ProfileEndpointResult,
GpuCapturePlan, or a CaptureError) and does no I/O: the app runs the capture in a worker
and calls ``set_progress`` / ``set_result``.  While a capture runs, Esc asks to cancel
(``on_cancel`` is called and ``CancelRequested`` posted); afterwards Esc closes.

Layout: title, progress bar (while running), status (errors, fixes, notes), a table of
processes/threads (or kernels) on the left, stacks (or top functions) on the right under a
search box that filters both, and the saved paths with a one-line way to open each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Input, ProgressBar, Static

from infertop.probes.capture.files import CaptureError
from infertop.probes.capture.nsys import GpuCapturePlan, NsysResult
from infertop.probes.capture.profiler_endpoint import ProfileEndpointResult
from infertop.probes.capture.pyspy import (
    DumpResult,
    RecordResult,
    ThreadDump,
    open_hints,
)

from ..widgets.boundary_wrap import BoundaryWrapped
from .capture_table import CaptureTable


def thread_matches(t: ThreadDump, role: str, query: str) -> bool:
    """A thread matches when the query is in its name, its process role or any frame."""
    if not query:
        return True
    q = query.lower()
    if q in (t.name or "").lower() or q in role.lower() or q in t.state:
        return True
    return any(q in f.name.lower() or q in f.filename.lower() for f in t.frames)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:.0f}%"


NARROW = 100     # a terminal narrower than this: the table's share of the width grows


def show_capture(app, screen: CaptureScreen):
    """Show a capture screen: one in place of the capture screen on top, if any (a
    second p over the first stacked them, and Esc then had to be pressed twice)."""
    if isinstance(app.screen, CaptureScreen):
        return app.switch_screen(screen)
    return app.push_screen(screen)


class CaptureScreen(Screen):
    """Full screen for one capture; search with `/`, Esc cancels (running) or closes."""

    # Below NARROW columns the table takes more of the width (`-narrow`): at 80 columns
    # 45% left a thread or kernel name about 5 columns beside its values (the stacks wrap).
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW, "-wide")]

    BINDINGS = [
        Binding("escape", "close_or_cancel", "close / cancel"),
        Binding("slash", "focus_search", "search"),
    ]

    DEFAULT_CSS = """
    CaptureScreen { layout: vertical; background: $background; }
    CaptureScreen #capture-title {
        height: 1; padding: 0 1; background: $panel; color: $foreground; text-style: bold;
    }
    CaptureScreen #capture-progress { height: 1; padding: 0 1; }
    CaptureScreen #capture-progress.-done { display: none; }
    CaptureScreen #capture-status { height: auto; max-height: 8; padding: 0 1; }
    CaptureScreen #capture-status.-error { background: $error 20%; color: $text; }
    CaptureScreen #capture-body { height: 1fr; }
    CaptureScreen #capture-threads { width: 45%; min-width: 30; border-right: solid $panel; }
    CaptureScreen.-narrow #capture-threads { width: 55%; }
    CaptureScreen #capture-right { width: 1fr; }
    CaptureScreen #capture-search { height: 3; }
    CaptureScreen #capture-stacks { padding: 0 1; }
    CaptureScreen #capture-paths {
        height: auto; max-height: 6; padding: 0 1; background: $surface;
    }
    """

    class CancelRequested(Message):
        """Esc while the capture runs: the app should set the capture's cancel event."""

    def __init__(self, result: Any = None, *, title: str = "capture", running: bool = False,
                 on_cancel: Callable[[], None] | None = None, name: str | None = None,
                 id: str | None = None) -> None:
        super().__init__(name=name, id=id)
        self.result = result
        self.title_text = title
        self.capture_running = running and result is None
        self._cancel_cb = on_cancel
        self.query_text = ""
        self.progress_text = ""
        self.cancel_requested = False

    # -- layout ---------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(self.title_text, id="capture-title")
        yield ProgressBar(total=100, show_eta=False, id="capture-progress")
        yield Static("", id="capture-status")
        with Horizontal(id="capture-body"):
            yield CaptureTable(id="capture-threads", cursor_type="row", zebra_stripes=True)
            with Vertical(id="capture-right"):
                yield Input(placeholder="/ search stacks: function, file, thread",
                            id="capture-search")
                with VerticalScroll(id="capture-stacks-scroll"):
                    yield BoundaryWrapped("", id="capture-stacks")
        yield Static("", id="capture-paths")
        yield Footer()

    def on_mount(self) -> None:
        self._draw()

    # -- API for the app ------------------------------------------------------------------
    def set_progress(self, fraction: float, text: str = "") -> None:
        """Update the bar (0..1) while the capture runs."""
        self.progress_text = text
        bar = self.query_one("#capture-progress", ProgressBar)
        bar.update(progress=max(0.0, min(1.0, fraction)) * 100)
        if text:
            self.query_one("#capture-status", Static).update(text)

    def set_result(self, result: Any) -> None:
        """Show the finished capture (or its CaptureError)."""
        self.result = result
        self.capture_running = False
        self._draw()

    # -- actions ----------------------------------------------------------------------------
    def action_close_or_cancel(self) -> None:
        if self.capture_running:
            if not self.cancel_requested:
                self.cancel_requested = True
                if self._cancel_cb:
                    self._cancel_cb()
                self.post_message(self.CancelRequested())
                self.query_one("#capture-status", Static).update(
                    "cancelling: py-spy/nsys keep what they have recorded so far...")
            return
        self.dismiss(self.result)

    def action_focus_search(self) -> None:
        self.query_one("#capture-search", Input).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "capture-search":
            self.query_text = event.value.strip()
            self._draw_body()

    # -- drawing ------------------------------------------------------------------------------
    def _draw(self) -> None:
        bar = self.query_one("#capture-progress", ProgressBar)
        bar.set_class(not self.capture_running, "-done")
        status = self.query_one("#capture-status", Static)
        status.set_class(False, "-error")
        r = self.result
        if self.capture_running:
            status.update(self.progress_text or "running... (esc cancels)")
        elif isinstance(r, CaptureError):
            status.set_class(True, "-error")
            status.update(Text.assemble(("error: ", "bold"), r.message, "\n",
                                        ("fix: ", "bold"), r.fix or "-"))
        else:
            status.update(self._status_text(r))
        self.query_one("#capture-paths", Static).update(self._paths_text(r))
        self._draw_body()

    def _status_text(self, r: Any) -> Text:
        t = Text()
        if isinstance(r, DumpResult):
            n_thr = len(r.threads)
            holders = [f"{p.role or p.pid}: {p.gil_holder.label}"
                       for p in r.processes if p.gil_holder]
            t.append(f"{len(r.processes)} processes, {n_thr} threads, dumped in "
                     f"{r.duration * 1000:.0f} ms.  GIL held by: "
                     + ("; ".join(holders) if holders else "nobody at that instant"))
            for p in r.processes:
                if p.error:
                    t.append(f"\nPID {p.pid} ({p.role}): {p.error}"
                             + (f" - {p.fix}" if p.fix else ""))
        elif isinstance(r, RecordResult):
            s = r.summary
            t.append(f"recorded {r.sampled_seconds:.1f} s of {r.seconds:g} s at {r.rate}/s"
                     + (" (cancelled)" if r.cancelled else ""))
            if s:
                t.append(f".  GIL held {_pct(s.gil_share)}"
                         + (f" ({s.per_process[0][0]})" if s.per_process else "")
                         + f", threads idle {_pct(s.idle_share)}, {s.samples} on-CPU samples")
            for n in r.notes:
                t.append(f"\n{n}")
        elif isinstance(r, NsysResult):
            if r.error:
                t.append(f"error: {r.error}", "bold")
                if r.fix:
                    t.append(f"\nfix: {r.fix}")
            else:
                ns = r.summary
                t.append(f"nsys session {r.session!r}: {r.seconds:.1f} s window"
                         + (" (cancelled early)" if r.cancelled else ""))
                if ns:
                    t.append(f".  host<->device copies: {_pct(ns.memcpy_share)} of GPU busy time")
            for n in r.notes:
                t.append(f"\n{n}")
        elif isinstance(r, ProfileEndpointResult):
            t.append(r.message, "" if r.ok else "bold")
            if r.fix:
                t.append(f"\nfix: {r.fix}")
        elif isinstance(r, GpuCapturePlan):
            t.append(r.message)
            if r.fix:
                t.append(f"\nfix: {r.fix}")
        elif r is not None:
            t.append(str(r))
        return t

    def _paths_text(self, r: Any) -> Text:
        t = Text()
        paths: list[str] = []
        hints: list[str] = []
        if isinstance(r, DumpResult):
            paths = [str(p) for p in (r.txt_path, r.json_path) if p]
            if r.txt_path:
                hints = [f"less {r.txt_path}"]
        elif isinstance(r, RecordResult):
            paths = [str(p) for p in r.paths]
            hints = open_hints(r)
        elif isinstance(r, NsysResult):
            if r.report_path:
                paths = [str(r.report_path)] + [str(p) for p in r.csv_paths.values()]
                hints = [f"nsys-ui {r.report_path}"]
        elif isinstance(r, ProfileEndpointResult) and r.trace_location:
            paths = [f"{r.trace_location} (on the server host)"]
        elif isinstance(r, GpuCapturePlan) and r.command:
            t.append("restart the server with:\n", "bold")
            t.append(r.command)
            return t
        if paths:
            t.append("saved: ", "bold")
            t.append("  ".join(paths))
        for h in hints:
            t.append("\nopen: ", "bold")
            t.append(h)
        return t

    def _draw_body(self) -> None:
        table = self.query_one("#capture-threads", CaptureTable)
        stacks = self.query_one("#capture-stacks", BoundaryWrapped)
        headers: list[str] = []
        cut: tuple[int, ...] = ()     # the label columns that shrink, the first first
        rows: list[tuple[list[str | Text], str | None]] = []
        r = self.result
        q = self.query_text
        if isinstance(r, DumpResult):
            headers, cut = ["PID", "role", "thread", "state"], (2, 1)
            body = Text()
            for p in r.processes:
                shown = [t for t in p.threads if thread_matches(t, p.role, q)]
                for th in shown:
                    style = "bold" if th.owns_gil else ("" if th.active else "dim")
                    rows.append(([str(p.pid), p.role, th.name or "", Text(th.state, style=style)],
                                 f"{p.pid}:{th.tid}"))
                if shown:
                    body.append(f"Process {p.pid} [{p.role}] {p.command}\n", "bold")
                for th in shown:
                    body.append(f'  Thread {th.tid_text} ({th.state}): "{th.name or ""}"\n',
                                "bold" if th.owns_gil else "")
                    for f in th.frames:
                        body.append(f"      {f.text()}\n")
            if q:
                body.highlight_words([q], "reverse", case_sensitive=False)
            # wrapped at spaces and a name's separators, never mid-name (80 columns)
            stacks.update(body if body.plain
                          else Text(f"no stack matches {q!r}", "dim"))
        elif isinstance(r, RecordResult) and r.summary:
            s = r.summary
            headers, cut = ["thread", "cpu", "gil"], (0,)
            for name, act, gil in s.per_thread:
                if q and q.lower() not in name.lower():
                    continue
                rows.append(([name, f"{act * 100:.0f}%", f"{gil * 100:.0f}%"], name))
            body = Text("top functions by own time (on-CPU samples)\n", "bold")
            for name, share in s.top_functions:
                if q and q.lower() not in name.lower():
                    continue
                body.append(f"  {share * 100:5.1f}%  {name}\n")
            if q:
                body.highlight_words([q], "reverse", case_sensitive=False)
            stacks.update(body)
        elif isinstance(r, NsysResult) and r.summary:
            ns = r.summary
            headers, cut = ["kernel", "time", "calls", "avg µs"], (0,)
            for k in ns.top_kernels:
                if q and q.lower() not in k.name.lower():
                    continue
                rows.append(([k.name, f"{k.time_share * 100:.1f}%", str(k.instances),
                              f"{k.avg_ns / 1000:.1f}"], None))
            body = Text("launch-overhead signs\n", "bold")
            for sign in ns.launch_overhead_signs or ["none seen"]:
                body.append(f"  - {sign}\n")
            stacks.update(body)
        else:
            stacks.update("")
        # value columns keep their whole width; the names shrink, cut with "…"
        table.show(headers, rows, cut)
