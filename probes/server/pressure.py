"""The host's pressure stall information (PSI, Linux 4.20+): how much of the time tasks
waited for a CPU, for memory or for I/O, from ``/proc/pressure/{cpu,memory,io}``.

CPU saturation of the host starves a server's scheduler thread even when its own process
looks idle (docs/alerts.md, the host-saturation recordings); the load average says how
many wait, PSI says for how long.  Each file has two lines (the kernel's
Documentation/accounting/psi.rst)::

    some avg10=44.31 avg60=32.68 avg300=35.69 total=263280827
    full avg10=0.00 avg60=0.00 avg300=0.00 total=0

``some``: at least one task stalled; ``full``: every non-idle task stalled at once (for
CPU only at the cgroup level; the system-wide line reads 0).  ``avg10`` is a percentage
over 10 s, ``total`` the stalled time in microseconds since boot (a counter: its rate is
the stalled share over infertop's own window).

Hostile input: each file is read with one bounded read; a value that is not a finite
number in range is left out and named in the sample's reason, never shown as 0.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from typing import Any

from infertop.model import Capability, Reading, Sample, Status
from infertop.probes.base import BlockingProbe, sample
from infertop.probes.flags import BUILTIN_FLAGS
from infertop.probes.registry import LiveTarget, ProbeSpec, register

PRESSURE_DIR = "/proc/pressure"
RESOURCES = ("cpu", "memory", "io")
READ_LIMIT = 1024      # a PSI file is ~110 bytes; more is not a PSI file
SCOPES = ("some", "full")


def parse_pressure(text: str) -> tuple[dict[str, dict[str, float]], list[str]]:
    """scope -> {"avg10": percent, "total": microseconds, ...}, and the problems met."""
    out: dict[str, dict[str, float]] = {}
    problems: list[str] = []
    for line in text.splitlines():
        scope, _, rest = line.strip().partition(" ")
        if scope not in SCOPES:
            if line.strip():
                problems.append(f"unexpected line {line[:40]!r}")
            continue
        fields: dict[str, float] = {}
        for part in rest.split():
            name, eq, value = part.partition("=")
            if not eq:
                continue
            try:
                v = float(value)
            except ValueError:
                problems.append(f"{scope} {name}: not a number")
                continue
            limit = 100.0 if name.startswith("avg") else math.inf
            if not (math.isfinite(v) and 0.0 <= v <= limit):
                problems.append(f"{scope} {name}={value[:20]}: out of range")
                continue
            fields[name] = v
        out[scope] = fields
    return out, problems


def readings_of(resource: str, parsed: dict[str, dict[str, float]]) -> list[Reading]:
    labels = (("resource", resource),)
    out = []
    for scope, key in (("some", "host.pressure_some_ratio"),
                       ("full", "host.pressure_full_ratio")):
        avg10 = parsed.get(scope, {}).get("avg10")
        if avg10 is not None:
            out.append(Reading.of(key, avg10 / 100.0, labels))
    for scope in SCOPES:
        total = parsed.get(scope, {}).get("total")
        if total is not None:
            out.append(Reading.of("host.pressure_stall_seconds_total", total / 1e6,
                                  (*labels, ("scope", scope))))
    return out


def _read(path: str) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, READ_LIMIT).decode("ascii", "replace")
    finally:
        os.close(fd)


class PressureProbe(BlockingProbe):
    name = "pressure"

    def __init__(self, directory: str = PRESSURE_DIR) -> None:
        super().__init__()
        self.directory = directory

    def open_blocking(self) -> Capability:
        try:
            _read(os.path.join(self.directory, "cpu"))
        except OSError as e:
            return Capability(self.name, False, f"no PSI here ({self.directory}/cpu: "
                                                f"{e.strerror}; Linux 4.20+ with psi=1)")
        return Capability(self.name, True)

    def collect_blocking(self) -> Sample:
        started = time.perf_counter()
        readings: list[Reading] = []
        problems: list[str] = []
        for resource in RESOURCES:
            try:
                text = _read(os.path.join(self.directory, resource))
            except OSError as e:
                problems.append(f"{resource}: {e.strerror}")
                continue
            parsed, bad = parse_pressure(text)
            readings += readings_of(resource, parsed)
            problems += [f"{resource}: {b}" for b in bad]
        if not readings:
            return sample(self.name, [], status=Status.ERROR,
                          reason="; ".join(problems) or "no PSI line read", started=started)
        return sample(self.name, readings, reason="; ".join(problems[:3]), started=started)


def build(args: Any, target: LiveTarget) -> Sequence[PressureProbe]:
    # a kernel without PSI: no probe (the host's load and CPU share still show)
    return [PressureProbe(PRESSURE_DIR)] if os.path.exists(os.path.join(PRESSURE_DIR, "cpu")) \
        else []


SPEC = register(ProbeSpec(
    name="pressure", order=60,
    keys=("host.pressure_some_ratio", "host.pressure_full_ratio",
          "host.pressure_stall_seconds_total"),
    needs="Linux 4.20+ with PSI on (/proc/pressure/cpu readable)",
    build=build,
    flags=BUILTIN_FLAGS["pressure"],   # declared in probes/flags.py: --help imports no probe
    off=lambda args: "host pressure off (--no-pressure)"
    if getattr(args, "no_pressure", False) else "",   # a hand-built Namespace may lack it
))
