"""The per-GPU process list of a zoomed memory pane, as nvitop shows it: GPU, PID, user,
role, GPU memory, SM %, command.

Everything comes from readings the probes already produce: NVML's per-process memory and
SM share (``process.gpu_mem_bytes``, ``process.gpu_sm_ratio``, host PIDs) and the process
probe's ``process.info`` (user label, command line, already cleaned and redacted there;
cleaned again here because a replayed file is outside input too); for a GPU process
outside the server's tree, the NVML probe's ``process.gpu_owner`` (probes/nvml/owners.py),
which is missing when infertop runs in a container that cannot see host PIDs.
"""

from __future__ import annotations

from rich.text import Text

from infertop.textclean import clean
from infertop.units import natural_key

from .columns import Columns
from .context import PaneContext

HEADERS = ["GPU", "PID", "user", "role", "GPU mem", "SM", "command"]


def not_the_server(owner) -> str:
    """A GPU process outside the followed server's tree, with its container or pod when it
    runs in one (another pod's server, on a node running several)."""
    box = clean(owner.label("container")) if owner is not None else ""
    return f"{box} (not the server)" if box else "(not the server)"


def gpu_process_table(ctx: PaneContext) -> Columns | None:
    procs = [r for r in ctx.readings("process.gpu_mem_bytes") if r.label("pid")]
    if not procs:
        return None
    held, _outside = ctx.gpu_holders()
    info = {r.label("pid"): r for r in ctx.readings("process.info")}
    owners = {r.label("pid"): r for r in ctx.readings("process.gpu_owner")}
    pm = ctx.frame.snapshot.process_meta()
    aliases = {str(a): str(p) for a, p in (pm.pid_aliases if pm else ())}
    shown, left = ctx.top(procs, ctx.row_cap)
    # the pane's own order: by GPU, the biggest holder first (flagged rows go first anyway)
    shown = sorted(shown, key=lambda r: (natural_key(r.label("gpu")), -(r.value or 0.0)))
    t = Columns(HEADERS, header_style=ctx.styles["header"],
                max_width=max(26, ctx.width - 60) if ctx.width else 60)
    t.more = left
    t.main = True
    t.cut = (3, 6)    # role and command give way, never a PID or a reading
    for r in shown:
        pid, gpu = r.label("pid"), r.label("gpu")
        local = pid if pid in info else aliases.get(pid, "")
        p = info.get(local) or owners.get(pid)   # the server's own, else NVML's pid owner
        role = held.get(pid)
        sm = ctx.one("process.gpu_sm_ratio", gpu=gpu, pid=pid)
        t.add_row(gpu, pid,
                  clean(p.label("user")) if p is not None and p.label("user") else "–",
                  Text(role) if role else Text(not_the_server(owners.get(pid)),
                                               style=ctx.styles["muted"]),
                  ctx.value_text(r, key="process.gpu_mem_bytes"),
                  ctx.value_text(sm) if sm is not None else Text("–"),
                  clean(p.text or p.label("name")) if p is not None else "–")
    return t
