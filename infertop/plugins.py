"""Entry points: a server kind or a probe shipped as its own package (issue 34 item 2).

Both registries (infertop/servers/registry.py, probes/registry.py) load their group the
same way: each entry point loaded and handed to the registry's ``take`` (which checks
what it got and registers it, raising on anything wrong); one that fails is left out with
its reason in ``errors``, never the end of infertop (doctor prints the reasons).

importlib.metadata is imported only when some installed distribution may declare the
group (``may_declare``): its import and scan of every distribution cost ~25 ms on a quiet
box and ~100 ms on a loaded one, paid by `infertop --help` and the screen's no-terminal
error on a machine with no plug-in at all (issue 35: instant start)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import importlib.metadata

# the bytes of one entry_points.txt read at most (a real one is a few hundred bytes)
ENTRY_POINTS_TXT_BYTES = 1 << 20


def may_declare(group: str) -> bool:
    """Whether an installed distribution may declare an entry point in ``group``: some
    ``*.dist-info``/``*.egg-info`` folder on sys.path (where importlib.metadata's own path
    finder looks) has an entry_points.txt naming it.  True as well for what this scan
    cannot look into (a zip on sys.path, another finder of distributions on
    sys.meta_path): there the full lookup decides.  A false True costs the lookup only."""
    from importlib.machinery import PathFinder
    if any(f is not PathFinder and hasattr(f, "find_distributions") for f in sys.meta_path):
        return True
    for entry in sys.path:
        root = entry or "."
        try:
            children = os.listdir(root)
        except OSError:
            if os.path.isfile(root):      # a zip: importlib.metadata reads inside it
                return True
            continue
        egg = root.lower().endswith(".egg")
        for child in children:
            low = child.lower()
            if not (low.endswith((".dist-info", ".egg-info")) or (egg and low == "egg-info")):
                continue
            try:
                with open(os.path.join(root, child, "entry_points.txt"), "rb") as f:
                    if group.encode() in f.read(ENTRY_POINTS_TXT_BYTES):
                        return True
            except OSError:     # none (most distributions), or an egg-info file
                continue
    return False


def load_group(group: str, entry_points: Iterable[importlib.metadata.EntryPoint] | None,
               take: Callable[[object], str], errors: dict[str, str]) -> list[str]:
    """Load ``group``'s entry points (``entry_points``: those instead, for tests) through
    ``take``; returns the names ``take`` registered, records the others in ``errors``."""
    if entry_points is None:
        if not may_declare(group):
            return []
        import importlib.metadata
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
