"""The built-in probes' command-line flags, as data: `--help` and the screen's argument
checks get them without importing a probe module (issue 35: instant start; importing every
probe to call its ``add_flags`` cost 85-150 ms of each `infertop --help`).

A built-in probe's flags are declared here, under its ProbeSpec name, and its spec names
them (``flags=BUILTIN_FLAGS["nvml"]``); tests/test_start_imports.py checks the two agree.
A probe registered otherwise (a plug-in's entry point, a test's toy) keeps its own
``flags`` or ``add_flags``: those are added only when such a probe may exist (the
registry is already loaded, or an installed distribution may declare the entry point).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

# the entry-point group a probe shipped as its own package declares itself in
ENTRY_POINT_GROUP = "infertop.probes"


@dataclass(frozen=True)
class ProbeFlag:
    """One flag of a probe: ``action`` store_true (a switch) or append (repeatable, its
    values a list, empty by default)."""

    name: str
    help: str
    action: str = "store_true"
    metavar: str | None = None

    def __post_init__(self) -> None:
        if self.action not in ("store_true", "append") or not self.name.startswith("--"):
            raise ValueError(f"probe flag {self.name!r}: a --switch or an append flag")

    def add_to(self, group: argparse._ArgumentGroup) -> None:
        kw: dict[str, Any] = {"action": self.action, "help": self.help}
        if self.action == "append":
            kw["default"] = []
            kw["metavar"] = self.metavar
        group.add_argument(self.name, **kw)


# probe name -> its flags, in the probes' order (ProbeSpec.order: --help's flag order)
BUILTIN_FLAGS: dict[str, tuple[ProbeFlag, ...]] = {
    "nvml": (ProbeFlag("--no-gpu", "do not load NVML"),),
    "kvevents": (ProbeFlag(
        "--kv-events", action="append", metavar="ENDPOINT",
        help="subscribe to the server's KV-cache events at this ZMQ endpoint "
             "(tcp://HOST:PORT; repeat per data-parallel rank); default: from "
             "the server's --kv-events-config (needs infertop[kv-events])"),),
    "pressure": (ProbeFlag(
        "--no-pressure",
        "do not read the host's pressure stall information (/proc/pressure)"),),
}


def add_probe_flags(group: argparse._ArgumentGroup) -> None:
    """Every probe's flags in the "sources" group: the built-in ones from the table, then
    those of any other registered probe, for which the registry (and the entry-point
    lookup) is loaded only when such a probe may exist."""
    for flags in BUILTIN_FLAGS.values():
        for flag in flags:
            flag.add_to(group)
    from infertop.plugins import may_declare
    # a probe registered by hand has imported the registry; a plug-in is installed
    if "infertop.probes.registry" in sys.modules or may_declare(ENTRY_POINT_GROUP):
        from .registry import add_other_flags
        add_other_flags(group)
