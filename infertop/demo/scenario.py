"""Demo scenarios: TOML data files -> a validated timeline of phases.

A scenario is written by people (an instructor can add their own), so a bad file gets one
clear line naming the file, the phase and the key, never a traceback.  The format:

    name = "kv-leak"                 # equals the file's stem
    title = "KV-cache leak"
    layer = "memory"                 # the layer it teaches
    expect = ["MEM-002"]             # finding codes it should trigger (each in one phase's raises)
    seed = 11
    summary = "one paragraph: what goes wrong"
    remedy = "what fixes it"

    [setup]                          # the machine and the server (fixed for the run)
    gpus = 1
    [setup.settings]                 # extra command-line settings shown as server.setting
    enable_prefix_caching = "true"

    [defaults]                       # knob values before the first phase (optional)
    arrival_rate = 4

    [[phase]]
    name = "steady"
    duration = 30                    # virtual seconds
    ramp = 5                         # seconds to move from the previous phase's values
    narration = "what to look at on screen"
    raises = ["MEM-002"]             # codes of `expect` this phase brings on: each is active
                                     # within 10 s of the phase's start (tests check it)
    arrival_rate = 6                 # any knob (see KNOBS); unset knobs keep their value
    [phase.gpu.2]                    # per-GPU overrides, for this phase only
    clock_ratio = 0.7

The simulation itself lives in ``scenario_sim``; the generators of readings and of
exposition text in ``scenario_readings`` and ``scenario_expo``.
"""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from infertop.model import Layer
from infertop.servers import registry

AUTO = None  # a knob set to "auto" is computed from the load each tick

