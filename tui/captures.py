"""The capture keys of the live screen: p (py-spy dump), P (py-spy record), n (nsys or
the server's profiler), G (GIL sampler).  Captures run as workers; the screen keeps
ticking while they run, and their summaries land in the scheduling and kernels panes."""

from __future__ import annotations

import asyncio
import os
import shlex
from typing import TYPE_CHECKING

from rich.text import Text

if TYPE_CHECKING:
    from infertop.probes.capture.nsys import NsysSummary

    from .modes import LiveApp
    from .screens.capture import CaptureScreen

from infertop.meta import meta_url
from infertop.probes.capture.files import CaptureError, capture_dir, capture_path

ROLE_ORDER = ("api_server", "engine_core", "scheduler", "worker", "server", "router", "shard")


class CaptureController:
    def __init__(self, app: LiveApp) -> None:
        self.app = app
        self.cancel: asyncio.Event | None = None
        self.screen: CaptureScreen | None = None
        self.running: str | None = None

    # -- what to capture ------------------------------------------------------------------
    def targets(self) -> list[tuple[int, str]]:
        """(pid, role) of every server process in the newest frame, engine roles first."""
        frame = self.app.frame
        if frame is None:
            return []
        procs = []
        for r in frame.by_key("process.info"):
            try:
                pid = int(r.label("pid"))
            except ValueError:
                continue
            if r.label("role") == "helper":
                continue  # multiprocessing resource_tracker and the like
            procs.append((pid, r.label("role") or r.label("name")))
        order = {role: i for i, role in enumerate(ROLE_ORDER)}
        return sorted(procs, key=lambda p: (order.get(p[1], 99), p[0]))

    def cmdlines(self) -> list[list[str]]:
        frame = self.app.frame
        out = []
        for r in frame.by_key("process.info") if frame else []:
            try:
                out.append(shlex.split(r.text or ""))
            except ValueError:
                out.append((r.text or "").split())
        return out

    def root_cwd(self) -> str | None:
        """The working directory of the process whose command line ``cmdlines`` gives
        first (the restart advice runs there); None when it cannot be read.  Reads /proc:
        called in a thread."""
        frame = self.app.frame
        first = next(iter(frame.by_key("process.info")), None) if frame else None
        try:
            return os.readlink(f"/proc/{int(first.label('pid'))}/cwd") if first else None
        except (OSError, ValueError):
            return None

    def server_name(self) -> str:
        frame = self.app.frame
        pm = frame.snapshot.process_meta() if frame else None
        sm = frame.snapshot.server_meta() if frame else None
        # as the header names it: the metrics' dialect, then the process's kind; never
        # "unknown" or "python" (captures were named "..._unknown_..." under a known vLLM)
        for kind in ((sm.dialect if sm else None), (pm.server.kind if pm and pm.server else None)):
            if kind and kind not in ("unknown", "python"):
                return kind
        return "server"

    def _dir(self):
        return capture_dir(self.app.options.capture_dir)

    def _open_screen(self, title: str):
        from .screens.capture import CaptureScreen, show_capture
        self.cancel = asyncio.Event()
        self.screen = CaptureScreen(title=title, running=True, on_cancel=self.cancel.set)
        show_capture(self.app, self.screen)
        return self.screen

    def _busy(self) -> bool:
        if self.running:
            self.app.notify(f"a {self.running} is still running", severity="warning")
            return True
        return False

    # -- p: dump --------------------------------------------------------------------------
    def start_dump(self) -> None:
        if self._busy():
            return
        screen = self._open_screen("py-spy dump of the server's processes")
        self.app.run_worker(self._dump(screen), group="capture", exclusive=False)

    async def _dump(self, screen) -> None:
        from infertop.probes.capture.pyspy import dump_tree, save_dump
        self.running = "py-spy dump"
        try:
            targets = self.targets()
            result = await dump_tree(targets)
            # file work in a thread: a slow or full disk must not stall the screen
            directory = await asyncio.to_thread(self._dir)
            await asyncio.to_thread(save_dump, result, directory, self.server_name())
            screen.set_result(result)
        except CaptureError as e:
            screen.set_result(e)
        finally:
            self.running = None

    # -- P: record ------------------------------------------------------------------------
    def ask_record(self) -> None:
        if self._busy():
            return
        from .screens.prompt import NumberPrompt

        def go(seconds: float | None) -> None:
            if seconds:
                screen = self._open_screen(f"py-spy record, {seconds:g} s (Esc cancels)")
                self.app.run_worker(self._record(screen, seconds), group="capture")
        self.app.push_screen(NumberPrompt("py-spy record for how many seconds?",
                                          self.app.options.record_seconds, 1, 600), go)

    async def _record(self, screen, seconds: float) -> None:
        from infertop.probes.capture.pyspy import record
        self.running = "py-spy record"
        try:
            out_dir = await asyncio.to_thread(self._dir)
            result = await record(self.targets(), seconds, out_dir=out_dir,
                                  server=self.server_name(),
                                  progress=lambda f: screen.set_progress(
                                      f, f"recording… {f * seconds:.0f}/{seconds:g} s"),
                                  cancel=self.cancel)
            screen.set_result(result)
            show_summary(self.app, result)
        except CaptureError as e:
            screen.set_result(e)
        finally:
            self.running = None

    # -- n: nsys or the server's profiler -------------------------------------------------
    def start_nsys(self) -> None:
        if self._busy():
            return
        self.app.run_worker(self._plan_gpu(), group="capture")

    async def _plan_gpu(self) -> None:
        from infertop.probes.capture.nsys import plan_gpu_capture
        cmdlines = self.cmdlines()
        root = cmdlines[0] if cmdlines else []
        cwd = await asyncio.to_thread(self.root_cwd)
        plan = await plan_gpu_capture(cmdlines, root, self.server_name(), cwd=cwd)
        if plan.mode == "nsys":
            from .screens.prompt import NumberPrompt
            session = plan.session
            assert session is not None   # the "nsys" plan names the session it found

            def go(seconds: float | None) -> None:
                if seconds:
                    screen = self._open_screen(f"nsys capture of session {session}")
                    self.app.run_worker(self._nsys(screen, session, seconds),
                                        group="capture")
            self.app.push_screen(NumberPrompt("nsys capture for how many seconds?", 10, 1, 300),
                                 go)
        elif plan.mode == "endpoint":
            from infertop.probes.capture.profiler_endpoint import confirm_text

            from .screens.prompt import ConfirmPrompt
            kind = self.server_name()

            def confirmed(yes: bool | None) -> None:   # None: dismissed without an answer
                if yes:
                    screen = self._open_screen(f"{kind} profiler")
                    self.app.run_worker(self._endpoint(screen, kind, root), group="capture")
            self.app.push_screen(ConfirmPrompt(confirm_text(kind, 10)), confirmed)
        else:
            from .screens.capture import CaptureScreen, show_capture
            show_capture(self.app, CaptureScreen(plan, title="GPU capture"))

    async def _nsys(self, screen, session: str, seconds: float) -> None:
        from infertop.probes.capture.nsys import nsys_capture
        self.running = "nsys capture"
        try:
            directory = await asyncio.to_thread(self._dir)
            base = capture_path(directory, self.server_name(), "nsys", "nsys-rep")
            base = base.with_name(base.name[: -len(".nsys-rep")])
            result = await nsys_capture(session, seconds, base, self.cancel,
                                        progress=lambda f: screen.set_progress(f, "collecting…"))
            screen.set_result(result)
            show_summary(self.app, result)
        except CaptureError as e:
            screen.set_result(e)
        finally:
            self.running = None

    async def _endpoint(self, screen, kind: str, cmdline: list[str]) -> None:
        from infertop.probes.capture.profiler_endpoint import start_stop_profile
        self.running = "profiler capture"
        frame = self.app.frame
        url = meta_url(frame.snapshot) if frame else None
        try:
            if not url:
                raise CaptureError("no server URL known", "start infertop with --url URL")
            base = url[: -len("/metrics")] if url.endswith("/metrics") else url
            result = await start_stop_profile(base, kind, 10, cmdline=cmdline,
                                              cancel=self.cancel,
                                              progress=lambda f: screen.set_progress(f))
            screen.set_result(result)
        except CaptureError as e:
            screen.set_result(e)
        finally:
            self.running = None

    # -- G: GIL sampler -------------------------------------------------------------------
    def toggle_gil_sampler(self) -> None:
        self.app.run_worker(self._toggle_gil(), group="gil")

    async def _toggle_gil(self) -> None:
        from infertop.probes.capture.gil_probe import GilProbe
        from infertop.probes.sources.hub import Hub
        hub = self.app.source
        if not isinstance(hub, Hub):     # a demo or a replay: no probes to add
            self.app.notify("the GIL sampler needs a live source", severity="warning")
            return
        if any(p.name == "gil" for p in hub.probes):
            await hub.remove_probe("gil")
            self.app.notify("GIL sampler off")
            return
        targets = [t for t in self.targets() if t[1] in ("engine_core", "scheduler", "server")]
        targets = targets or self.targets()
        if not targets:
            self.app.notify("no server process to sample", severity="warning")
            return
        pid, role = targets[0]
        cap = await hub.add_probe(GilProbe(pid, role))
        if cap.available:
            self.app.notify(f"GIL sampler on: py-spy dump of PID {pid} ({role}) every 2 s")
        else:
            self.app.notify(f"GIL sampler: {cap.reason}", severity="error")


