"""Matching NVML's GPU processes to the server's process tree (pure).

NVML reports host PIDs; inside a container the tree has other PIDs, and the process probe
records the pairs it could read (``/proc/PID/status`` NSpid) as ``pid_aliases``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def map_gpu_pids(tree_pids: set[int] | Iterable[int],
                 gpu_procs: Iterable[tuple[Any, int, float]],
                 ns_pid_map: Mapping[int, int] | Iterable[tuple[int, int]] | None = None,
                 *, visible: set[int] | None = None) -> tuple[dict[int, list[Any]], list[int]]:
    """Which GPUs each server process uses, from NVML's (gpu, pid, bytes) list.

    NVML reports host PIDs; a tree seen from inside a container has other PIDs.  A GPU
    process matches a tree pid directly or through ``ns_pid_map`` (alias -> tree pid, from
    ``ns_pid_aliases``).  ``unmatched``: GPU pids that match nothing and are not a process
    we can see (``visible``; when None, every pid outside the tree counts): the pane says
    "N GPU processes not in this PID namespace".
    """
    tree = set(tree_pids)
    aliases = dict(ns_pid_map or {})
    matched: dict[int, list[Any]] = {}   # GPU: its index, or its label (the rules)
    unmatched: set[int] = set()
    for gpu, pid, _bytes in gpu_procs:
        local = pid if pid in tree else aliases.get(pid)
        if local is not None and local in tree:
            gpus = matched.setdefault(local, [])
            if gpu not in gpus:
                gpus.append(gpu)
        elif visible is None or (pid not in visible and pid not in aliases):
            unmatched.add(pid)
    return {p: sorted(g) for p, g in sorted(matched.items())}, sorted(unmatched)


def gpu_holders(tree: Iterable[int], gpu_procs: Iterable[tuple[int, int, float]],
                aliases: Iterable[tuple[int, int]] | None,
                names: Mapping[int, str]) -> tuple[dict[int, str], list[int]]:
    """GPU pid -> the tree process's name (role) that holds it, and the GPU pids that belong
    to no process of the tree (another program, or a PID namespace we cannot see into)."""
    alias = dict(aliases or {})
    tree = set(tree)
    gpu_procs = list(gpu_procs)
    matched, unmatched = map_gpu_pids(tree, gpu_procs, alias)
    out = {}
    for _gpu, pid, _b in gpu_procs:
        local = pid if pid in tree else alias.get(pid)
        if local in matched:
            out[pid] = names.get(local, str(local))
    return out, unmatched
