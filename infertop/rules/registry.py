"""The rule catalogue: every rule of the six layer modules, in screen order."""

from __future__ import annotations

from functools import lru_cache

from .base import Rule


@lru_cache(maxsize=1)
def all_rules() -> tuple[Rule, ...]:
    from . import decoding, fleet, hardware, kernels, memory, parallelism, scheduling
    rules = (*hardware.RULES, *kernels.RULES, *memory.RULES, *scheduling.RULES,
             *parallelism.RULES, *decoding.RULES,
             *fleet.RULES)  # cross-node: only a fleet's Frame has node labels
    codes = [r.code for r in rules]
    assert len(set(codes)) == len(codes), "duplicate finding code"
    return rules


def codes() -> tuple[str, ...]:
    return tuple(r.code for r in all_rules())
