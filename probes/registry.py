"""The probe registry: what each live probe reads, needs, adds to the command line and builds.

A probe declares one ``ProbeSpec`` in its own module (``SPEC = register(ProbeSpec(...))``)
anywhere under ``infertop.probes``: the registry finds it (``builtin_modules``) and orders
the probes by ``ProbeSpec.order``; the command line (``cli/args.py``) adds every spec's
flags and ``cli/sources.py`` builds the live Hub's probes from every spec, in this order.
A probe can also ship as its own package: a distribution declaring an entry point in the
``infertop.probes`` group that names its module (or its ProbeSpec) is loaded after the
built-in ones; one that fails to load is left out, its reason in ``plugin_errors()``.
``register`` checks the declared keys against ``infertop/keys.py`` at import, so a probe
cannot emit a key the core does not know (tests check what it emits is what it declared).

Adding a probe: docs/contributing.md, "Adding a probe: the files you touch".
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import pkgutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from infertop.keys import SPECS
from infertop.plugins import load_group

from .base import Probe
from .flags import BUILTIN_FLAGS, ENTRY_POINT_GROUP, ProbeFlag

if TYPE_CHECKING:   # imported by plugins.py only when a plug-in may be installed
    import importlib.metadata

__all__ = ["ENTRY_POINT_GROUP", "LiveTarget", "ProbeFlag", "ProbeSpec", "ProbeUsageError",
           "add_other_flags", "build_probes", "builtin_modules", "load_plugins",
           "plugin_errors", "probe_specs", "register", "unregister"]
# what a module declaring a probe says (read before importing it: only those are imported)
_DECLARES = "\nSPEC = register(ProbeSpec("


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
    ``flags``: its own flags in the "sources" argument group, as data; a built-in probe
    names its entry of probes/flags.py (``BUILTIN_FLAGS``), read without importing it.
    ``add_flags``: a plug-in's own flags added by a function instead (a built-in probe's
    would be missing from --help: its module is not imported there).
    ``build``: its probes for the live Hub from the parsed flags ([] = off); None for a
    probe the screen starts on demand (the GIL sampler, key G).
    ``off``: why it is off with these flags ("" = on); the Hub shows the reason.
    ``demo``: ``module:function`` making the demo's Sample for this source (None: the
    demo has no such source), so the demo shows what the live probe shows.
    ``order``: its place among the probes (the Hub's reading order, --help's flag order):
    unique among the built-in ones; a plug-in's comes after theirs by default.
    """

    name: str
    keys: tuple[str, ...]
    needs: str
    order: int = 1000
    build: Build | None = None
    flags: tuple[ProbeFlag, ...] = ()
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


_PLUGIN_ERRORS: dict[str, str] = {}   # entry point name -> why it was left out


@functools.cache
def builtin_modules() -> tuple[str, ...]:
    """The modules under ``infertop.probes`` that declare a probe (their source says
    ``SPEC = register(ProbeSpec(``), found once: a new probe module is found, not listed."""
    pkg = importlib.import_module("infertop.probes")
    out = []
    for info in pkgutil.walk_packages(pkg.__path__, "infertop.probes."):
        if info.ispkg:
            continue
        spec = importlib.util.find_spec(info.name)
        origin = spec.origin if spec is not None else None
        if not origin or not origin.endswith(".py"):
            continue
        with open(origin, encoding="utf-8") as f:
            if _DECLARES in f.read():
                out.append(info.name)
    return tuple(out)


def _spec_of(obj: object) -> ProbeSpec | None:
    """An entry point's object: a ProbeSpec, or a module defining ``SPEC``."""
    if isinstance(obj, ProbeSpec):
        return obj
    spec = getattr(obj, "SPEC", None)   # a plug-in's module: its one declared name
    return spec if isinstance(spec, ProbeSpec) else None


def load_plugins(entry_points: Iterable[importlib.metadata.EntryPoint] | None = None
                 ) -> list[str]:
    """Register the probes other packages declare in the ``infertop.probes`` entry-point
    group (``entry_points``: those to load instead, for tests); returns the names added."""
    def take(obj: object) -> str:
        spec = _spec_of(obj)
        if spec is None:
            raise ValueError("defines no SPEC (a ProbeSpec)")
        register(spec)
        return spec.name
    return load_group(ENTRY_POINT_GROUP, entry_points, take, _PLUGIN_ERRORS)


def plugin_errors() -> Mapping[str, str]:
    """Entry points of the ``infertop.probes`` group left out, and why."""
    return dict(_PLUGIN_ERRORS)


_plugins_loaded = False


def _load_plugins_once() -> None:
    global _plugins_loaded
    if not _plugins_loaded:
        _plugins_loaded = True
        load_plugins()


def probe_specs() -> list[ProbeSpec]:
    """Every registered probe, by ``order`` (ties: as registered): the built-in ones
    (imported here), the plug-ins' (loaded once) and any registered since (a test's toy)."""
    for m in builtin_modules():
        importlib.import_module(m)
    _load_plugins_once()
    return sorted(_REGISTRY.values(), key=lambda s: s.order)


def add_other_flags(group: argparse._ArgumentGroup) -> None:
    """The flags of the probes that are not built in (plug-ins, loaded once, and any
    registered by hand), by ``order``: probes/flags.py added the built-in ones' from its
    table without importing them (add_probe_flags there calls this)."""
    _load_plugins_once()
    for spec in sorted(_REGISTRY.values(), key=lambda s: s.order):
        if spec.name in BUILTIN_FLAGS:
            continue
        for flag in spec.flags:
            flag.add_to(group)
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
