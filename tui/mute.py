"""Acknowledged findings (`m` in `f`): muted for a while, as an on-call silences an alert
it is working on.  A muted finding stays listed in `f`, dimmed, and leaves the findings
strip; it comes back by itself when its time is up or when it worsens (its severity rises
above the one it was muted at).  Times are the frame's clock (a replay's own)."""

from __future__ import annotations

from dataclasses import dataclass, field

from infertop.findings import Finding

MUTE_SECONDS = 30 * 60     # long enough to work on it, short enough not to forget it


@dataclass
class Mutes:
    until: dict[tuple, tuple[float, int]] = field(default_factory=dict)   # key: (end, rank)

    @staticmethod
    def key(f: Finding) -> tuple:
        return (f.code, f.subject)

    def mute(self, f: Finding, now: float, seconds: float = MUTE_SECONDS) -> None:
        self.until[self.key(f)] = (now + seconds, f.severity.rank)

    def unmute(self, f: Finding) -> None:
        self.until.pop(self.key(f), None)

    def muted(self, f: Finding, now: float) -> float | None:
        """When ``f``'s mute ends, or None when it is not muted (any more: a mute that
        ran out or that the finding outgrew is forgotten here)."""
        got = self.until.get(self.key(f))
        if got is None:
            return None
        end, rank = got
        if now >= end or f.severity.rank > rank:
            del self.until[self.key(f)]
            return None
        return end

    def split(self, findings: list[Finding], now: float) -> tuple[list[Finding], int]:
        """(the findings not muted, in their order; how many are muted)."""
        if not self.until:
            return list(findings), 0
        shown = [f for f in findings if self.muted(f, now) is None]
        return shown, len(findings) - len(shown)
