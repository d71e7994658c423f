"""The probe registry (probes/registry.py): a probe declared in its own module reaches the
command line and the live Hub with no edit to cli/, and its keys are checked."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from infertop.cli.args import build_parser, build_sub_parser
from infertop.cli.errors import UsageError
from infertop.cli.sources import make_source
from infertop.dialects import DIALECTS, GENERIC
from infertop.keys import SPECS
from infertop.model import Capability, Reading, Sample
from infertop.probes.base import Probe
from infertop.probes.registry import (
    ProbeSpec,
    ProbeUsageError,
    builtin_modules,
    probe_specs,
    register,
    unregister,
)
from infertop.probes.sources.demo import DemoSource
from infertop.probes.sources.hub import Hub

# a URL nothing listens on: no discovery by name, the server probe is built but never read
DEAD_URL = "http://127.0.0.1:9/metrics"


class ToyProbe(Probe):
    name = "toy"

    def __init__(self, level: int) -> None:
        self.level = level

    async def open(self) -> Capability:
        return Capability(self.name, True)

    async def collect(self) -> Sample:
        return Sample(self.name, 0.0, (Reading("host.load1", float(self.level)),))


def _toy_flags(g: Any) -> None:
    g.add_argument("--toy-level", type=int, default=0, help="the toy probe's level")


def _toy_build(args: Any, target: Any) -> list[Probe]:
    if args.toy_level < 0:
        raise ProbeUsageError(f"--toy-level: must be >= 0, got {args.toy_level}")
    return [ToyProbe(args.toy_level)]


@pytest.fixture
def toy():
    spec = register(ProbeSpec(name="toy", keys=("host.load1",), needs="nothing",
                              build=_toy_build, add_flags=_toy_flags,
                              off=lambda args: "toy off (--toy-level 0)"
                              if args.toy_level == 0 else ""))
    yield spec
    unregister("toy")


def _hub(argv: list[str]) -> Hub:
    src = make_source(build_sub_parser("snapshot").parse_args(argv))
    assert isinstance(src, Hub)
    return src


def test_a_registered_probe_gets_its_flag_and_its_place_in_the_hub(toy):
    assert "--toy-level" in build_parser().format_help()
    for cmd in ("snapshot", "doctor", "record"):
        assert "--toy-level" in build_sub_parser(cmd).format_help(), cmd
    hub = _hub(["--no-gpu", "--url", DEAD_URL, "--toy-level", "3"])
    toys = [p for p in hub.probes if isinstance(p, ToyProbe)]
    assert [t.level for t in toys] == [3]
    assert [p.name for p in hub.probes][-1] == "toy"     # after the built-in ones


def test_a_probe_the_flags_turn_off_is_shown_with_its_reason(toy):
    hub = _hub(["--no-gpu", "--url", DEAD_URL])
    assert not any(isinstance(p, ToyProbe) for p in hub.probes)
    assert hub.capabilities["toy"].reason == "toy off (--toy-level 0)"
    assert hub.capabilities["nvml"].reason == "GPU readings off (--no-gpu)"


def test_a_probe_refusing_a_flag_value_is_a_usage_error(toy):
    with pytest.raises(UsageError, match="--toy-level: must be >= 0"):
        _hub(["--no-gpu", "--url", DEAD_URL, "--toy-level", "-1"])


def test_without_the_toy_the_flag_is_unknown():
    assert "--toy-level" not in build_parser().format_help()
    assert all(s.name != "toy" for s in probe_specs())


def test_undeclared_or_derived_keys_are_refused():
    with pytest.raises(ValueError, match="gpu.util_ratoi"):
        ProbeSpec(name="bad", keys=("gpu.util_ratoi",), needs="")
    with pytest.raises(ValueError, match="sol.mfu_ratio"):   # computed by the core
        ProbeSpec(name="bad", keys=("sol.mfu_ratio",), needs="")


def test_two_probes_of_one_name_are_refused(toy):
    with pytest.raises(ValueError, match="two probes"):
        register(ProbeSpec(name="toy", keys=("host.cpu_count",), needs=""))


def test_the_built_in_probes_are_found_and_read_in_their_declared_order():
    # every module that declares a probe is found (no list to extend), with one SPEC each
    specs = [importlib.import_module(m).SPEC for m in builtin_modules()]
    assert specs and all(isinstance(s, ProbeSpec) for s in specs)
    orders = [s.order for s in specs]
    assert len(set(orders)) == len(orders), "two built-in probes share an order"
    names = [s.name for s in probe_specs()]
    assert names[:len(specs)] == [s.name for s in sorted(specs, key=lambda s: s.order)]
    # the Hub builds the probes that have a builder, in that order
    hub = _hub(["--url", DEAD_URL])
    built = [s.name for s in sorted(specs, key=lambda s: s.order) if s.build is not None]
    hub_names = [p.name.split(":")[0] for p in hub.probes]
    assert [n for n in hub_names if n in built] == [n for n in built if n in hub_names]


def test_no_key_belongs_to_two_probes():
    seen: dict[str, str] = {}
    for s in probe_specs():
        for k in s.keys:
            assert k not in seen, f"{k}: {seen[k]} and {s.name}"
            seen[k] = s.name


def test_the_server_probe_declares_every_key_the_dialects_map_to():
    server = next(s for s in probe_specs() if s.name == "server")
    mapped = {rule.key for d in DIALECTS.values() for rule in d.rules} | \
        {rule.key for rule in GENERIC}
    assert mapped <= set(server.keys), sorted(mapped - set(server.keys))


def test_demo_pointers_resolve_and_the_demo_emits_only_declared_keys():
    specs = {s.name: s for s in probe_specs()}
    for s in specs.values():
        if s.demo:
            module, func = s.demo.split(":")
            assert callable(getattr(importlib.import_module(module), func)), s.demo
    emitted: dict[str, set[str]] = {}
    for name in ("healthy", "par-pd-slow-transfer", "hw-gpu-lost"):
        src = DemoSource(name)
        for _ in range(5):
            snap = src.next_sync()
            assert snap is not None
            for source, sample in snap.samples.items():
                emitted.setdefault(source.split(":")[0], set()).update(
                    r.key for r in sample.readings)
    assert set(emitted) == {n for n, s in specs.items() if s.demo}
    for source, keys in emitted.items():
        assert keys <= set(specs[source].keys), (source, sorted(keys - set(specs[source].keys)))
        assert all(k in SPECS for k in keys)


async def test_the_live_nvml_probe_emits_only_its_declared_keys():
    from helpers.fake_pynvml import ManualClock, h100_pair
    from infertop.probes.nvml.probe import SPEC, NvmlProbe
    fake = h100_pair()
    clock = fake.clock
    assert isinstance(clock, ManualClock)
    probe = NvmlProbe(nvml_module=fake.module, clock=clock, slow_every=2)
    assert (await probe.open()).available
    emitted: set[str] = set()
    for _ in range(4):   # fast and slow ticks
        emitted |= {r.key for r in (await probe.collect()).readings}
        clock.advance(1.0)
    await probe.close()
    assert len(emitted) > 20
    assert emitted <= set(SPEC.keys), sorted(emitted - set(SPEC.keys))
