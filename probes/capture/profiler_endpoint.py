"""The server's own profiler over HTTP (fallback of the `n` key, behind a confirmation).

Two shapes, declared by each kind (``profiler`` in infertop/servers/<kind>.py):
start, hold for some seconds, stop (vLLM: ``POST /start_profile``, wait, ``POST
/stop_profile``, which blocks until the traces are flushed: minutes on big models), or
start for a number of forward steps that stops by itself (SGLang: ``{"num_steps": N}``).
Facts: docs/reference/metrics.md sections 1.5 and 2.
"""

from __future__ import annotations

import asyncio
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from infertop.probes.capture.window import hold_window
from infertop.servers import registry

__all__ = ["ProfileEndpointResult", "start_stop_profile", "trace_dir_hint", "confirm_text",
           "NOT_ENABLED_MESSAGE"]

NOT_ENABLED_MESSAGE = ("server not started with a profiler config "
                       "(vLLM: --profiler-config / VLLM_TORCH_PROFILER_DIR)")


@dataclass(slots=True)
class ProfileEndpointResult:
    ok: bool
    kind: str
    base_url: str
    message: str
    started: bool = False
    stopped: bool = False
    status_code: int | None = None
    trace_location: str | None = None
    seconds: float = 0.0        # how long the profiler ran (vLLM), 0 for SGLang's step count
    fix: str = ""
    cancelled: bool = False


def confirm_text(kind: str, seconds: float, num_steps: int | None = None) -> str:
    """What the confirmation dialog says before we touch the server's profiler."""
    k = registry.kind(kind)
    if k is None or k.profiler is None:   # not offered for such a server: said anyway
        return (f"Start the server's profiler for {seconds:g} s? Requests run slower "
                "meanwhile.")
    return k.profiler.confirm(seconds, num_steps)


def trace_dir_hint(kind: str, cmdline: Sequence[str]) -> str | None:
    """Where the server writes its traces, read from its command line if it says."""
    k = registry.kind(kind)
    if k is None or k.profiler is None:
        return None
    return k.profiler.trace_dir(cmdline)


async def _post(client: Any, path: str, body: dict | None, timeout: float) -> Any:
    return await client.post(path, json=body, timeout=timeout) if body is not None else \
        await client.post(path, timeout=timeout)


async def start_stop_profile(base_url: str, kind: str, seconds: float = 10.0, *,
                             transport: Any = None, num_steps: int | None = None,
                             output_dir: str | None = None, cmdline: Sequence[str] = (),
                             cancel: asyncio.Event | None = None,
                             progress: Callable[[float], None] | None = None,
                             timeout: float = 10.0, stop_timeout: float = 900.0
                             ) -> ProfileEndpointResult:
    """Run the server's profiler: vLLM for ``seconds``, SGLang for ``num_steps`` steps.

    Never raises for server-side trouble: the result says what happened and how to fix it.
    ``transport`` is an httpx transport (tests pass httpx.MockTransport).
    """
    import httpx  # lazy: probes import heavy libraries only when used

    kind_l = kind.lower()
    base = base_url.rstrip("/")
    res = ProfileEndpointResult(False, kind_l, base, "",
                                trace_location=trace_dir_hint(kind_l, cmdline))
    k = registry.kind(kind_l)
    spec = k.profiler if k is not None else None
    if k is None or spec is None:
        res.message = f"{kind} has no profiler endpoint infertop knows"
        return res
    if not 1 <= float(seconds) <= 3600:
        res.message = f"profile duration must be 1..3600 s, got {seconds!r}"
        return res
    async with httpx.AsyncClient(base_url=base, transport=transport) as client:
        body: dict[str, Any] | None = None
        if spec.stops_by_itself:
            body = {"num_steps": int(num_steps or spec.steps)}
            if output_dir:
                body["output_dir"] = output_dir
        try:
            r = await _post(client, "/start_profile", body, timeout)
        except httpx.HTTPError as e:
            res.message = f"cannot reach {base}/start_profile: {e.__class__.__name__}: {e}"
            return res
        res.status_code = r.status_code
        if r.status_code in (404, 405):
            res.message = NOT_ENABLED_MESSAGE
            res.fix = spec.not_found_fix
            return res
        if r.status_code >= 400 or "already in progress" in r.text.lower():
            res.message = f"/start_profile answered {r.status_code}: {r.text.strip()[:300]}"
            if "already in progress" in r.text.lower():
                res.fix = f"a profile is already running: curl -X POST {base}/stop_profile"
            return res
        res.started = True
        if spec.stops_by_itself:
            res.ok = True
            n = body["num_steps"] if body else spec.steps
            where = output_dir or res.trace_location
            res.message = (f"{k.title} is profiling the next {n} forward steps and stops by itself "
                           f"(an idle server takes no steps: send requests); traces go to {where}")
            if output_dir:
                res.trace_location = output_dir
            return res
        # keep it open for `seconds`, then stop (stop always runs, even on cancel)
        t0 = time.monotonic()
        stop_error: Exception | None = None
        try:
            await hold_window(seconds, cancel, progress)
        finally:
            res.cancelled = bool(cancel is not None and cancel.is_set())
            res.seconds = time.monotonic() - t0
            try:
                r = await _post(client, "/stop_profile", None, stop_timeout)
            except httpx.HTTPError as e:
                stop_error = e
        if stop_error is not None:
            res.message = (f"profiling started but /stop_profile failed: "
                           f"{stop_error.__class__.__name__}: {stop_error}")
            res.fix = f"stop it by hand: curl -X POST {shlex.quote(base + '/stop_profile')}"
            return res
        res.status_code = r.status_code
        if r.status_code >= 400:
            res.message = f"/stop_profile answered {r.status_code}: {r.text.strip()[:300]}"
            res.fix = f"stop it by hand: curl -X POST {shlex.quote(base + '/stop_profile')}"
            return res
        res.stopped = True
        res.ok = True
        where = res.trace_location or "the server's torch_profiler_dir (see its --profiler-config)"
        res.message = (f"{k.title} profiled {res.seconds:.1f} s; traces written on the server host "
                       f"to {where}")
        if progress:
            progress(1.0)
        return res
