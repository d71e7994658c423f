"""The three ways to run the same panes: live (with captures), demo (banner, scenario keys)
and replay (position bar, stepping and seeking).  Each adds only its keys and banner."""

from __future__ import annotations

import asyncio
import textwrap
import time
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.binding import Binding

from infertop.fleet import FleetFrame
from infertop.source import SnapshotSource
from infertop.textclean import clean

from .app import InfertopApp, in_daemon_thread, strip_text
from .speed import SpeedMeter, speed_text

if TYPE_CHECKING:
    from textual.widgets import Input

    from infertop.probes.sources.demo import DemoSource
    from infertop.probes.sources.replay import ReplaySource

    from .screens.fleet import NodeScreen


class LiveApp(InfertopApp):
    # read-only (`infertop serve`): the captures run py-spy or nsys against the server
    WRITE_ACTIONS = InfertopApp.WRITE_ACTIONS | {"pyspy_dump", "pyspy_record", "nsys",
                                                 "gil_sampler"}
    BINDINGS = InfertopApp.BINDINGS + [
        Binding("p", "pyspy_dump", "py-spy dump"),
        Binding("P", "pyspy_record", "py-spy record"),
        Binding("n", "nsys", "nsys"),
        Binding("G", "gil_sampler", "GIL sampler"),
    ]

    async def on_mount(self) -> None:
        self.summaries.gil_hint = "G"     # the scheduling pane says how to turn it on
        await super().on_mount()
        from .captures import CaptureController
        self.captures = CaptureController(self)
        if self.options.record_now:
            await self.action_record()
        if self.options.gil_sampler:
            self.set_timer(1.5, self.captures.toggle_gil_sampler)  # after the tree is known

    def action_pyspy_dump(self) -> None:
        self.captures.start_dump()

    def action_pyspy_record(self) -> None:
        self.captures.ask_record()

    def action_nsys(self) -> None:
        self.captures.start_nsys()

    def action_gil_sampler(self) -> None:
        self.captures.toggle_gil_sampler()


