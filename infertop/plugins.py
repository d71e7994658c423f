"""Entry points: a server kind or a probe shipped as its own package (issue 34 item 2).

Both registries (infertop/servers/registry.py, probes/registry.py) load their group the
same way: each entry point loaded and handed to the registry's ``take`` (which checks
what it got and registers it, raising on anything wrong); one that fails is left out with
its reason in ``errors``, never the end of infertop (doctor prints the reasons)."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Iterable


def load_group(group: str, entry_points: Iterable[importlib.metadata.EntryPoint] | None,
               take: Callable[[object], str], errors: dict[str, str]) -> list[str]:
    """Load ``group``'s entry points (``entry_points``: those instead, for tests) through
    ``take``; returns the names ``take`` registered, records the others in ``errors``."""
    if entry_points is None:
        entry_points = importlib.metadata.entry_points(group=group)
    added = []
    for ep in entry_points:
        try:
            name = take(ep.load())
        except Exception as e:   # a broken plug-in is left out, never the end of infertop
            errors[ep.name] = f"{ep.value}: {type(e).__name__}: {e}"
            continue
        errors.pop(ep.name, None)
        added.append(name)
    return added
