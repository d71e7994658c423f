"""Every server kind infertop knows, and the questions the rest of the tree asks about them.

The kinds are found, not listed: each module of this package that defines ``KIND`` (a
``ServerKind``) is one kind, ordered by ``KIND.order``.  Adding a server is one module
(docs/servers.md).  Discovery, settings, the profiler captures, the Prometheus fleet
source, the rules, the scheduling pane and the demo ask here instead of keeping their own
per-kind tables.

A kind can also ship as its own package: a distribution that declares an entry point in
the ``infertop.servers`` group (``lmdeploy = "infertop_lmdeploy"``) naming a module that
defines ``KIND`` (or the ``ServerKind`` itself) is loaded after the built-in kinds.  A
plug-in that fails to load, or that takes a built-in kind's name or order, is left out
and the reason kept in ``plugin_errors()`` (``infertop doctor`` prints it on stderr);
it never stops infertop.

``register``/``unregister`` add a kind from elsewhere (a test's toy kind).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from ..plugins import load_group
from .mapping import Dialect
from .spec import ServerKind

if TYPE_CHECKING:   # imported by plugins.py only when a plug-in may be installed
    import importlib.metadata

__all__ = ["ServerKind", "KINDS", "kind", "kinds", "names", "register", "unregister",
           "ENTRY_POINT_GROUP", "load_plugins", "plugin_errors",
           "dialects", "default_port", "is_python", "python_title_prefixes",
           "is_preallocating", "role_priority", "demo_kinds", "looked_for"]

# Roles the process probe gives to members no kind claims: the server's own root process
# ("server") and anything else in its tree ("helper").  Display priority as for the kinds'.
GENERIC_ROLES: Mapping[str, int] = MappingProxyType({"server": 2, "helper": 5})
# A role no kind declares sorts after every declared one.
UNKNOWN_ROLE_PRIORITY = 6

# the entry-point group a kind shipped as its own package declares itself in
ENTRY_POINT_GROUP = "infertop.servers"

_KINDS: dict[str, ServerKind] = {}
_PLUGIN_ERRORS: dict[str, str] = {}   # entry point name -> why it was left out
_version = 0          # bumped on every change: caches built from the kinds compare it
_cache: dict[str, tuple[int, object]] = {}


def _load() -> None:
    pkg = importlib.import_module(__package__ or "infertop.servers")
    found = []
    for mod in pkgutil.iter_modules(pkg.__path__):
        m = importlib.import_module(f"{pkg.__name__}.{mod.name}")
        k = getattr(m, "KIND", None)
        if isinstance(k, ServerKind):
            found.append(k)
    for k in sorted(found, key=lambda k: k.order):
        register(k)


def _kind_of(obj: object) -> ServerKind | None:
    """An entry point's object: a ServerKind, or a module defining ``KIND``."""
    if isinstance(obj, ServerKind):
        return obj
    k = getattr(obj, "KIND", None)   # a plug-in's module: its one declared name
    return k if isinstance(k, ServerKind) else None


def load_plugins(entry_points: Iterable[importlib.metadata.EntryPoint] | None = None
                 ) -> list[str]:
    """Register the kinds other packages declare in the ``infertop.servers`` entry-point
    group (``entry_points``: those to load instead, for tests); returns the names added.
    A plug-in may not replace a built-in kind or take another's order."""
    def take(obj: object) -> str:
        k = _kind_of(obj)
        if k is None:
            raise ValueError("defines no KIND (a ServerKind)")
        if k.name in _KINDS:
            raise ValueError(f"kind {k.name!r} already exists")
        register(k)
        return k.name
    return load_group(ENTRY_POINT_GROUP, entry_points, take, _PLUGIN_ERRORS)


def plugin_errors() -> Mapping[str, str]:
    """Entry points of the ``infertop.servers`` group left out, and why."""
    return MappingProxyType(dict(_PLUGIN_ERRORS))


