"""infertop/derive.py pinned where a mutation run (tools/mutate.py, issue 31 item 8) found
its tests silent: when a finish-driven counter's step rates are rates, a share over an
idle window, and the refusal share per server (its denominator, its overflow).  History
is filled directly; derive()'s own readings are read back."""

from __future__ import annotations

from collections.abc import Callable

from helpers.snapkit import reading
from infertop import derive
from infertop.history import History, Series
from infertop.model import Reading, Status

STEP = derive.THROUGHPUT_STEP
NEED = derive.FINISHES_PER_STEP


def _counter(moves_per_step: Callable[[int], int], steps: int = 3) -> tuple[History, float]:
    """A counter read every second for ``steps`` steps, moving ``moves_per_step(k)`` times
    in step k (0: the newest); (history, now)."""
    h = History()
    n = int(steps * STEP)
    value = 0.0
    for i in range(n + 1):
        t = 1000.0 + i
        k = int((1000.0 + n - t) // STEP)
        step_start = 1000.0 + n - (k + 1) * STEP
        # the k-th step's moves happen on its first seconds, one a second
        if 0 <= k < steps and 0 < t - step_start <= moves_per_step(k):
            value += 1.0
        h.add_readings(t, [reading("server.generation_tokens_total", value, instance="a")])
    return h, 1000.0 + n


def _series(h: History) -> Series:
    (s,) = h.find("server.generation_tokens_total")
    return s


def test_a_finish_driven_counter_is_a_rate_only_when_every_step_saw_enough_finishes() -> None:
    h, now = _counter(lambda k: NEED)
    assert derive._finishes_each_step(_series(h), now, 3) is True
    h, now = _counter(lambda k: NEED - 1 if k == 1 else NEED)
    assert derive._finishes_each_step(_series(h), now, 3) is False
    h, now = _counter(lambda k: NEED + 2)
    assert derive._finishes_each_step(_series(h), now, 3) is True


def test_a_counter_that_reaches_no_whole_step_yet_is_no_rate() -> None:
    h = History()
    for i in range(5):
        h.add_readings(1000.0 + i, [reading("server.generation_tokens_total", float(i),
                                            instance="a")])
    assert derive._finishes_each_step(_series(h), 1004.0, 3) is False


def _find(rs: list[Reading], key: str, **labels: str) -> list[Reading]:
    return [r for r in rs if r.key == key
            and all(r.label(k) == v for k, v in labels.items())]


def test_a_share_over_an_idle_window_is_no_share() -> None:
    h = History()
    for t in (1000.0, 1010.0):
        h.add_readings(t, [reading("kv.prompt_tokens_by_source_total", 50.0, instance="a",
                                   source=src) for src in ("local_compute", "local_cache")])
    got = list(derive._shares(h, "kv.prompt_source_ratio", "kv.prompt_tokens_by_source_total",
                              "source", 60.0))
    assert len(got) == 2
    assert all(r.value is None and r.status is Status.NODATA
               and r.reason == "no traffic in the window" for r in got)


def _requests(rejected: dict[str, float], finished: dict[str, float]) -> list[Reading]:
    h = History()
    for i, t in enumerate((1000.0, 1010.0)):
        rs = [reading("server.admission_rejections_total", v * i, instance=inst, model="m",
                      reason="queue_full") for inst, v in rejected.items()]
        rs += [reading("server.requests_finished_total", v * i, instance=inst, model="m",
                       reason="stop") for inst, v in finished.items()]
        h.add_readings(t, rs)
    return derive.derive(h, window=60.0)


def test_the_refusal_share_counts_the_same_servers_finished_requests_only() -> None:
    out = _requests({"a": 10.0}, {"a": 30.0, "b": 1000.0})
    (ratio,) = _find(out, "server.rejection_ratio", instance="a")
    assert ratio.ok and ratio.value == 0.25
    (n,) = _find(out, "server.requests_rejected", instance="a")
    assert n.value == 10.0


def test_a_refusal_count_that_overflows_is_an_error_not_a_ratio() -> None:
    out = _requests({"a": 1e308}, {"a": 1e308})
    (ratio,) = _find(out, "server.rejection_ratio", instance="a")
    assert ratio.status is Status.ERROR and ratio.value is None
    assert ratio.reason == "request counts overflow the float range"
