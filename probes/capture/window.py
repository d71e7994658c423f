"""The capture window shared by Nsight and the server's profiler endpoint: wait ``seconds``
while reporting progress, and end early when the user cancels (Esc)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def hold_window(seconds: float, cancel: asyncio.Event | None,
                      progress: Callable[[float], None] | None) -> None:
    """Return after ``seconds`` or as soon as ``cancel`` is set.  Progress ticks every
    0.2 s and never reports 1.0: the caller does, once its files are written."""
    t0 = time.monotonic()
    waiter = asyncio.ensure_future((cancel or asyncio.Event()).wait())
    try:
        while (elapsed := time.monotonic() - t0) < seconds and not waiter.done():
            if progress:
                progress(min(0.99, elapsed / seconds))
            await asyncio.wait([waiter], timeout=min(0.2, seconds - elapsed))
    finally:
        waiter.cancel()