# the server kinds the demo can play: those with a demo renderer (infertop/servers)
DIALECTS = registry.demo_kinds()
FINDING_CODE = re.compile(r"^(HW|KRN|MEM|SCH|PAR|DEC)-\d{3}$")
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
THROTTLE_NAMES = ("idle", "app_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
                  "sw_thermal", "hw_thermal", "hw_power_brake", "display_clock_setting",
                  "board_limit", "reliability")


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message is one line meant for a person."""


@dataclass(frozen=True, slots=True)
class Knob:
    name: str
    kind: str          # float | int | bool | str | names | weights | tables | settings
    default: Any
    lo: float | None = None
    hi: float | None = None
    auto: bool = False  # accepts "auto" (computed from the load)
    ramp: bool = True   # numeric knobs move linearly over a phase's ramp
    help: str = ""


def _f(name, default, lo, hi, help, auto=False, ramp=True) -> Knob:
    return Knob(name, "float", default, lo, hi, auto, ramp, help)


def _i(name, default, lo, hi, help, ramp=False) -> Knob:
    return Knob(name, "int", default, lo, hi, False, ramp, help)


# ---- [setup]: the machine and the server, fixed for a run ------------------------------
SETUP: dict[str, Knob] = {k.name: k for k in (
    _i("gpus", 1, 1, 16, "number of GPUs on the host"),
    Knob("gpu_name", "str", "NVIDIA H100 80GB HBM3", help="GPU product name"),
    _f("gpu_mem_gib", 80.0, 1, 1024, "device memory per GPU, GiB"),
    _f("power_limit_w", 700.0, 50, 2000, "enforced power limit, W"),
    _f("sm_clock_max_mhz", 1980.0, 100, 5000, "maximum SM clock, MHz"),
    _f("mem_clock_max_mhz", 2619.0, 100, 20000, "maximum memory clock, MHz"),
    _i("mem_bus_width_bits", 5120, 16, 16384, "memory bus width, bits (NVML)"),
    _i("cuda_cores", 16896, 1, 1 << 20, "CUDA cores (NVML; 132 SMs x 128 on an H100 SXM)"),
    Knob("compute_capability", "str", "9.0", help="CUDA compute capability major.minor"),
    _i("pcie_gen", 5, 1, 6, "PCIe link generation"),
    _i("pcie_width", 16, 1, 32, "PCIe link width, lanes"),
    Knob("nvlink", "bool", True, help="GPUs joined by NVLink (false: peer traffic over PCIe)"),
    Knob("gpm", "bool", True, help="GPM counters available (Hopper or newer)"),
    _i("tp", 1, 1, 16, "tensor-parallel size (GPUs per engine)"),
    _i("dp", 1, 1, 16, "data-parallel engines"),
    Knob("model", "str", "meta-llama/Llama-3.1-8B-Instruct", help="served model name"),
    _f("weights_gib", 16.0, 0, 4096, "model weights, GiB (split over tp GPUs)"),
    _f("model_params_b", 8.03, 0, 100_000, "model parameters, billions (config.json)"),
    _f("active_params_b", 0.0, 0, 100_000,
       "parameters used per token, billions (0: all; mixture of experts: fewer)"),
    _i("kv_bytes_per_token", 131072, 0, 1 << 30,
       "KV-cache bytes per token of context, all layers (Llama-3.1-8B bf16: 128 KiB)"),
    Knob("mfu_metrics", "bool", False,
         help="the server runs with --enable-mfu-metrics (its estimated_* counters count)"),
    Knob("model_config", "bool", True,
         help="the model's config.json is readable (false: no speed-of-light estimate)"),
    _f("gpu_memory_utilization", 0.72, 0.05, 1.0, "share of GPU memory the server reserves"),
    _i("kv_capacity_tokens", 150_000, 1, 1 << 40, "KV-cache size per engine, tokens"),
    _i("max_model_len", 32768, 16, 1 << 24, "context length"),
    _i("block_size", 16, 1, 4096, "KV-cache block size, tokens"),
    Knob("server", "str", "vllm", help="server kind and /metrics dialect: " + ", ".join(DIALECTS)),
    _i("spec_tokens", 0, 0, 64, "speculative tokens per step (0: speculative decoding off)"),
    Knob("enforce_eager", "bool", False,
         help="CUDA graphs off (every kernel launched from Python)"),
    _i("host_cpus", 32, 1, 4096, "logical CPUs on the host"),
    _f("host_mem_gib", 512.0, 1, 1 << 20, "host memory, GiB"),
    _f("noise", 0.02, 0, 0.5, "relative noise on gauges"),
    Knob("settings", "settings", {}, help="extra server settings (name = \"value\")"),
    Knob("pd_pair", "bool", False,
         help="a disaggregated prefill/decode pair: the server is the decode instance "
              "(kv_role kv_consumer in settings.kv_transfer_config) and a prefill instance "
              "of the same model (kv_producer) runs on another node, its /metrics served "
              "beside it (demo: server:<instance>-prefill; demo-server: the next port)"),
)}

# ---- phase knobs: inherited from the previous phase unless set --------------------------
KNOBS: dict[str, Knob] = {k.name: k for k in (
    # workload
    _f("arrival_rate", 4.0, 0, 100_000, "requests arriving per second (all engines)"),
    _f("prompt_tokens", 1000.0, 1, 10_000_000, "mean prompt length, tokens"),
    _f("gen_tokens", 250.0, 1, 10_000_000, "mean generated length, tokens"),
    _f("prefix_hit", 0.3, 0, 1, "share of prompt tokens found in the prefix cache"),
    _i("max_num_seqs", 256, 1, 1_000_000, "scheduler cap on running requests per engine"),
    Knob("dp_weights", "weights", [], help="share of arrivals per DP engine (default even)"),
    # outcomes
    _f("error_share", 0.0, 0, 1, "share of finished requests that end in error"),
    _f("abort_share", 0.0, 0, 1, "share of finished requests aborted by the client"),
    _f("kv_leak_per_abort", 0.0, 0, 1, "share of the KV cache never freed per aborted request"),
    # speed of the engine
    _f("itl_ms", 12.0, 0.1, 100_000, "inter-token latency at batch 1, ms"),
    _f("itl_batch_ms", 0.06, 0, 10_000, "extra inter-token latency per running request, ms"),
    _f("itl_jitter", 0.15, 0, 3, "spread of inter-token latency (lognormal sigma)"),
    _f("prefill_tok_per_s", 40_000.0, 1, 1e9, "prefill speed per engine, tokens/s"),
    _f("attn_quadratic", 0.002, 0, 1000, "prefill seconds per (1k prompt tokens)^2 (attention)"),
    _f("spec_acceptance", 0.7, 0, 1, "share of draft tokens accepted"),
    _f("kv_transfer_ms", 0.0, 0, 1_000_000,
       "KV transfer from the prefill instance per request, ms (a disaggregated decode "
       "instance: adds to TTFT, fills the NIXL histograms; 0: not disaggregated)"),
    # GPUs (also settable per GPU in [phase.gpu.N])
    _f("gpu_busy", AUTO, 0, 1, "GPU util: time a kernel runs (auto: from the batch)", auto=True),
    _f("sm_efficiency", 0.92, 0, 1, "SM active / GPU util"),
    _f("tensor_share", 0.55, 0, 1, "tensor-pipe active / SM active"),
    _f("dram_share", 0.55, 0, 1, "DRAM bandwidth used / SM active"),
    _f("occupancy_share", 0.5, 0, 1, "SM occupancy / SM active"),
    _f("pcie_gbps", 0.5, 0, 1000, "PCIe receive traffic per GPU, GB/s (transmit is 40 %)"),
    _f("nvlink_gbps", AUTO, 0, 10_000, "NVLink traffic per GPU, GB/s (auto: from TP load)",
       auto=True),
    _f("temp_c", AUTO, 0, 130, "GPU temperature (auto: from power)", auto=True),
    _f("clock_ratio", 1.0, 0.05, 1, "SM clock / max SM clock"),
    _f("power_w", AUTO, 0, 5000, "board power (auto: from activity)", auto=True),
    Knob("throttle", "names", [], help="clocks-event reasons: " + ", ".join(THROTTLE_NAMES)),
    _f("mem_growth_gib_per_min", 0.0, -1000, 1000, "GPU memory growth beyond the reservation"),
    _f("slowdown", 1.0, 1, 100, "this GPU computes this many times slower (a straggler)"),
    _f("ecc_uncorrected_per_min", 0.0, 0, 100_000, "uncorrected ECC errors per minute"),
    Knob("lost", "bool", False, ramp=False, help="the GPU fell off the bus"),
    _i("xid", 0, 0, 1_000_000, "Xid critical error code raised at this phase's start (0: none)"),
    # host and server processes
    _f("engine_cpu", AUTO, 0, 4096, "engine main thread CPU, cores (auto: from load)", auto=True),
    _f("api_cpu", AUTO, 0, 4096, "API server process CPU, cores (auto: from request rate)",
       auto=True),
    _i("api_threads", 12, 1, 1_000_000, "threads in the API server process", ramp=True),
    _f("gil_share", 0.5, 0, 1, "share of the API server's CPU in its busiest thread"),
    _f("host_cpu", AUTO, 0, 1, "whole-host CPU busy share (auto: from the processes)", auto=True),
    Knob("neighbours", "tables", [],
         help="other processes on GPUs: [{gpu, mem_gib, sm, cmd, in_tree}] (in_tree: a "
              "leftover child of the server, e.g. an engine that did not exit)"),
    _i("omp_threads", 0, 0, 4096, "busy compute threads in each engine/worker process "
       "(OMP/intra-op pools)", ramp=True),
    _f("omp_thread_cpu", 0.35, 0, 1, "cores each of those threads uses"),
)}

GPU_KNOBS = frozenset({
    "gpu_busy", "sm_efficiency", "tensor_share", "dram_share", "occupancy_share", "pcie_gbps",
    "nvlink_gbps", "temp_c", "clock_ratio", "power_w", "throttle", "mem_growth_gib_per_min",
    "slowdown", "ecc_uncorrected_per_min", "lost", "xid"})
# phase-only keys: not inherited by the next phase
PHASE_FLAGS = {"down": "the server is unreachable (/metrics refuses connections)",
               "restart": "the server restarts at this phase's start (counters reset)"}
PHASE_META = ("name", "duration", "ramp", "narration", "gpu", "raises")
RAISES_HELP = ("`raises = [\"CODE\", ...]`: finding codes of `expect` this phase brings on "
               "(active within 10 s of its start); every code of `expect` is in exactly one "
               "phase's `raises`")
TOP_KEYS = ("name", "title", "layer", "expect", "seed", "summary", "remedy", "setup",
            "defaults", "phase")
NEIGHBOUR_KEYS = {"gpu": int, "mem_gib": float, "sm": float, "cmd": str, "in_tree": bool}


@dataclass(frozen=True, slots=True)
class Phase:
    index: int
    name: str
    duration: float
    ramp: float
    narration: str
    knobs: Mapping[str, Any]                     # effective values (inherited + set)
    gpu: Mapping[int, Mapping[str, Any]]         # per-GPU overrides, this phase only
    down: bool = False
    restart: bool = False
    start: float = 0.0                           # offset in the scenario's timeline
    raises: tuple[str, ...] = ()                 # codes of `expect` raised after this start


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    title: str
    layer: Layer
    expect: tuple[str, ...]
    seed: int
    summary: str
    remedy: str
    setup: Mapping[str, Any]
    phases: tuple[Phase, ...]
    path: str = ""
    initial: Mapping[str, Any] = field(default_factory=dict)  # knobs before phase 0

    @property
    def duration(self) -> float:
        last = self.phases[-1]
        return last.start + last.duration

    def phase_at(self, t: float) -> Phase:
        """The phase at ``t`` seconds into one pass of the timeline (clamped to its end)."""
        for p in self.phases:
            if t < p.start + p.duration:
                return p
        return self.phases[-1]

    def ramp_pairs(self, t: float, gpu: int | None = None, *, first_pass: bool = True
                   ) -> tuple[dict[str, Any], dict[str, Any], float]:
        """(this phase's values, the previous phase's values, ramp progress 0..1).

        The previous phase of phase 0 is the scenario's defaults on the first pass and the
        last phase when looping, so a loop eases back to the start instead of jumping.
        ``gpu``: include that GPU's overrides.  Values may be None ("auto"): the simulation
        resolves them each tick, then ramps between the two ends.
        """
        p = self.phase_at(t)
        if p.index > 0:
            q = self.phases[p.index - 1]
            prev = _with_gpu(q.knobs, q.gpu, gpu)
        elif first_pass:
            prev = _with_gpu(self.initial, {}, gpu)
        else:
            q = self.phases[-1]
            prev = _with_gpu(q.knobs, q.gpu, gpu)
        cur = _with_gpu(p.knobs, p.gpu, gpu)
        f = 1.0 if p.ramp <= 0 else min(1.0, max(0.0, (t - p.start) / p.ramp))
        return cur, prev, f

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "title": self.title, "layer": self.layer.value,
                "expect": list(self.expect), "seed": self.seed, "remedy": self.remedy,
                "summary": self.summary, "duration": self.duration,
                "phases": [{"name": p.name, "duration": p.duration, "narration": p.narration,
                            "raises": list(p.raises)} for p in self.phases]}


def _with_gpu(knobs: Mapping[str, Any], overrides: Mapping[int, Mapping[str, Any]],
              gpu: int | None) -> dict[str, Any]:
    out = dict(knobs)
    if gpu is not None and gpu in overrides:
        out.update(overrides[gpu])
    return out


def knob_reference() -> str:
    """Every [setup] key and phase knob with its default, range and meaning (Markdown), for
    instructors writing their own scenarios (``infertop demo --knobs`` or the docs)."""
    def rows(table: Mapping[str, Knob]) -> list[str]:
        out = ["| key | default | range | meaning |", "|---|---|---|---|"]
        for k in table.values():
            d = "auto" if k.default is None else k.default
            rng = f"{_g(k.lo)} .. {_g(k.hi)}" if k.lo is not None or k.hi is not None else ""
            extra = " (or \"auto\")" if k.auto else ""
            out.append(f"| `{k.name}` | {d!r} | {rng}{extra} | {k.help} |")
        return out
    lines = ["### [setup]", *rows(SETUP), "", "### phase knobs (inherited by later phases)",
             *rows(KNOBS), "", "Per-GPU tables `[phase.gpu.N]` take: "
             + ", ".join(f"`{k}`" for k in sorted(GPU_KNOBS)) + " (that phase only).",
             "Phase-only flags: " + "; ".join(f"`{k}`: {v}" for k, v in PHASE_FLAGS.items()),
             "", "Phase key " + RAISES_HELP + "."]
    return "\n".join(lines)


# ---- loading --------------------------------------------------------------------------
def scenario_dir() -> Path:
    return Path(str(resources.files("infertop.demo.scenarios")))


def list_scenarios() -> list[str]:
    """Names of the shipped scenarios, in tour order (the files' ``order`` then name)."""
    found = []
    for p in sorted(scenario_dir().glob("*.toml")):
        found.append(p.stem)
    return sorted(found, key=lambda n: (_ORDER.index(n) if n in _ORDER else len(_ORDER), n))


# The tour: healthy first, then one layer after another, as the screen's panes go.
_ORDER = (
    "healthy", "hw-busy-not-working", "hw-fp32-fallback", "hw-throttling", "hw-gpu-lost",
    "krn-launch-bound", "krn-attention-superlinear", "krn-below-roofline",
    "mem-kv-leak", "mem-kv-pressure", "mem-oom-creep", "mem-weights-twice",
    "sch-gil-contention", "sch-queue-gpus-idle", "sch-host-cpu-saturated",
    "sch-thread-oversubscription",
    "par-tp-straggler", "par-tp-over-pcie", "par-dp-unbalanced",
    "dec-spec-collapse", "dec-ttft-burst", "dec-error-restart",
)


def catalogue() -> list[Scenario]:
    """Every shipped scenario, loaded, in tour order (for ``infertop demo --list``)."""
    return [load_scenario(n) for n in list_scenarios()]


def with_gpus(sc: Scenario, gpus: int) -> Scenario:
    """``sc`` on a host of ``gpus`` GPUs (`infertop demo --gpus N`: a workshop shows an
    8-GPU box without a fake driver): the server spreads its model over them (tensor
    parallel across all of them, per data-parallel replica).  A scenario that plays on
    a GPU the host would not have, or whose weights would not fit, says so."""
    if not 1 <= gpus <= 16:
        raise ScenarioError(f"--gpus {gpus}: between 1 and 16")
    setup = dict(sc.setup)
    needed = max((i + 1 for p in sc.phases for i in p.gpu), default=1)
    if gpus < needed:
        raise ScenarioError(f"{sc.name} plays on GPU {needed - 1}: --gpus {needed} or more")
    if setup.get("pd_pair"):
        if setup["tp"] * setup["dp"] > gpus:
            raise ScenarioError(f"{sc.name} needs {setup['tp'] * setup['dp']} GPUs")
    else:
        setup["tp"] = max(1, gpus // setup["dp"])
    setup["gpus"] = gpus
    if setup["weights_gib"] / setup["tp"] > setup["gpu_mem_gib"] * \
            setup["gpu_memory_utilization"]:
        raise ScenarioError(f"{sc.name}: its {setup['weights_gib']:g} GiB of weights do not "
                            f"fit on {setup['tp']} GPU(s): give --gpus more")
    return replace(sc, setup=setup)


def load_scenario(name_or_path: str | Path) -> Scenario:
    """A shipped scenario by name, or any TOML file by path."""
    p = Path(name_or_path)
    if p.suffix == ".toml" or p.exists() or "/" in str(name_or_path):
        if not p.exists():
            raise ScenarioError(f"{p}: no such scenario file")
        path = p
    else:
        path = scenario_dir() / f"{name_or_path}.toml"
        if not path.exists():
            known = list_scenarios()
            hint = difflib.get_close_matches(str(name_or_path), known, n=1)
            extra = f" (did you mean '{hint[0]}'?)" if hint else ""
            raise ScenarioError(f"no scenario named '{name_or_path}'{extra}; "
                                f"known: {', '.join(known)}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ScenarioError(f"{path.name}: cannot read: {e}") from None
    return parse_scenario(text, source=path.name, stem=path.stem, path=str(path))


def parse_scenario(text: str, *, source: str = "<scenario>", stem: str | None = None,
                   path: str = "") -> Scenario:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{source}: not valid TOML: {e}") from None
    return validate(data, source=source, stem=stem, path=path)


def validate(data: Mapping[str, Any], *, source: str = "<scenario>", stem: str | None = None,
             path: str = "") -> Scenario:
    def fail(msg: str) -> ScenarioError:
        return ScenarioError(f"{source}: {msg}")

    _unknown(data, TOP_KEYS, "top level", fail)
    name = _req_str(data, "name", "top level", fail)
    if not NAME_RE.match(name):
        raise fail(f"name '{name}' must be lower-case letters, digits and dashes")
    if stem is not None and stem != name:
        raise fail(f"name '{name}' must equal the file name '{stem}'")
    title = _req_str(data, "title", "top level", fail)
    layer_s = _req_str(data, "layer", "top level", fail)
    try:
        layer = Layer(layer_s)
    except ValueError:
        raise fail(f"layer '{layer_s}' is not one of {', '.join(x.value for x in Layer)}") \
            from None
    expect = data.get("expect", [])
    if not isinstance(expect, list) or not all(isinstance(c, str) for c in expect):
        raise fail("expect must be a list of finding codes like \"MEM-002\"")
    for c in expect:
        if not FINDING_CODE.match(c):
            raise fail(f"expect: '{c}' is not a finding code like \"MEM-002\"")
    seed = data.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise fail("seed must be an integer")
    summary = str(data.get("summary", ""))
    remedy = _req_str(data, "remedy", "top level", fail)

    setup = _setup(data.get("setup", {}), fail)
    initial = _knob_defaults()
    initial.update(_knobs(data.get("defaults", {}), "[defaults]", fail, allow=()))

    raw_phases = data.get("phase")
    if not isinstance(raw_phases, list) or not raw_phases:
        raise fail("needs at least one [[phase]]")
    phases: list[Phase] = []
    cur = dict(initial)
    start = 0.0
    for i, rp in enumerate(raw_phases):
        where = f"phase {i + 1}"
        if not isinstance(rp, dict):
            raise fail(f"{where} must be a table")
        if isinstance(rp.get("name"), str):
            where = f"phase {i + 1} ('{rp['name']}')"
        allowed = set(KNOBS) | set(PHASE_FLAGS) | set(PHASE_META)
        _unknown(rp, allowed, where, fail)
        pname = _req_str(rp, "name", where, fail)
        duration = _num(rp.get("duration"), "duration", where, fail, lo=1e-9, required=True)
        ramp = _num(rp.get("ramp", 5.0), "ramp", where, fail, lo=0.0)
        narration = _req_str(rp, "narration", where, fail)
        knobs = {k: v for k, v in rp.items() if k in KNOBS}
        cur.update(_knobs(knobs, where, fail, allow=()))
        gpu = _gpu_overrides(rp.get("gpu", {}), setup["gpus"], where, fail)
        flags = {}
        for flag in PHASE_FLAGS:
            v = rp.get(flag, False)
            if not isinstance(v, bool):
                raise fail(f"{where}: {flag} must be true or false")
            flags[flag] = v
        raises = _raises(rp.get("raises", []), expect, where, fail)
        phases.append(Phase(i, pname, float(duration), float(ramp), narration.strip(),
                            dict(cur), gpu, flags["down"], flags["restart"], start, raises))
        start += float(duration)
    _check_weights(phases, setup, fail)
    _check_raises(phases, expect, fail)
    return Scenario(name, title, layer, tuple(expect), seed, summary.strip(), remedy.strip(),
                    setup, tuple(phases), path, initial)


def _raises(raw: Any, expect: list[str], where: str, fail) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(c, str) for c in raw):
        raise fail(f"{where}: raises must be a list of finding codes like [\"MEM-002\"]")
    for c in raw:
        if c not in expect:
            raise fail(f"{where}: raises '{c}' is not in expect "
                       f"({', '.join(expect) or 'empty'})")
    if len(set(raw)) != len(raw):
        raise fail(f"{where}: raises names a code twice")
    return tuple(raw)


def _check_raises(phases: list[Phase], expect: list[str], fail) -> None:
    """Every expected code belongs to exactly one phase: the one whose start it follows."""
    for c in expect:
        owners = [p for p in phases if c in p.raises]
        if not owners:
            raise fail(f"expect: '{c}' is in no phase's raises (add raises = [\"{c}\"] to "
                       f"the phase it follows)")
        if len(owners) > 1:
            names = ", ".join(f"'{p.name}'" for p in owners)
            raise fail(f"expect: '{c}' is in the raises of several phases ({names}); "
                       f"give it to one")


def _knob_defaults() -> dict[str, Any]:
    return {k.name: (list(k.default) if isinstance(k.default, list) else k.default)
            for k in KNOBS.values()}


def _setup(raw: Any, fail) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise fail("[setup] must be a table")
    _unknown(raw, SETUP, "[setup]", fail)
    out: dict[str, Any] = {k.name: (dict(k.default) if isinstance(k.default, dict)
                                    else k.default) for k in SETUP.values()}
    for key, v in raw.items():
        out[key] = _value(SETUP[key], v, "[setup]", fail)
    kinds = registry.demo_kinds()
    if out["server"] not in kinds:
        raise fail(f"[setup]: server '{out['server']}' is not one of {', '.join(kinds)}")
    if out["tp"] * out["dp"] > out["gpus"]:
        raise fail(f"[setup]: tp ({out['tp']}) x dp ({out['dp']}) needs more GPUs than "
                   f"gpus = {out['gpus']}")
    if out["pd_pair"] and "kv_role" not in out["settings"].get("kv_transfer_config", ""):
        raise fail("[setup]: pd_pair needs settings.kv_transfer_config with a kv_role "
                   "(the decode instance's, e.g. kv_consumer)")
    if out["weights_gib"] / out["tp"] > out["gpu_mem_gib"] * out["gpu_memory_utilization"]:
        raise fail("[setup]: the weights do not fit in gpu_memory_utilization x gpu_mem_gib")
    return out


def _knobs(raw: Any, where: str, fail, allow) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise fail(f"{where} must be a table")
    _unknown(raw, set(KNOBS) | set(allow), where, fail)
    return {k: _value(KNOBS[k], v, where, fail) for k, v in raw.items() if k in KNOBS}


def _gpu_overrides(raw: Any, gpus: int, where: str, fail) -> dict[int, dict[str, Any]]:
    if not isinstance(raw, dict):
        raise fail(f"{where}: gpu must be a table of per-GPU tables ([phase.gpu.0])")
    out: dict[int, dict[str, Any]] = {}
    for idx, table in raw.items():
        try:
            i = int(idx)
        except ValueError:
            raise fail(f"{where}: gpu.{idx}: the GPU index must be a number") from None
        if not 0 <= i < gpus:
            raise fail(f"{where}: gpu.{i}: no such GPU (setup has gpus = {gpus})")
        if not isinstance(table, dict):
            raise fail(f"{where}: gpu.{i} must be a table")
        _unknown(table, GPU_KNOBS, f"{where}: gpu.{i}", fail)
        out[i] = {k: _value(KNOBS[k], v, f"{where}: gpu.{i}", fail) for k, v in table.items()}
    return out


def _value(k: Knob, v: Any, where: str, fail) -> Any:
    label = f"{where}: {k.name}"
    if k.auto and v == "auto":
        return AUTO
    if k.kind == "str":
        if not isinstance(v, str):
            raise fail(f"{label} must be a string")
        return v
    if k.kind == "bool":
        if not isinstance(v, bool):
            raise fail(f"{label} must be true or false")
        return v
    if k.kind in ("float", "int"):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            extra = " or \"auto\"" if k.auto else ""
            raise fail(f"{label} must be a number{extra}, not {v!r}")
        if k.kind == "int" and not float(v).is_integer():
            raise fail(f"{label} must be a whole number, not {v!r}")
        if (k.lo is not None and v < k.lo) or (k.hi is not None and v > k.hi):
            raise fail(f"{label} = {v} is out of range [{_g(k.lo)}, {_g(k.hi)}]")
        return int(v) if k.kind == "int" else float(v)
    if k.kind == "names":
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise fail(f"{label} must be a list of names")
        for x in v:
            if x not in THROTTLE_NAMES:
                hint = difflib.get_close_matches(x, THROTTLE_NAMES, n=1)
                extra = f" (did you mean '{hint[0]}'?)" if hint else ""
                raise fail(f"{label}: unknown reason '{x}'{extra}")
        return list(v)
    if k.kind == "weights":
        if not isinstance(v, list) or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0 for x in v):
            raise fail(f"{label} must be a list of non-negative numbers")
        if v and sum(v) <= 0:
            raise fail(f"{label} must not be all zero")
        return [float(x) for x in v]
    if k.kind == "tables":
        if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
            raise fail(f"{label} must be a list of tables like {{gpu = 0, mem_gib = 10}}")
        out = []
        for j, t in enumerate(v):
            _unknown(t, NEIGHBOUR_KEYS, f"{label}[{j}]", fail)
            if "gpu" not in t:
                raise fail(f"{label}[{j}] needs gpu")
            item = {"gpu": 0, "mem_gib": 1.0, "sm": 0.0, "cmd": "python train.py",
                    "in_tree": False}
            for key, typ in NEIGHBOUR_KEYS.items():
                if key in t:
                    x = t[key]
                    ok = isinstance(x, typ) if typ in (str, bool) else (
                        isinstance(x, (int, float)) and not isinstance(x, bool))
                    if not ok:
                        raise fail(f"{label}[{j}].{key} has the wrong type")
                    item[key] = typ(x)
            out.append(item)
        return out
    if k.kind == "settings":
        if not isinstance(v, dict):
            raise fail(f"{label} must be a table of name = \"value\"")
        return {str(a): str(b).lower() if isinstance(b, bool) else str(b) for a, b in v.items()}
    raise AssertionError(k.kind)  # a knob declared with an unknown kind: a bug here


def _check_weights(phases, setup, fail) -> None:
    for p in phases:
        w = p.knobs.get("dp_weights") or []
        if w and len(w) != setup["dp"]:
            raise fail(f"phase {p.index + 1} ('{p.name}'): dp_weights has {len(w)} entries "
                       f"but setup has dp = {setup['dp']}")
        for n in p.knobs.get("neighbours") or []:
            if not 0 <= n["gpu"] < setup["gpus"]:
                raise fail(f"phase {p.index + 1} ('{p.name}'): neighbour on gpu {n['gpu']}: "
                           f"no such GPU")


def _unknown(d: Mapping[str, Any], allowed, where: str, fail) -> None:
    for key in d:
        if key not in allowed:
            hint = difflib.get_close_matches(key, list(allowed), n=1)
            extra = f" (did you mean '{hint[0]}'?)" if hint else ""
            raise fail(f"{where}: unknown key '{key}'{extra}")


def _req_str(d: Mapping[str, Any], key: str, where: str, fail) -> str:
    v = d.get(key)
    if not isinstance(v, str) or not v.strip():
        raise fail(f"{where}: '{key}' is required (a non-empty string)")
    return v


def _num(v: Any, key: str, where: str, fail, lo: float | None = None,
         required: bool = False) -> float:
    if v is None and required:
        raise fail(f"{where}: '{key}' is required (seconds)")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise fail(f"{where}: {key} must be a number, not {v!r}")
    if lo is not None and v < lo:
        raise fail(f"{where}: {key} must be > 0" if lo > 0 else f"{where}: {key} must be >= 0")
    return float(v)


def _g(x: float | None) -> str:
    return "-inf" if x is None else f"{x:g}"
