"""tui/app.py in_daemon_thread: the pipeline's tick runs off the event loop in one
long-lived daemon thread, hands back its result or its exception, and a tick still
running never holds the next one (nor `q`) up."""

from __future__ import annotations

import asyncio
import threading

import pytest

from infertop.tui.app import in_daemon_thread


def test_results_come_back_from_one_reused_daemon_thread():
    from infertop.tui.app import _DaemonWorker
    assert _DaemonWorker._busy.acquire(timeout=60), "an earlier test's tick never ended"
    _DaemonWorker._busy.release()

    async def go():
        names = [await in_daemon_thread(lambda: threading.current_thread()) for _ in range(5)]
        return names

    threads = asyncio.run(go())
    assert len(set(threads)) == 1, "a thread per tick (each start waits on the GIL)"
    t = threads[0]
    assert t is not threading.main_thread() and t.daemon and t.name == "infertop-pipeline"


def test_an_exception_is_raised_in_the_awaiting_coroutine():
    def boom():
        raise ValueError("bad tick")

    async def go():
        with pytest.raises(ValueError, match="bad tick"):
            await in_daemon_thread(boom)
        return await in_daemon_thread(lambda: 41 + 1)   # and the thread still serves

    assert asyncio.run(go()) == 42


def test_work_given_while_a_tick_is_still_running_is_not_queued_behind_it():
    release = threading.Event()

    async def go():
        slow = asyncio.ensure_future(in_daemon_thread(release.wait, 30))
        await asyncio.sleep(0)
        fast = await asyncio.wait_for(in_daemon_thread(lambda: "fast"), 20)
        release.set()
        return fast, await slow

    assert asyncio.run(go()) == ("fast", True)


def test_a_result_whose_event_loop_has_closed_does_not_kill_the_thread():
    """An app that ended mid-tick closed its loop: handing the result over fails, and the
    one thread must go on serving the next app's ticks."""
    from infertop.tui.app import _DaemonWorker
    release = threading.Event()

    async def first():
        asyncio.ensure_future(in_daemon_thread(release.wait, 30))
        await asyncio.sleep(0)          # the job is running; this loop now ends

    asyncio.run(first())
    release.set()
    assert _DaemonWorker._busy.acquire(timeout=30)
    _DaemonWorker._busy.release()

    async def second():
        return await asyncio.wait_for(in_daemon_thread(lambda: threading.current_thread()), 20)

    t = asyncio.run(second())
    assert t.name == "infertop-pipeline" and t.is_alive()
