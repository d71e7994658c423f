"""Execution settings a server was started with, read from its command line.

``server_settings(kind, cmdline)`` turns e.g. ``vllm serve m --max-num-seqs 64 -tp 2``
into ``{"model": "m", "max_num_seqs": "64", "tensor_parallel_size": "2", ...}``.  Which
flags give which setting is each kind's own table (``settings`` in
infertop/servers/<kind>.py); this module finds the arguments and asks the registry.  The
flag reader (argparse rules) is infertop/servers/flags.py, shared with discovery's
``port_from_cmdline``.  Pure: no I/O, no psutil.
"""

from __future__ import annotations

from collections.abc import Iterable

from infertop.servers import registry

# re-exported: discovery reads the port flag with them
from infertop.servers.flags import parse_flags as parse_flags
from infertop.servers.flags import pick as _pick

__all__ = ["server_settings", "parse_flags", "_pick"]


def server_settings(kind: str, cmdline: Iterable[str] | None) -> dict[str, str]:
    """Execution settings a server was started with, as name -> text.

    Names shared between servers (model, cuda_graphs, tensor/pipeline/data_parallel_size,
    kv_cache_dtype, prefix_caching) mean the same thing everywhere; the others keep the
    server's own flag name.  Only what the command line says, plus cuda_graphs (and for
    llama.cpp cont_batching) whose default is worth showing.  ``-O3`` style (vLLM) is read
    as compilation_config.
    """
    # at call time: discovery imports this module while it loads, so a top-level import
    # of discovery here would be circular
    from infertop.probes.server.discovery import split_program

    how, prog, args = split_program(cmdline)
    if how == "exe" and prog == "" and not args:
        return {}
    k = registry.kind(kind)
    if k is None or k.settings is None:
        return {}
    return k.settings(args)
