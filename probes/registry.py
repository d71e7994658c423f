"""The probe registry: what each live probe reads, needs, adds to the command line and builds.

A probe declares one ``ProbeSpec`` in its own module (``SPEC = register(ProbeSpec(...))``)
and is listed once in ``BUILTIN``; the command line (``cli/args.py``) adds every spec's
flags and ``cli/sources.py`` builds the live Hub's probes from every spec, in this order.
``register`` checks the declared keys against ``infertop/keys.py`` at import, so a probe
cannot emit a key the core does not know (tests check what it emits is what it declared).

Adding a probe: docs/contributing.md, "Adding a probe: the files you touch".
"""

from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from infertop.keys import SPECS

from .base import Probe

# the probe modules, in the order the Hub reads them (and their flags appear in --help)
BUILTIN: tuple[str, ...] = (
    "infertop.probes.nvml.probe",
    "infertop.probes.server.process",
    "infertop.probes.server.metrics",
    "infertop.probes.server.kvevents",
    "infertop.probes.capture.gil_probe",
)


class ProbeUsageError(ValueError):
    """A flag's value a probe cannot use: the CLI shows it as a one-line usage error."""


@dataclass(frozen=True)
class LiveTarget:
    """What the user pointed the live screen at, resolved once for every probe.

    ``given_urls``: --url as typed; ``urls``: those, or the discovered servers' when none
    was given (ports of servers found by name); ``pid``: --pid.
    """

    pid: int | None = None
    given_urls: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()
    # the config's host CPU share from which the host's top consumers are scanned
    # (thresholds.host_top_scan_at, capped at host_cpu_saturated); None: the probe's own
    host_top_at: float | None = None
    # discovered servers in containers: how each URL of ``urls`` is reached
    # (probes/server/reach.py Route; a URL without one is read as it is)
    routes: tuple[Any, ...] = ()


Build = Callable[[argparse.Namespace, LiveTarget], Sequence[Probe]]


@dataclass(frozen=True)
class ProbeSpec:
    """One probe, declared.

    ``name``: its source name (a server probe's Samples are ``name:instance``).
    ``keys``: every reading key it may emit (declared in infertop/keys.py, not derived).
    ``needs``: what it needs to read anything, in words (for a reader of the registry).
    ``add_flags``: adds its own flags to the "sources" argument group.
    ``build``: its probes for the live Hub from the parsed flags ([] = off); None for a
    probe the screen starts on demand (the GIL sampler, key G).
    ``off``: why it is off with these flags ("" = on); the Hub shows the reason.
    ``demo``: ``module:function`` making the demo's Sample for this source (None: the
    demo has no such source), so the demo shows what the live probe shows.
    """

    name: str
    keys: tuple[str, ...]
    needs: str
    build: Build | None = None
    add_flags: Callable[[argparse._ArgumentGroup], None] | None = None
    off: Callable[[argparse.Namespace], str] = field(default=lambda args: "")
    demo: str | None = None

    def __post_init__(self) -> None:
        bad = [k for k in self.keys if k not in SPECS or SPECS[k].derived]
        if bad:
            raise ValueError(f"probe {self.name!r} declares keys that infertop/keys.py does "
                             f"not declare as probe readings: {bad}")
        if len(set(self.keys)) != len(self.keys):
            raise ValueError(f"probe {self.name!r} declares a key twice")


_REGISTRY: dict[str, ProbeSpec] = {}


def register(spec: ProbeSpec) -> ProbeSpec:
    """Add ``spec`` (a probe module calls this at import); a second one of a name fails."""
    old = _REGISTRY.get(spec.name)
    if old is not None and old.keys != spec.keys:   # the same module imported again is fine
        raise ValueError(f"two probes are named {spec.name!r}")
    _REGISTRY[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Remove a spec (tests register toy probes and take them out again)."""
    _REGISTRY.pop(name, None)


def probe_specs() -> list[ProbeSpec]:
    """Every registered probe: the built-in ones (imported here) first, in BUILTIN's
    order, then any registered since (a plug-in, a test's toy probe)."""
    out: list[ProbeSpec] = [importlib.import_module(m).SPEC for m in BUILTIN]
    names = {s.name for s in out}
    return out + [s for s in _REGISTRY.values() if s.name not in names]


def add_probe_flags(group: argparse._ArgumentGroup) -> None:
    for spec in probe_specs():
        if spec.add_flags is not None:
            spec.add_flags(group)


def build_probes(args: argparse.Namespace, target: LiveTarget
                 ) -> tuple[list[Probe], dict[str, str]]:
    """The live Hub's probes and the reasons of those the flags turned off (source name ->
    reason).  Raises ProbeUsageError for a flag value a probe cannot use."""
    probes: list[Probe] = []
    disabled: dict[str, str] = {}
    for spec in probe_specs():
        if spec.build is None:
            continue
        why = spec.off(args)
        if why:
            disabled[spec.name] = why
            continue
        probes += spec.build(args, target)
    return probes, disabled
