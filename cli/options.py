"""Typed views of the parsed command line: what the shared helpers read of ``args``.

The subcommands' parsers differ (``demo`` has no ``--prometheus``, ``snapshot`` no
``--record``), and tests build small ``argparse.Namespace``s by hand, so the helpers that
serve several commands read their flags through one of these frozen views instead of
``getattr(args, NAME, default)`` at each use: a field's name and type are declared once,
a flag the command lacks reads as its default, and tests/test_cli_options.py checks that
every field is a flag some subcommand defines (a misspelt name fails there, not silently).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class SourceArgs:
    """Where the readings come from (cli/sources.py, doctor, snapshot)."""

    source: str = "live"               # live | demo:NAME | replay:FILE
    speed: float | None = None         # demo/replay pace; None: as fast as they go
    prometheus: str | None = None      # fleet mode through Prometheus
    url: tuple[str, ...] = ()          # --url as given (repeatable)
    config: str | None = None          # --config FILE
    gpus: int | None = None            # demo: the GPUs a scenario is spread over
    pid: int | None = None             # --pid: the server process
    kv_events: tuple[str, ...] = ()    # --kv-events endpoints (probes/flags.py)


@dataclass(frozen=True)
class ScreenArgs:
    """What the live screen is started with besides its source (cli/interactive.py)."""

    record: str | None = None          # record while watching, to this file
    force: bool = False                # overwrite an existing --record file
    speed: float | None = None
    capture_dir: str | None = None
    theme: str | None = None
    low_bandwidth: float | None = None  # --low-bandwidth N (else the config's [ui] key)


def typed(cls: type[T], args: argparse.Namespace) -> T:
    """``cls`` filled from ``args``: each field from the flag of its name, its default
    where the command has no such flag or the flag was left unset (None)."""
    given = vars(args)
    kw: dict[str, Any] = {}
    for f in fields(cls):   # type: ignore[arg-type]   # T is one of the dataclasses above
        v = given.get(f.name)
        if v is None:
            continue
        kw[f.name] = tuple(v) if isinstance(v, list) else v
    return cls(**kw)