class PacedApp(InfertopApp):
    """A demo or a replay: a source with its own clock, played at a speed.  The banner
    says the speed asked (``--speed``, then ``+``/``-``) and, when the machine does not
    keep up, the speed achieved (tui/speed.py)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # ticks driven by hand (tests, screenshots) have no pace to measure
        self.speed_meter = SpeedMeter(enabled=not self.options.manual_ticks)

    @property
    def requested_speed(self) -> float:
        """Source seconds per wall second asked for: one tick of the source (a scenario
        second, a recorded interval) every ``wall_interval``."""
        # demo and replay sources have a clock step; live ones tick once a second
        return float(self.source.tick_seconds or 1.0) / self.wall_interval

    def speed_text(self) -> str:
        # paused (space, or stepping with ] [): no pace to report, only the speed asked
        return speed_text(self.requested_speed, None if self.paused else self.speed_meter)

    async def after_snapshot(self, snap, frame) -> None:
        await super().after_snapshot(snap, frame)
        if self.paused:               # a step by hand is no measure of the pace
            self.speed_meter.reset()
        else:
            self.speed_meter.tick(snap.time)

    def action_pause(self) -> None:
        super().action_pause()
        self.speed_meter.reset()      # the pause is no measure of the pace

    def _set_interval(self, interval: float) -> None:
        super()._set_interval(interval)
        self.speed_meter.reset()
        self.update_banner()          # the new speed asked shows at once


class DemoApp(PacedApp):
    """A scenario, or the tour of them all.  A presenter's keys: `>`/`<` scenario, `]`
    the next phase (space pauses there), `r` restart; the capture keys as on a live
    server, showing bundled captures labelled as such (tui/demo_captures.py): `p` a real
    py-spy dump, `P` and `G` built from real dumps, `n` an nsys stats example."""

    BINDINGS = InfertopApp.BINDINGS + [
        Binding("greater_than_sign", "next_scenario", "next scenario", key_display=">"),
        Binding("less_than_sign", "prev_scenario", "prev scenario", key_display="<"),
        Binding("right_square_bracket", "next_phase", "next phase", key_display="]"),
        Binding("r", "restart", "restart"),
        Binding("p", "pyspy_dump", "py-spy dump (bundled)"),
        Binding("P", "pyspy_record", "py-spy record (bundled)", show=False),
        Binding("n", "nsys", "nsys (bundled example, krn-* scenarios)", show=False),
        Binding("G", "gil_sampler", "GIL sampler (bundled)", show=False),
    ]
    MAX_SKIP = 900    # ticks `]` plays at most to reach the next phase
    source: DemoSource   # what main() gives it: the scenario player
    bundled_for: str | None = None   # the scenario the panes' bundled summaries are of

    async def after_snapshot(self, snap, frame) -> None:
        await super().after_snapshot(snap, frame)
        if self.bundled_for not in (None, self.source.scenario.name):
            # another scenario (>, <, the tour): its captures are not the last one's
            self.summaries.pyspy = self.summaries.nsys = self.summaries.gil = None
            self.bundled_for = None

    def action_pyspy_dump(self) -> None:
        """What `p` shows on a live vLLM: a real dump, bundled, labelled as such."""
        from .demo_captures import PYSPY_DUMP, bundled_dump
        now = self.frame.time if self.frame else time.time()
        # the bundled file is read in a thread, as P, G and n read theirs
        self._bundled_screen(f"DEMO: bundled py-spy dump of a real vLLM 0.32 server "
                             f"({PYSPY_DUMP}), not of this simulated one",
                             lambda: bundled_dump(now))

    # P, G, n: built from bundled files in a thread (as the live captures run off the
    # loop), shown as the live ones are, every screen saying "bundled"
    def _bundled_screen(self, title: str, build) -> None:
        from .screens.capture import CaptureScreen, show_capture
        screen = CaptureScreen(title=title, running=True)
        mounted = show_capture(self, screen)

        async def fill() -> None:
            result = await asyncio.to_thread(build)
            await mounted                 # the screen's widgets are there to draw on
            screen.set_result(result)
            self.after_bundled(result)
        self.run_worker(fill(), group="capture")

    def after_bundled(self, result: Any) -> None:
        """The panes' summary of a finished capture, as the live path sets it."""
        from .captures import show_summary
        show_summary(self, result, bundled=True)
        self.bundled_for = self.source.scenario.name
        self.redraw()

    def action_pyspy_record(self) -> None:
        from .demo_captures import PYSPY_SAMPLES, bundled_record
        name = self.source.scenario.name
        self._bundled_screen(f"DEMO: bundled py-spy record summary from real vLLM 0.32 dumps "
                             f"({PYSPY_SAMPLES}), not of this simulated server",
                             lambda: bundled_record(name))

    def action_nsys(self) -> None:
        from .demo_captures import bundled_nsys
        if self.source.scenario.layer.value != "kernels":
            self.notify("demo: `n` shows a bundled nsys example on the kernel scenarios "
                        "(krn-*); a real capture needs a live server", timeout=5)
            return
        self._bundled_screen("DEMO: bundled example nsys capture, not from this machine",
                             bundled_nsys)

    def action_gil_sampler(self) -> None:
        """As the live `G`: a toggle, its line in the scheduling pane (from bundled dumps)."""
        if self.summaries.gil is not None:
            self.summaries.gil = None
            self.notify("GIL sampler (bundled) off")
            self.redraw()
            return
        from .demo_captures import bundled_gil, gil_text, staged
        name = self.source.scenario.name

        async def fill() -> None:
            # both read the bundled file: off the event loop
            (pid, role, agg), own = await asyncio.to_thread(
                lambda: (bundled_gil(name), staged(name)))
            self.summaries.gil = gil_text(pid, role, agg, staged=own)
            self.bundled_for = name
            self.notify("GIL sampler (bundled): real vLLM 0.32 dumps, not this server")
            self.redraw()
        self.run_worker(fill(), group="gil")

    async def action_next_phase(self) -> None:
        """Play on to the next phase's first tick (the pipeline sees every tick, so its
        findings raise as they would; only the drawing is skipped), then draw."""
        if self.polling:
            return
        src = self.source
        start = (src.scenario.name, src.phase.index, src.epoch)
        self.polling = True
        try:
            frame = None
            for _ in range(self.MAX_SKIP):
                snap = await src.next()
                if snap is None:
                    break
                # fed as _poll feeds (in a thread), but the panes' indexes are built only
                # for the frame drawn; the recorder and the scenario's bundled captures
                # (after_snapshot) see every tick
                frame = await in_daemon_thread(self._feed, snap,
                                               src.epoch, False)
                self.ticks += 1
                await self.after_snapshot(snap, frame)
                if (src.scenario.name, src.phase.index, src.epoch) != start:
                    break
            if frame is not None:
                frame = await in_daemon_thread(frame.prepare)
        finally:
            self.polling = False
        if frame is not None and self.screen_stack:
            self._apply(frame)
            self.notify(f"phase {src.phase.index + 1}/{src.phase.count}: {src.phase.name}",
                        timeout=3)

    async def on_mount(self) -> None:
        await super().on_mount()
        if self.options.record_now:
            await self.action_record()

    def _switched(self, what: str) -> None:
        self.notify(what, timeout=3)   # the epoch change resets the pipeline on the next tick

    def action_next_scenario(self) -> None:
        self.source.next_scenario()
        self._switched(f"scenario: {self.source.scenario.name}")

    def action_prev_scenario(self) -> None:
        self.source.prev_scenario()
        self._switched(f"scenario: {self.source.scenario.name}")

    def action_restart(self) -> None:
        self.source.restart()
        self._switched(f"restarted {self.source.scenario.name}")

    def banner_text(self) -> Text | None:
        sc = self.source.scenario
        ph = self.source.phase
        t = Text()
        names = self.source.names
        where = f" {names.index(sc.name) + 1}/{len(names)}" if sc.name in names else ""
        t.append(f" DEMO{where} ", style="bold reverse")
        if (self.size.height or 48) < SMALL_HEIGHT:     # 80x24: the narration must show
            return self._small_banner(t, sc, ph)
        t.append(f" {sc.title}", style="bold")
        t.append(f"  [{ph.layer}]  phase {ph.index + 1}/{ph.count}: {ph.name}")
        t.append(f"  {self.speed_text()}   > < scenario · ] phase · r restart\n")
        t.append(" ".join(ph.narration.split()))
        if ph.remedy and ph.index == ph.count - 1:
            t.append("\nremedy: " + " ".join(ph.remedy.split()),
                     style=self.role_styles.get("accent", "bold"))
        return t

    def _small_banner(self, t: Text, sc, ph) -> Text:
        """Two lines on a small screen (80x24: the banner's 2 rows held the title, the
        phase and the keys, and the narration was never seen): the phase and the title,
        then the narration one line at a time, the next every PAGE_SECONDS of the
        scenario's clock (then, in the last phase, the remedy); "›" says more follows.
        The keys are on the key line."""
        width = max(20, (self.size.width or 80) - 2)      # the banner's padding
        t.append(f" phase {ph.index + 1}/{ph.count}: {ph.name}  ")
        speed = self.speed_text()
        if speed != "speed 1x":    # faster, slower or behind: before the title, which cuts
            t.append(f"{speed}  ")
        t.append(sc.title, style="bold")
        t.truncate(width, overflow="ellipsis")
        words = " ".join(ph.narration.split())
        if ph.remedy and ph.index == ph.count - 1:
            words += "  remedy: " + " ".join(ph.remedy.split())
        pages = textwrap.wrap(words, width - 2, break_on_hyphens=False) or [""]
        now = self.frame.time if self.frame is not None else ph.started_at
        n = int(max(0.0, now - ph.started_at) // PAGE_SECONDS) % len(pages)
        t.append("\n" + pages[n] + (" ›" if n < len(pages) - 1 else ""))
        return t


SMALL_HEIGHT = 36     # as on_resize's "-small"
PAGE_SECONDS = 5      # a line of narration on a small screen: ~80 characters, read in 5 s


REBUILD_TICKS = 600


class ReplayApp(PacedApp):
    BINDINGS = InfertopApp.BINDINGS + [
        Binding("right_square_bracket", "step(1)", "step", key_display="]"),
        Binding("left_square_bracket", "step(-1)", "back", key_display="["),
        Binding("right_curly_bracket", "jump(0.1)", "+10%", key_display="}"),
        Binding("left_curly_bracket", "jump(-0.1)", "-10%", key_display="{"),
        Binding("g", "goto", "go to time"),
    ]
    source: ReplaySource   # what main() gives it: the recording player

    def shown_at(self) -> tuple[int, float]:
        """(index, seconds from the recording's start) of the frame on screen.  The
        banner, the status line and the findings' times all read this one clock: the
        recording's, taken from the frame itself (the source's position may already be
        elsewhere while a seek rebuilds)."""
        src = self.source
        if self.frame is None:
            return src.position, src.elapsed
        t = self.frame.time
        return src.index_at(t), t - src.start_time

    def banner_text(self) -> Text | None:
        src = self.source
        index, pos = self.shown_at()
        t = Text()
        t.append(" REPLAY ", style="bold reverse")
        frac = (index / max(1, src.length)) if src.length else 0.0
        width = 30
        filled = int(frac * width)
        t.append(f" {src.label}  ")
        t.append("━" * filled + "╸" + "─" * (width - filled))
        t.append(f"  {_hms(pos)} / {_hms(src.duration)}  tick {index}/{src.length}")
        t.append(f"  {self.speed_text()}")
        if src.header.get("host"):
            t.append(f"  recorded on {src.header['host']}")
        t.append("   [ ] step · { } ±10% · g go to")
        return t

    def tick_text(self) -> str:
        index, pos = self.shown_at()
        return f"tick {index}/{self.source.length} at {_hms(pos)}"

    def clock_text(self, t: float) -> str:
        """'0:02:05 (14:03:22)': seconds into the recording, as the banner counts, and the
        recorded clock time (the recording host's, shown in this machine's zone)."""
        return f"{_hms(t - self.source.start_time)} ({super().clock_text(t)})"

    def _rebuild(self) -> None:
        """After a seek, recompute History, derived values and findings from raw data, in a
        thread: decoding and re-diagnosing hundreds of ticks takes seconds, and the screen
        must stay live meanwhile."""
        self.speed_meter.reset()      # a jump is not playing speed
        self.run_worker(self._rebuild_async(), exclusive=True, group="rebuild")

    async def _rebuild_async(self) -> None:
        self.polling = True   # no tick may feed the pipeline while it is rebuilt
        try:
            frame = await asyncio.to_thread(self._replay_until, self.source.position)
        finally:
            self.polling = False
        if frame is not None:
            self._apply(frame)
        else:
            self.update_banner()

    def _replay_until(self, position: int):
        # the longest rule window is 300 s: twice that also covers raise/clear hysteresis
        snaps = self.source.snapshots_until(position, limit=REBUILD_TICKS)
        self.pipeline.reset()
        frame = None
        for s in snaps:
            frame = self.pipeline.feed(s)
        return frame

    def action_step(self, n: int) -> None:
        self.paused = True
        if n == 1:   # forward by one: just the next tick, nothing to recompute
            self.run_worker(self._poll(), group="poll")
        else:
            self.source.step(n)
            self._rebuild()
        self._update_status()

    def action_jump(self, fraction: float) -> None:
        src = self.source
        target = (src.position / max(1, src.length)) + fraction
        src.seek_fraction(min(1.0, max(0.0, target)))
        self._rebuild()

    def action_goto(self) -> None:
        from .screens.goto import GotoScreen

        def done(seconds: float | None) -> None:
            if seconds is not None:
                self.source.goto(seconds)
                self._rebuild()
        self.push_screen(GotoScreen(self.source.duration), done)


def _node_lead(finding) -> str:
    """A fleet finding's node before its code in the strip ("node-03 DEC-001")."""
    node = dict(finding.subject).get("node")
    return f"{node} " if node else ""


def _hms(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class FleetApp(InfertopApp):
    """Many nodes (``--prometheus``, several remote ``--url``s): the fleet screen first;
    Enter drills into one node's six panes (tui/screens/fleet.py)."""

    BINDINGS = InfertopApp.BINDINGS + [
        Binding("s", "sort", "sort"),
        Binding("S", "reverse", "reverse"),
        Binding("slash", "filter", "filter", key_display="/"),
        Binding("escape", "clear_filter", "clear filter", show=False),
    ]
    SORTS = ("worst", "ttft_p99", "itl_p50", "kv", "running", "waiting", "tok_s", "errors",
             "node")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sort_by = "worst"
        self.sort_reverse = True
        self.filter_text = ""

    def compose(self):
        from textual.widgets import Static

        from .app import GENERAL_ACTIONS
        from .screens.fleet import FleetView
        from .widgets.keybar import KeyBar
        yield Static(self._header_text(), id="header")
        yield Static("", id="findings-strip", classes="-none")
        yield Static("", id="banner")
        yield FleetView(id="fleet")
        yield Static("", id="status")
        yield KeyBar(general=GENERAL_ACTIONS)

    async def on_mount(self) -> None:
        await super().on_mount()
        # the keys act on the engines (sorted worst first: the cursor starts on the worst)
        self._main_widget("#fleet-engines").focus()

    @property
    def panes(self) -> list:
        return []   # the fleet screen has none; a node's screen has its own six

    end_note = "end of recording: q to quit"

    def _feed(self, snap, epoch, prepare: bool = True):
        """The fleet pipeline's tick (64 nodes' Histories and rules), in the base's poll
        thread.  Never Frame.prepare (whatever ``prepare`` says): it would build the whole fleet's relabelled Snapshot,
        which the fleet screen never reads (it reads each node's Frame)."""
        return self.pipeline.feed(snap, epoch)

    def _apply(self, frame) -> None:
        from .screens.fleet import FleetView, fill_tables
        self.frame = frame
        with self.batch_update():
            self._set_text("#header", self._header_text(frame), layout=False)
            self._update_strip(frame)
            if isinstance(frame, FleetFrame):
                fill_tables(self._main_widget("#fleet", FleetView), frame, self.role_styles,
                            sort=self.sort_by, reverse=self.sort_reverse,
                            query=self.filter_text)
            error = self._fleet_error(frame)
            box = self._main_widget("#fleet-error")
            box.set_class(error is not None, "-visible")
            if error is not None:
                self._set_text("#fleet-error", error)
            self.refresh_node_screen()
            self._update_status()

    def refresh_node_screen(self) -> None:
        from .screens.fleet import NodeScreen
        screen = self.screen
        # the open node is read whole (aggregate mode reads only rows): the source's next
        # refresh asks for it (an attribute the poll reads; no I/O here)
        pinned = self.source.pinned   # None: the source reads every node whole anyway
        if pinned is not None:
            want = {screen.node} if isinstance(screen, NodeScreen) else set()
            if pinned != want:   # a new set, never changed in place (the poll reads it)
                self.source.pinned = want
        if isinstance(screen, NodeScreen) and isinstance(self.frame, FleetFrame):
            screen.show(self.frame.nodes.get(screen.node), self.role_styles, self.summaries)

    def on_node_screen_show_again(self, _message: NodeScreen.ShowAgain) -> None:
        self.refresh_node_screen()

    def _header_text(self, frame=None) -> Text:
        t = Text()
        t.append("infertop fleet", style="bold")
        if self.source.last_error:   # said whole in the body (#fleet-error)
            t.append(" ✗", style=self.role_styles.get("crit", ""))
        t.append(f"  {self.source.label}")
        if not isinstance(frame, FleetFrame):
            return t
        gpus = sum(len({r.label("gpu") for r in fr.by_key("gpu.info")})
                   for fr in frame.nodes.values())
        nodes = len(frame.nodes)
        count = frame.overview_counts
        if count:   # aggregate mode: the fleet as Prometheus counts it
            nodes = int(count.get("fleet.nodes", nodes))
            gpus = int(count.get("fleet.gpus", gpus))
        t.append(f"  {nodes} nodes  {gpus} GPUs")
        refresh = self.source.refresh_interval
        t.append(f"  tick {self.interval:g}s" + (f", refresh {refresh:g}s" if refresh else ""))
        return t

    def _fleet_error(self, frame) -> Text | None:
        """What the body says when the fleet cannot be read (a dead --prometheus): the
        tables alone would only be empty."""
        err = self.source.last_error
        nodes = len(frame.nodes) if isinstance(frame, FleetFrame) else 0
        if not err and nodes:
            return None
        crit = self.role_styles.get("crit", "bold")
        if err:
            return Text(f"cannot read the fleet from {self.source.label}: {clean(str(err))}"
                        + ("" if nodes else "\nno node to show until it answers"), style=crit)
        return Text(f"{self.source.label} answered with no node: no GPU or server metrics "
                    "(check the scrape jobs' labels)", style=self.role_styles.get("warn", ""))

    def _update_strip(self, frame) -> None:
        """The fleet's findings, each with the node it is about, fitted as the main
        strip's (strip_text: the first one's title cut between words, "+N more (f)")."""
        strip = self._main_widget("#findings-strip")
        # muted ones (`m` in `f`) leave it as they leave the main strip, said at the end
        shown, muted = self.mutes.split(frame.findings, frame.time) \
            if self.mutes.until else (list(frame.findings), 0)
        if not shown and not muted:
            strip.set_class(True, "-none")
            self._shown.pop("#findings-strip", None)
            return
        strip.set_class(False, "-none")
        small = self.screen_stack[0].has_class("-small")
        width = max(20, self.size.width - 2)
        note = f"  ({muted} muted: f)" if muted else ""
        # worst first (FleetPipeline sorts them)
        text = strip_text(shown, self.role_styles, width - len(note), 1 if small else 3,
                          lead=_node_lead) if shown else Text()
        if note:
            text.append(note.lstrip() if not shown else note,
                        style=self.role_styles.get("muted", "dim"))
        self._set_text("#findings-strip", text)

    def on_data_table_row_selected(self, event) -> None:
        from .app import PANE_CLASSES
        from .screens.fleet import NodeScreen
        key = event.row_key.value if event.row_key is not None else None
        if not key:
            return
        node = key.split("|", 1)[0]
        self.push_screen(NodeScreen(node, PANE_CLASSES))
        self.call_after_refresh(self.refresh_node_screen)

    def action_zoom(self, index: int) -> None:
        return None   # zoom is a node screen's key

    def action_processes(self) -> None:
        self.notify("the process view is one box's: open a node (Enter), then zoom its "
                    "memory pane (3) for its GPU processes", timeout=4)

    def action_sort(self) -> None:
        i = self.SORTS.index(self.sort_by) if self.sort_by in self.SORTS else -1
        self.sort_by = self.SORTS[(i + 1) % len(self.SORTS)]
        self.sort_reverse = self.sort_by != "node"
        self.notify(f"sort by {self.sort_by}", timeout=2)
        if self.frame is not None:
            self._apply(self.frame)

    def action_reverse(self) -> None:
        self.sort_reverse = not self.sort_reverse
        if self.frame is not None:
            self._apply(self.frame)

    def action_filter(self) -> None:
        from .screens.fleet import FilterBox
        self._main_widget("#fleet-filter", FilterBox).open()

    def action_clear_filter(self) -> None:
        from textual.widgets import Input
        box = self._main_widget("#fleet-filter", Input)
        box.value = ""
        self.filter_text = ""
        if self.frame is not None:
            self._apply(self.frame)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "fleet-filter":
            self.filter_text = event.value
            if self.frame is not None:
                self._apply(self.frame)


def app_for_source(source: SnapshotSource, **kwargs: Any) -> InfertopApp:
    kind = source.kind
    if source.fleet:
        return FleetApp(source, **kwargs)
    cls = {"live": LiveApp, "demo": DemoApp, "replay": ReplayApp}.get(kind, InfertopApp)
    return cls(source, **kwargs)
