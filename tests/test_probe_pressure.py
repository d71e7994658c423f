"""The host pressure probe (PSI, /proc/pressure): issue 34's proof that a probe is its module,
its keys and this test.  It reads a fake /proc/pressure folder, passes the probe test kit
(infertop.testing), reaches the live Hub through the registry, and its stall counter gets
its rate from the key's declaration alone."""

from __future__ import annotations

import pytest

from infertop import testing
from infertop.cli.args import build_sub_parser
from infertop.cli.sources import make_source
from infertop.derive import RATES
from infertop.model import Sample, Snapshot, Status
from infertop.pipeline import Pipeline
from infertop.probes.registry import probe_specs
from infertop.probes.server import pressure
from infertop.probes.server.pressure import SPEC, PressureProbe, parse_pressure
from infertop.probes.sources.hub import Hub
from infertop.rules.engine import Diagnoser

CPU = ("some avg10=44.31 avg60=32.68 avg300=35.69 total=263280827\n"
       "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
IO = ("some avg10=0.28 avg60=0.10 avg300=0.14 total=4775751\n"
      "full avg10=0.13 avg60=0.05 avg300=0.05 total=2738054\n")
DEAD_URL = "http://127.0.0.1:9/metrics"


def _fake(tmp_path, cpu=CPU, memory=None, io=IO):
    for name, text in (("cpu", cpu), ("memory", memory), ("io", io)):
        if text is not None:
            (tmp_path / name).write_text(text)
    return str(tmp_path)


async def _collect(directory: str) -> tuple[bool, Sample]:
    p = PressureProbe(directory)
    try:
        cap = await p.open()
        return cap.available, await p.collect()
    finally:
        await p.close()


async def test_reads_every_resource_as_ratios_and_stall_seconds(tmp_path):
    ok, s = await _collect(_fake(tmp_path))
    assert ok and s.status is Status.OK
    got = {(r.key, r.labels): r.value for r in s.readings}
    assert got[("host.pressure_some_ratio", (("resource", "cpu"),))] == pytest.approx(0.4431)
    assert got[("host.pressure_full_ratio", (("resource", "io"),))] == pytest.approx(0.0013)
    assert got[("host.pressure_stall_seconds_total",
                (("resource", "cpu"), ("scope", "some")))] == pytest.approx(263.280827)
    # memory's file is missing here: said, not read as zero
    assert not any(dict(r.labels)["resource"] == "memory" for r in s.readings)
    assert "memory" in s.reason
    testing.check_probe_spec(SPEC, probe_specs())
    assert testing.check_samples(SPEC, [s]) == set(SPEC.keys)


@pytest.mark.parametrize("bad", ["some avg10=nan avg60=0 avg300=0 total=5",
                                 "some avg10=1e400 avg60=0 avg300=0 total=5",
                                 "some avg10=-3 avg60=0 avg300=0 total=5",
                                 "some avg10=101 avg60=0 avg300=0 total=5",
                                 "some avg10=x\x1b[31m avg60=0 avg300=0 total=5"])
def test_a_hostile_value_is_left_out_and_named(bad):
    parsed, problems = parse_pressure(bad)
    assert "avg10" not in parsed["some"] and parsed["some"]["total"] == 5
    assert problems and "avg10" in problems[0] and "\x1b" not in problems[0]


async def test_an_oversized_or_garbled_file_is_bounded(tmp_path):
    ok, s = await _collect(_fake(tmp_path, cpu="x" * 10_000_000, io="\x00\xff garbage\n"))
    assert ok and s.status is Status.ERROR and not s.readings   # nothing read, and said
    assert "unexpected line" in s.reason


async def test_a_kernel_without_psi_is_a_capability_that_says_why(tmp_path):
    ok, _ = await _collect(str(tmp_path / "absent"))
    assert not ok


def test_the_stall_counter_gets_its_rate_from_its_declaration():
    assert RATES["host.pressure_stall_seconds_total"] == "host.pressure_stall_ratio"
    pipe = Pipeline(Diagnoser())
    frame = None
    for t, stalled in ((0.0, 100.0), (10.0, 104.0)):   # 4 s stalled in 10 s
        parsed, _ = parse_pressure(f"some avg10=40 avg60=0 avg300=0 total={stalled * 1e6:.0f}")
        s = Sample("pressure", 1000.0 + t, tuple(pressure.readings_of("cpu", parsed)))
        frame = pipe.feed(Snapshot(1000.0 + t, {"pressure": s}))
    assert frame is not None
    rate = [r for r in frame.derived if r.key == "host.pressure_stall_ratio"]
    assert [r.value for r in rate] == [pytest.approx(0.4)]


def _hub(argv: list[str]) -> Hub:
    src = make_source(build_sub_parser("snapshot").parse_args(argv))
    assert isinstance(src, Hub)
    return src


def test_the_registry_puts_it_in_the_hub_and_its_flag_turns_it_off(monkeypatch, tmp_path):
    monkeypatch.setattr(pressure, "PRESSURE_DIR", _fake(tmp_path))
    assert any(p.name == "pressure" for p in _hub(["--no-gpu", "--url", DEAD_URL]).probes)
    hub = _hub(["--no-gpu", "--url", DEAD_URL, "--no-pressure"])
    assert not any(p.name == "pressure" for p in hub.probes)
    assert hub.capabilities["pressure"].reason == "host pressure off (--no-pressure)"
