"""What the command line tells the screen, and what captures leave for the panes: typed
fields instead of loose dicts, so a misspelt option is an error, not a silent default."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text


@dataclass
class AppOptions:
    speed: float = 1.0                 # demo/replay speed factor (shown in the banner)
    capture_dir: str | None = None     # --capture-dir (else the XDG data dir)
    record_path: str | None = None     # --record FILE
    record_now: bool = False           # start recording at once
    record_force: bool = False         # --force: --record may replace an existing file
    record_seconds: int = 10           # default length offered by `P`
    gil_sampler: bool = False          # start the GIL sampler at once
    manual_ticks: bool = False         # tests and screenshots drive ticks by hand
    settle_gc: bool = False            # freeze startup objects out of the GC (the CLI's
                                       # process only: not a test run's shared one)
    read_only: bool = False            # `infertop serve`: no key writes files or runs a
                                       # capture on the presenter's machine
    low_bandwidth: float | None = None  # --low-bandwidth N: the body at most every N s of
                                        # the frames' clock; the findings strip every tick


@dataclass
class CaptureSummaries:
    """The latest capture results shown inside panes (Rich Text, built off the loop)."""

    pyspy: Text | None = None          # scheduling pane: py-spy record summary
    nsys: Text | None = None           # kernels pane: top kernels of the last capture
    gil: Text | None = None            # scheduling pane: the demo's bundled GIL line (G)
    gil_hint: str = ""                 # the key that turns the GIL sampler on ("" : none here)