def show_summary(app, result, *, bundled: bool = False) -> None:
    """A finished capture's summary into the panes (``app.summaries``): py-spy record's in
    the scheduling pane, nsys's in the kernels pane.  ``bundled``: the demo's examples
    (tui/demo_captures.py), said so on their first line."""
    from infertop.probes.capture.nsys import NsysResult
    from infertop.probes.capture.pyspy_record import RecordResult, summary_lines
    if isinstance(result, RecordResult) and result.summary is not None:
        lines = summary_lines(result.summary, width=70)
        if bundled and lines:
            lines[0] = "bundled " + lines[0]
        app.summaries.pyspy = Text("\n".join(lines), style=app.role_styles.get("accent", ""))
    elif isinstance(result, NsysResult) and result.summary is not None:
        text = nsys_text(result.summary)
        app.summaries.nsys = text if not bundled else \
            Text("bundled example, not from this machine: ", style="bold") + text


def nsys_text(summary: NsysSummary) -> Text:
    t = Text("last nsys capture: ", style="bold")
    share = summary.memcpy_share
    if share is not None:
        t.append(f"host-device copies {share * 100:.0f}% of GPU time\n")
    for k in summary.top_kernels[:5]:
        pct = k.time_share or None      # 0: no share shown
        t.append(f"  {pct * 100:5.1f}% " if isinstance(pct, float) else "  ")
        t.append(f"{k.name[:60]}\n")
    for sign in summary.launch_overhead_signs[:3]:
        t.append(f"  ! {sign}\n")
    return t
