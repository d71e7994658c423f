"""The test kit a server kind or a probe runs, inside infertop or shipped as its own package.

A kind's package calls ``check_kind(KIND)`` and ``check_fixture_page(KIND, page)`` on each
/metrics page it ships; a probe's package calls ``check_probe_spec(SPEC)`` and
``check_samples(SPEC, samples)`` on Samples its probe collected.  Each raises
``ContractError`` naming what is wrong, the same checks infertop's own suite runs on its
built-in kinds and probes (tests/test_servers_registry.py, tests/test_probe_registry.py).

Pure: no I/O and no event loop (the caller reads its page and runs its probe).  ``spec``
arguments are typed loosely (anything with ``name``, ``keys``, ``order``), so the core does
not import ``infertop.probes``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from infertop.dialects import Exposition, detect_dialect, readings_from_exposition
from infertop.keys import SPECS
from infertop.model import Kind, Sample, Status
from infertop.promtext import parse
from infertop.servers import registry
from infertop.servers.spec import ServerKind

__all__ = ["ContractError", "check_kind", "check_fixture_page", "check_probe_spec",
           "check_samples", "BASIC_SERVER_KEYS"]

# what every kind's page must give, whatever else it has
BASIC_SERVER_KEYS = ("server.requests_running", "server.requests_waiting")


class ContractError(AssertionError):
    """A kind or probe breaks infertop's extension contract (the message says how)."""


class ProbeSpecLike(Protocol):
    # read-only members: a frozen dataclass (probes.registry.ProbeSpec) is one; plain
    # attributes here would ask for settable ones and reject it
    @property
    def name(self) -> str: ...
    @property
    def keys(self) -> tuple[str, ...]: ...
    @property
    def order(self) -> int: ...


def _fail(what: str, problems: Sequence[str]) -> None:
    if problems:
        raise ContractError(f"{what}: " + "; ".join(problems))


# ---- server kinds ---------------------------------------------------------------------------

def check_kind(kind: ServerKind) -> None:
    """The declaration itself: registered under its name, its dialect its own, every rule
    naming a declared key and a family under the dialect's prefixes, roles consistent, an
    order no other kind has, and a matcher that claims no unrelated program."""
    problems = []
    d = kind.dialect
    if registry.kind(kind.name) is not kind:
        problems.append("not registered (a module of infertop.servers, or an entry point "
                        f"in the {registry.ENTRY_POINT_GROUP!r} group)")
    if d.name != kind.name:
        problems.append(f"dialect is named {d.name!r}, not the kind's name")
    if not d.prefixes or not all(d.prefixes):
        problems.append("dialect declares no family prefix (detection needs one)")
    for r in d.rules:
        if r.key not in SPECS or SPECS[r.key].derived:
            problems.append(f"rule {r.families[0]} -> {r.key}: not a probe key of keys.py")
        if not all(f.startswith(d.prefixes) for f in r.families):
            problems.append(f"rule {r.families}: a family outside the prefixes {d.prefixes}")
    if not any(r.key in BASIC_SERVER_KEYS for r in d.rules):
        problems.append(f"maps none of {BASIC_SERVER_KEYS}")
    missing = set(kind.python_roles) - set(kind.roles)
    if missing:
        problems.append(f"python_roles {sorted(missing)} are not among its roles")
    clash = [k.name for k in registry.kinds() if k.order == kind.order and k is not kind]
    if clash:
        problems.append(f"order {kind.order} is also {clash}'s")
    for how, prog in (("exe", "bash"), ("exe", "python3"), ("module", "http.server")):
        hit = kind.match_argv(how, prog, ())
        if hit is not None and hit[0] == kind.name:
            problems.append(f"its matcher claims {prog!r} ({how})")
    if kind.default_port is not None and not 0 < kind.default_port < 65536:
        problems.append(f"default_port {kind.default_port} is not a TCP port")
    _fail(f"server kind {kind.name!r}", problems)


def check_fixture_page(kind: ServerKind, page: str, instance: str = "127.0.0.1:8000"
                       ) -> Exposition:
    """One /metrics page of the kind: detected as the kind, mapped to the basic keys and
    to most of what its table names (a renamed family would drop its key silently), with
    ``server.info`` naming the kind.  Returns the mapped page for the caller's own
    value-by-value checks."""
    problems = []
    detected = detect_dialect(parse(page))
    if detected != kind.name:
        problems.append(f"page detected as {detected!r}")
    e = readings_from_exposition(page, instance)
    got = {r.key for r in e.readings if r.status is Status.OK}
    missing = [k for k in BASIC_SERVER_KEYS if k not in got]
    if missing:
        problems.append(f"page gives no {missing}")
    rule_keys = {r.key for r in kind.dialect.rules}
    if len(got & rule_keys) < len(rule_keys) // 2:
        problems.append(f"page maps under half its table; missing {sorted(rule_keys - got)}")
    info = next((r for r in e.readings if r.key == "server.info"), None)
    if info is None or not (info.text or "").startswith(kind.name):
        problems.append("server.info does not name the kind")
    _fail(f"server kind {kind.name!r}, fixture page", problems)
    return e


# ---- probes ---------------------------------------------------------------------------------

def check_probe_spec(spec: ProbeSpecLike, others: Iterable[ProbeSpecLike] = ()) -> None:
    """The declaration: keys declared in infertop/keys.py as probe readings, none twice
    and none another probe's (``others``: the registered specs), an order of its own."""
    problems = []
    bad = [k for k in spec.keys if k not in SPECS or SPECS[k].derived]
    if bad:
        problems.append(f"keys not declared as probe readings in infertop/keys.py: {bad}")
    if len(set(spec.keys)) != len(spec.keys):
        problems.append("a key declared twice")
    for o in others:
        if o.name == spec.name:
            continue
        shared = sorted(set(spec.keys) & set(o.keys))
        if shared:
            problems.append(f"keys {shared} are also probe {o.name!r}'s")
        if o.order == spec.order:
            problems.append(f"order {spec.order} is also probe {o.name!r}'s")
    _fail(f"probe {spec.name!r}", problems)


def check_samples(spec: ProbeSpecLike, samples: Iterable[Sample]) -> set[str]:
    """Samples the probe collected: named after it, every reading a declared key of the
    probe with its spec's kind and unit, a value only where the status allows one.
    Returns the keys seen (the caller may require some)."""
    problems = []
    seen: set[str] = set()
    for s in samples:
        if s.source != spec.name and not s.source.startswith(spec.name + ":"):
            problems.append(f"sample source {s.source!r} is not {spec.name!r}[:instance]")
        for r in s.readings:
            seen.add(r.key)
            ks = SPECS.get(r.key)
            if r.key not in spec.keys or ks is None:
                problems.append(f"emits {r.key!r}, which it does not declare")
                continue
            if r.kind is not ks.kind and not (ks.kind is Kind.INFO and r.kind is Kind.GAUGE):
                problems.append(f"{r.key}: kind {r.kind.name}, declared {ks.kind.name}")
            if r.unit != ks.unit:
                problems.append(f"{r.key}: unit {r.unit!r}, declared {ks.unit!r}")
            if r.status is Status.OK and r.value is None:
                problems.append(f"{r.key}: status OK without a value")
    _fail(f"probe {spec.name!r}, samples", problems[:10])
    return seen
