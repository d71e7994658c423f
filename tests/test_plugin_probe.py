"""A probe shipped as its own package: an ``infertop.probes`` entry point found through
importlib.metadata (as pip installs it) registers its spec, which the command line and the
Hub then take up; a broken one is left out with its reason."""

from __future__ import annotations

import sys

from infertop import testing
from infertop.cli.args import build_sub_parser
from infertop.probes import registry

MODULE = '''\
from infertop.model import Capability, Reading, Sample
from infertop.probes.base import Probe
from infertop.probes.registry import ProbeSpec, register


class FanProbe(Probe):
    name = "fans"

    async def collect(self) -> Sample:
        return Sample(self.name, 0.0, (Reading.of("host.load1", 0.5),))


def _flags(g):
    g.add_argument("--no-fans", action="store_true", help="do not read the fans")


SPEC = register(ProbeSpec(name="fans", order=2000, keys=("host.load1",), needs="nothing",
                          build=lambda args, target: [FanProbe()], add_flags=_flags))
'''


def _dist(site, name: str, module: str, code: str) -> None:
    (site / module).mkdir(parents=True)
    (site / module / "__init__.py").write_text(code)
    info = site / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[infertop.probes]\n{name} = {module}\n")


def test_a_probe_package_is_found_through_its_entry_point(tmp_path, monkeypatch):
    _dist(tmp_path, "fans", "infertop_fans", MODULE)
    _dist(tmp_path, "broken", "infertop_broken", "raise ImportError('no libsensors')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert registry.load_plugins() == ["fans"]
        assert "ImportError: no libsensors" in registry.plugin_errors()["broken"]
        spec = next(s for s in registry.probe_specs() if s.name == "fans")
        assert registry.probe_specs()[-1] is spec                 # after the built-in ones
        assert "--no-fans" in build_sub_parser("snapshot").format_help()
        testing.check_probe_spec(spec)
    finally:
        registry.unregister("fans")
        registry._PLUGIN_ERRORS.pop("broken", None)   # the test's own, not a real one
        for m in ("infertop_fans", "infertop_broken"):
            sys.modules.pop(m, None)
    assert "--no-fans" not in build_sub_parser("snapshot").format_help()
