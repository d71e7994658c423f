"""The demo source: a scenario played as if a real server were there.

One ``ScenarioRun`` per scenario gives a SimFrame per tick; from it come the three Samples a
live session has: "nvml", "process" and "server:<instance>".  The server Sample is made the
live way: the SimFrame is rendered as /metrics text in the scenario's dialect and parsed by
the same dialect mapper as a real scrape, so the demo exercises the real parser.

Time is virtual (one tick = one second of the scenario) and never goes backwards, even
across a restart or a switch; ``epoch`` counts those, so the app knows to start a fresh
History (counters of a new simulated server begin at zero).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from infertop.demo.exposition import render
from infertop.demo.readings import entry_process, nvml_sample, process_sample
from infertop.demo.scenario import (
    Scenario,
    ScenarioError,
    list_scenarios,
    load_scenario,
    with_gpus,
)
from infertop.demo.sim import DEMO_EPOCH, ScenarioRun, SimFrame
from infertop.keys import SPECS
from infertop.meta import ServerMeta
from infertop.model import Capability, Reading, Sample, Snapshot, Status, make_labels
from infertop.servers import registry, vllm
from infertop.source import SnapshotSource, pace


@dataclass(frozen=True)
class PhaseInfo:
    """What the banner shows: where the scenario is and what to look at."""

    name: str
    narration: str
    layer: str
    remedy: str
    started_at: float   # virtual unix time the phase began
    index: int          # 0-based
    count: int          # phases in the scenario
    scenario: str
    title: str


class DemoSource(SnapshotSource):
    kind = "demo"
    tick_seconds = 1.0

    def __init__(self, name: str | None = None, *, speed: float = 1.0, loop: bool = True,
                 seed: int | None = None, dialect: str | None = None,
                 start_time: float | None = None, instance: str = "demo",
                 gpus: int | None = None) -> None:
        if speed <= 0:
            raise ValueError("speed must be > 0")
        self.speed = float(speed)
        self.loop = loop
        self.seed = seed
        self.dialect = dialect
        self.instance = instance
        self.gpus = gpus          # --gpus N: every scenario on an N-GPU host (with_gpus)
        self.tour = name is None
        # n/p in the screen move through the whole catalogue, starting at the named one
        # (a scenario file of the instructor's own comes first, then the shipped ones)
        self.names = list_scenarios()
        if name is not None and name not in self.names:   # not the tour
            self.names.insert(0, name)
        if not self.names:
            raise ScenarioError("no scenarios are installed")
        self._index = 0 if name is None else self.names.index(name)
        self._clock = DEMO_EPOCH if start_time is None else float(start_time)
        self._tick = 0
        self.epoch: int = 0
        self._looped_from: tuple[int, int] | None = None   # (run, loop) of the last frame
        self._ended = False
        self._settings_cache: dict[tuple, dict[str, str]] = {}
        self._last_meta = ServerMeta()
        self._run = self._new_run(self.names[self._index])

    # ---- scenario control --------------------------------------------------------------
    def _new_run(self, name: str) -> ScenarioRun:
        sc = load_scenario(name)
        if self.gpus is not None:
            try:
                sc = with_gpus(sc, self.gpus)
            except ScenarioError:
                if not hasattr(self, "_run"):    # the one asked for: say why
                    raise
                # a later one of the tour that cannot play on N GPUs: as written
        return ScenarioRun(sc, seed=self.seed, start_time=self._clock, dialect=self.dialect,
                           loop=self.loop and not self.tour)

    @property
    def scenario(self) -> Scenario:
        return self._run.scenario

    @property
    def run(self) -> ScenarioRun:
        return self._run

    @property
    def label(self) -> str:  # type: ignore[override]
        prefix = "tour: " if self.tour else ""
        return f"{prefix}{self.scenario.name} ({self.server_kind})"

    @property
    def server_kind(self) -> str:
        return self._run.kind

    @property
    def phase(self) -> PhaseInfo:
        run, sc = self._run, self._run.scenario
        p = run.phase
        started = run.start_time + run.loop * sc.duration + p.start
        return PhaseInfo(p.name, p.narration, sc.layer.value, sc.remedy, started, p.index,
                         len(sc.phases), sc.name, sc.title)

    def switch(self, name: str) -> None:
        """Play another scenario from its start (a new simulated server)."""
        if name not in self.names:
            load_scenario(name)  # raises ScenarioError with the known names
            self.names.append(name)
        self._index = self.names.index(name)
        self._restart_run()

    def next_scenario(self) -> None:
        self._index = (self._index + 1) % len(self.names)
        self._restart_run()

    def prev_scenario(self) -> None:
        self._index = (self._index - 1) % len(self.names)
        self._restart_run()

    def restart(self) -> None:
        self._restart_run()

    def _restart_run(self) -> None:
        self._run = self._new_run(self.names[self._index])
        self.epoch += 1
        self._ended = False

    @property
    def wall_interval(self) -> float:
        return pace(False, self.tick_seconds, self.speed)

    @property
    def realtime(self) -> bool:
        return False

    # ---- SnapshotSource -----------------------------------------------------------------
    async def start(self) -> dict[str, Capability]:
        return self.capabilities()

    def capabilities(self) -> dict[str, Capability]:
        s = self.scenario.setup
        feats = {"xid"}
        if s["gpm"]:
            feats.add("gpm")
        if s["nvlink"]:
            feats.add("nvlink")
        src = self.server_source
        out = {"nvml": Capability("nvml", True, "", frozenset(feats)),
               "process": Capability("process", True),
               src: Capability(src, True, "", frozenset({self.server_kind}))}
        if s.get("pd_pair"):
            pre = self.prefill_source
            out[pre] = Capability(pre, True, "", frozenset({self.server_kind}))
        return out

    @property
    def server_source(self) -> str:
        return f"server:{self.instance}"

    @property
    def prefill_instance(self) -> str:
        """A pair's prefill instance (setup pd_pair): its own /metrics, another node."""
        return f"{self.instance}-prefill"

    @property
    def prefill_source(self) -> str:
        return f"server:{self.prefill_instance}"

    async def next(self) -> Snapshot | None:
        return self.next_sync()

    def next_sync(self) -> Snapshot | None:
        """The next tick, computed at once (headless commands and tests call this)."""
        frame = self.step_frame()
        return None if frame is None else self.snapshot_of(frame)

    def step_frame(self) -> SimFrame | None:
        """Advance one tick: the scenario's next SimFrame (the tour moves on at an end)."""
        if self._ended:
            return None
        frame = self._run.step()
        if frame is None:
            if not self.tour or (self._index == len(self.names) - 1 and not self.loop):
                self._ended = True
                return None
            self.next_scenario()
            frame = self._run.step()
            if frame is None:
                self._ended = True
                return None
        if self._looped_from == (id(self._run), frame.loop - 1):
            # the scenario starts over (the same simulated server): its last loop's
            # findings must not carry into the healthy start of the next
            self.epoch += 1
        self._looped_from = (id(self._run), frame.loop)
        self._clock = frame.time
        self._tick += 1
        return frame

    def snapshot_of(self, frame: SimFrame) -> Snapshot:
        samples = {"nvml": nvml_sample(frame),
                   "process": process_sample(frame, self._settings(frame)),
                   self.server_source: self.server_sample(frame)}
        if frame.prefill is not None:
            samples[self.prefill_source] = self.prefill_sample(frame.prefill)
        return Snapshot(time=frame.time, samples=samples, tick=self._tick,
                        capabilities=self.capabilities())

    def server_sample(self, frame: SimFrame) -> Sample:
        src = self.server_source
        url = f"demo://{self.scenario.name}/metrics"
        if frame.down:
            # the live probe's words (imported here: its HTTP client costs the demo's
            # first frame ~50 ms of imports it never needs otherwise)
            from infertop.probes.server.metrics import refused_message
            return Sample(src, frame.time, (), Status.ERROR, refused_message(url),
                          self._last_meta)
        text = render(frame, self.dialect or frame.kind)
        got = sample_from_exposition(src, frame, text, self.instance, url=url)
        if isinstance(got.meta, ServerMeta):
            self._last_meta = got.meta
        return with_role(got, frame, self.instance) if frame.prefill is not None else got

    def prefill_sample(self, frame: SimFrame) -> Sample:
        """The pair's prefill instance, scraped as a second --url would be."""
        url = f"demo://{self.scenario.name}/prefill/metrics"
        text = render(frame, self.dialect or frame.kind)
        got = sample_from_exposition(self.prefill_source, frame, text,
                                     self.prefill_instance, url=url)
        return with_role(got, frame, self.prefill_instance)

    def _settings(self, frame: SimFrame) -> dict[str, str]:
        root = entry_process(frame)
        if root is None:
            return {}
        key = (frame.kind, tuple(root.argv))
        got = self._settings_cache.get(key)
        if got is None:
            from infertop.probes.server.discovery import server_settings
            got = server_settings(frame.kind, root.argv)
            if len(self._settings_cache) > 64:
                self._settings_cache.clear()
            self._settings_cache[key] = got
        return got

    async def stop(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        sc = self.scenario
        s = sc.setup
        return {"source": "demo", "label": self.label, "scenario": sc.name,
                "tour": self.tour, "seed": self._run.seed, "speed": self.speed,
                "server": {"kind": self.server_kind, "model": s["model"]},
                "gpus": [{"index": i, "name": s["gpu_name"]} for i in range(s["gpus"])],
                "capabilities": {n: c.to_dict() for n, c in self.capabilities().items()}}


def with_role(sample: Sample, frame: SimFrame, instance: str) -> Sample:
    """``sample`` plus the instance's P/D role read from its own --kv-transfer-config.
    Live, each local --url's server probe reads it from the command line of the process
    on its port (probes/server/roles.py) and labels it with the instance, as SGLang's
    engine_type label does; the demo's pair does the same from its setup, with the same
    vLLM parser over the value (its SimFrame has no process to read a command line of)."""
    role = vllm.disagg_role(frame.setup["settings"].get("kv_transfer_config", ""))
    if not role:
        return sample
    r = Reading("server.disagg_role", 1.0, "", make_labels(instance=instance),
                kind=SPECS["server.disagg_role"].kind, text=role)
    return replace(sample, readings=(*sample.readings, r))


def sample_from_exposition(source: str, frame: SimFrame, text: str, instance: str, *,
                           url: str) -> Sample:
    """Parse demo exposition text with the live dialect mapper into the server Sample."""
    from infertop.dialects import readings_from_exposition

    expo = readings_from_exposition(text, instance)
    readings = list(expo.readings)
    kind = registry.kind(expo.dialect)
    if kind is not None and kind.start_time_header and \
            not any(r.key == "server.process_start_seconds" for r in readings):
        # the kind sends its start time as a response header (llama.cpp), as the live
        # probe reads it
        readings.append(Reading("server.process_start_seconds", float(int(frame.start_time)),
                                SPECS["server.process_start_seconds"].unit,
                                make_labels(instance=instance)))
    meta = replace(expo.meta, dialect=expo.meta.dialect or expo.dialect,
                   model=frame.model if expo.meta.model is None else expo.meta.model,
                   url=url, scrape_bytes=len(text.encode("utf-8")),
                   engines=tuple(str(e.index) for e in frame.engines))
    return Sample(source, frame.time, tuple(readings), Status.OK, "", meta)