def register(k: ServerKind) -> None:
    """Add (or replace) a kind; the kinds stay ordered by ``order``."""
    global _version
    others = [x for x in _KINDS.values() if x.name != k.name]
    clash = next((x for x in others if x.order == k.order), None)
    if clash is not None:
        raise ValueError(f"server kind {k.name!r}: order {k.order} is {clash.name!r}'s")
    ordered = sorted([*others, k], key=lambda x: x.order)
    _KINDS.clear()
    _KINDS.update((x.name, x) for x in ordered)
    _version += 1


def unregister(name: str) -> None:
    global _version
    if _KINDS.pop(name, None) is not None:
        _version += 1


def _cached(key: str, build):
    hit = _cache.get(key)
    if hit is not None and hit[0] == _version:
        return hit[1]
    value = build()
    _cache[key] = (_version, value)
    return value


# ---- lookups -------------------------------------------------------------------------------

class _KindsView(Mapping[str, ServerKind]):
    """name -> ServerKind, in order; follows register/unregister."""

    def __getitem__(self, name: str) -> ServerKind:
        return _KINDS[name]

    def __iter__(self):
        return iter(list(_KINDS))

    def __len__(self) -> int:
        return len(_KINDS)

    def __repr__(self) -> str:
        return f"KINDS({', '.join(_KINDS)})"


KINDS: Mapping[str, ServerKind] = _KindsView()


def kind(name: str | None) -> ServerKind | None:
    """The kind called ``name`` (any case), or None ("python", "unknown", "")."""
    if not name:
        return None
    return _KINDS.get(name) or _KINDS.get(name.lower())


def kinds() -> tuple[ServerKind, ...]:
    return tuple(_KINDS.values())


def names() -> tuple[str, ...]:
    return tuple(_KINDS)


def dialects() -> Mapping[str, Dialect]:
    """dialect name -> Dialect, in the kinds' order (infertop/dialects.py's tables)."""
    return _cached("dialects", lambda: MappingProxyType(
        {k.dialect.name: k.dialect for k in _KINDS.values()}))


def default_port(name: str | None) -> int | None:
    k = kind(name)
    return k.default_port if k else None


def is_python(name: str, role: str = "") -> bool:
    """Whether a process of this kind and role runs Python ("python": any Python process
    discovery did not place in a server)."""
    if name == "python":
        return True
    k = kind(name)
    return k is not None and (k.python or role in k.python_roles)


def python_title_prefixes() -> tuple[str, ...]:
    """Lower-case title prefixes of the Python kinds ('vllm', 'sglang'): a process named
    so runs Python even when nothing else is known about it."""
    return _cached("pyprefixes", lambda: tuple(
        k.titles.prefix.lower() for k in _KINDS.values() if k.python and k.titles))


def is_preallocating(name: str | None) -> bool:
    """Whether the kind reserves most of a GPU for its KV cache at start-up, by design."""
    k = kind(name)
    return k is not None and k.preallocating


def role_priority() -> Mapping[str, int]:
    """Process role -> display priority over every kind (0 first: the processes doing
    the work); a role two kinds share takes the smaller number."""
    def build() -> Mapping[str, int]:
        out = dict(GENERIC_ROLES)
        for k in _KINDS.values():
            for role, prio in k.roles.items():
                out[role] = min(prio, out.get(role, prio))
        return MappingProxyType(out)
    return _cached("roles", build)


def demo_kinds() -> tuple[str, ...]:
    """The kinds the demo can serve (those with a demo renderer)."""
    return tuple(k.name for k in _KINDS.values() if k.demo_render)


def looked_for(names_: Iterable[str] | None = None) -> str:
    """'vLLM, SGLang, ...' for messages that say what discovery searched for."""
    chosen = [k for k in _KINDS.values() if names_ is None or k.name in names_]
    return ", ".join(k.title for k in chosen)


_load()
load_plugins()
