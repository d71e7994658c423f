"""The scenario run: one deterministic simulation behind every source of a demo.

Each tick (one virtual second) the scenario's timeline gives the knobs (ramped between
phases), the server's engines advance (``scenario_engine``), and from that one state come
the GPUs' numbers, the process tree and the server's counters and histograms, so all three
sources tell the same story (a slow GPU raises ITL, a full KV cache preempts, a restart
resets counters).

Everything random comes from one ``random.Random(seed)`` drawn in a fixed order, so a seed
gives the same Frames bit for bit.  No I/O here; ``scenario_readings`` and
``scenario_expo`` turn a SimFrame into Readings and into exposition text.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from infertop.demo.engine import DT, EngineSim
from infertop.demo.hist import Hist
from infertop.demo.scenario import KNOBS, THROTTLE_NAMES, Phase, Scenario

MAX_THREADS = 20  # busiest threads reported per process (the live probe's default)
GIB = float(1 << 30)
THROTTLE_BITS = {name: 1 << i for i, name in enumerate(THROTTLE_NAMES)}
DEMO_EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z: a fixed clock keeps runs identical


# ---- views handed to the generators ----------------------------------------------------
@dataclass
class EngineView:
    index: int
    running: int
    waiting: int
    kv_usage: float
    counters: dict[str, float]
    finished: dict[str, float]
    hists: dict[str, Hist]          # live objects: render them at once
    gen_rate: float
    prompt_rate: float
    hit_rate: float
    itl_s: float
    ttft_s: float
    spec_accept: float
    max_tokens_seen: float
    gpus: tuple[int, ...]


@dataclass
class GpuView:
    index: int
    values: dict[str, float]
    throttle: int
    lost: bool
    xid_last: int
    xid_total: int
    ecc_uncorrected: float
    procs: list[tuple[int, float, float]]   # (pid, gpu memory bytes, sm ratio)
    owners: dict[int, str] = field(default_factory=dict)   # neighbour pid -> its command


@dataclass
class ThreadView:
    tid: int
    name: str
    cpu: float


@dataclass
class ProcView:
    pid: int
    ppid: int
    name: str
    role: str
    argv: list[str]
    cpu: float
    rss: float
    threads: int
    top_threads: list[ThreadView]
    ctx_voluntary: float
    ctx_involuntary: float


@dataclass
class SimFrame:
    time: float
    tick: int
    scenario_time: float
    loop: int
    phase: Phase
    down: bool
    kind: str
    model: str
    start_time: float
    setup: Mapping[str, Any]
    engines: list[EngineView]
    gpus: list[GpuView]
    procs: list[ProcView]
    host: dict[str, float]
    restarts: int = 0
    server_pid: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # a disaggregated pair (setup pd_pair): the prefill instance on another node, as its
    # /metrics page sees it (engines only: no GPUs or processes of this host)
    prefill: SimFrame | None = None


class ScenarioRun:
    """Plays one scenario: ``step()`` returns the next SimFrame (None when a single pass ends).

    ``start_time``: the virtual clock's origin (unix seconds); ``dialect`` overrides the
    scenario's server kind (exposition, process tree and header follow it).
    """

    def __init__(self, scenario: Scenario, *, seed: int | None = None,
                 start_time: float = DEMO_EPOCH, dialect: str | None = None,
                 loop: bool = True) -> None:
        self.scenario = scenario
        self.setup = dict(scenario.setup)
        self.kind = dialect or self.setup["server"]
        self.seed = scenario.seed if seed is None else seed
        self.rng = random.Random(self.seed)
        self.loop_enabled = loop
        self.start_time = float(start_time)
        self.t = 0.0          # virtual seconds since the run began
        self.tick = 0
        self.loop = 0
        self.restarts = 0
        self.finished = False
        self._phase_key: tuple[int, int] | None = None
        self.prefill_engine: EngineSim | None = None
        self.prefill_setup: dict[str, Any] = {}
        self.prefill_start = self.start_time
        self._new_server(self.start_time)
        gpus = int(self.setup["gpus"])
        self.gpu_extra_mem = [0.0] * gpus
        self.gpu_ecc = [0.0] * gpus
        self.gpu_xid = [(0, 0)] * gpus  # (last code, total)
        self.phase: Phase = scenario.phases[0]

    def _new_server(self, now: float) -> None:
        s = self.setup
        pair = bool(s.get("pd_pair"))
        self.engines = [EngineSim(i, s, remote_prefill=pair) for i in range(int(s["dp"]))]
        if pair and self.prefill_engine is None:
            # the prefill instance (another node) keeps running across a decode restart
            self.prefill_setup = prefill_setup(s)
            self.prefill_engine = EngineSim(0, self.prefill_setup)
            self.prefill_start = now - 30.0
        self.pid_base = 4100 + 1000 * self.restarts
        self.server_start = now - 30.0  # it loaded its weights before the demo began
        self.proc_ctx: dict[int, list[float]] = {}
        self.cpu_seconds = 0.0

    # ---- timeline ---------------------------------------------------------------------
    @property
    def scenario_time(self) -> float:
        return self.t - self.loop * self.scenario.duration

    def step(self) -> SimFrame | None:
        if self.finished:
            return None
        sc = self.scenario
        ts = self.scenario_time
        if ts >= sc.duration - 1e-9:
            if not self.loop_enabled:
                self.finished = True
                return None
            self.loop += 1
            ts = self.scenario_time
        phase = sc.phase_at(ts)
        key = (self.loop, phase.index)
        entering = key != self._phase_key
        self._phase_key = key
        self.phase = phase
        now = self.start_time + self.t + DT
        if entering and phase.restart and self.tick > 0:
            self.restarts += 1
            self._new_server(now)
            self.server_start = now
            self.gpu_extra_mem = [0.0] * len(self.gpu_extra_mem)
        first = self.loop == 0
        g = _Knobs(sc, ts, None, first)
        gk = [_Knobs(sc, ts, i, first) for i in range(int(self.setup["gpus"]))]
        frame = self._advance(now, ts, phase, entering, g, gk)
        self.t += DT
        self.tick += 1
        return frame

    # ---- one tick ----------------------------------------------------------------------
    def _advance(self, now: float, ts: float, phase: Phase, entering: bool, g: _Knobs,
                 gk: list[_Knobs]) -> SimFrame:
        s, rng = self.setup, self.rng
        tp, ngpu = int(s["tp"]), int(s["gpus"])
        down = phase.down
        engine_gpus = [tuple(range(e * tp, e * tp + tp)) for e in range(len(self.engines))]

        # GPU events at a phase's start: Xid codes; running totals: ECC, memory growth
        for i in range(ngpu):
            xid = int(gk[i].cur("xid") or 0)
            if entering and xid:
                last, total = self.gpu_xid[i]
                self.gpu_xid[i] = (xid, total + 1)
            self.gpu_ecc[i] += gk[i].num("ecc_uncorrected_per_min") / 60.0 * DT
            if not down:
                self.gpu_extra_mem[i] = max(
                    0.0, self.gpu_extra_mem[i] + gk[i].num("mem_growth_gib_per_min") / 60 * DT)
        lost = [bool(gk[i].cur("lost")) for i in range(ngpu)]

        # engines
        weights = g.cur("dp_weights") or [1.0] * len(self.engines)
        wsum = sum(weights) or 1.0
        knobs = g.values()
        for e, eng in enumerate(self.engines):
            slow = max(gk[i].num("slowdown") / max(0.05, gk[i].num("clock_ratio"))
                       for i in engine_gpus[e])
            if down:
                eng.busy = 0.0
                continue
            eng.step(rng, knobs, s, weights[e] / wsum, slow,
                     any(lost[i] for i in engine_gpus[e]))

        pre = self.prefill_engine
        if pre is not None:
            # the router sends each request to the prefill instance first with max_tokens 1
            # (vLLM's disaggregated proxy): its TTFT is queue + prefill, it moves no KV in
            pre.step(rng, {**knobs, "gen_tokens": 1.0, "kv_transfer_ms": 0.0},
                     self.prefill_setup, 1.0, 1.0, False)

        gpus = self._gpus(ts, down, gk, engine_gpus, lost, rng)
        procs = [] if down else self._procs(g, gk, engine_gpus, rng)
        host = self._host(g, procs, rng)
        views = [_view(e, engine_gpus[e.index]) for e in self.engines]
        api = next((p for p in procs if p.ppid == 1), None)
        peer = None
        if pre is not None:
            peer = SimFrame(now, self.tick + 1, ts, self.loop, phase, False, self.kind,
                            s["model"], self.prefill_start, self.prefill_setup,
                            [_view(pre, ())], [], [], host)
        return SimFrame(now, self.tick + 1, ts, self.loop, phase, down, self.kind,
                        s["model"], self.server_start, s, views, gpus, procs, host,
                        self.restarts, api.pid if api else None, prefill=peer)

    # ---- GPUs ------------------------------------------------------------------------
    def _gpus(self, ts, down, gk, engine_gpus, lost, rng) -> list[GpuView]:
        s = self.setup
        noise = float(s["noise"])
        limit = float(s["power_limit_w"])
        total = float(s["gpu_mem_gib"]) * GIB
        owner = {i: e for e, gs in enumerate(engine_gpus) for i in gs}
        out = []
        for i in range(int(s["gpus"])):
            k = gk[i]
            e = owner.get(i)
            eng = self.engines[e] if e is not None and not down else None
            # TP: every GPU of an engine waits for the slowest one; the fast ones idle
            # inside the collective (util stays high, SM activity drops).
            wait_factor = 1.0
            if e is not None:
                mine = k.num("slowdown") / max(0.05, k.num("clock_ratio"))
                slowest = max(gk[j].num("slowdown") / max(0.05, gk[j].num("clock_ratio"))
                              for j in engine_gpus[e])
                wait_factor = mine / slowest
            busy = k.auto("gpu_busy", eng.busy if eng else 0.0)
            neighbours = [n for n in k.cur("neighbours") or [] if n["gpu"] == i]
            nb_sm = sum(n["sm"] for n in neighbours)
            util = _clip(_jit(rng, max(busy, nb_sm), noise))
            sm = _clip(_jit(rng, util * k.num("sm_efficiency") * wait_factor + nb_sm * 0.8,
                            noise))
            sm = min(sm, util)
            tensor = _clip(_jit(rng, sm * k.num("tensor_share"), noise))
            dram = _clip(_jit(rng, sm * k.num("dram_share"), noise))
            occ = _clip(_jit(rng, sm * k.num("occupancy_share"), noise))
            idle = util < 0.02
            clock_ratio = k.num("clock_ratio")
            clock = s["sm_clock_max_mhz"] * (0.175 if idle else clock_ratio) * 1e6
            auto_power = (0.1 * limit + 0.9 * limit * (0.25 * util + 0.55 * sm + 0.2 * tensor)
                          * clock_ratio ** 1.5)
            power = min(limit, _jit(rng, k.auto("power_w", auto_power), noise / 2))
            temp = _jit(rng, k.auto("temp_c", 30.0 + 45.0 * power / limit), noise / 4)
            mask = 0
            for name in k.cur("throttle") or []:
                mask |= THROTTLE_BITS[name]
            if idle:
                mask |= THROTTLE_BITS["idle"]
            pcie = _jit(rng, k.num("pcie_gbps") * 1e9 * (0.3 + 0.7 * util if util else 0.05),
                        noise * 2) if not idle else 2e6
            nvl_auto = (40.0 * util if (s["nvlink"] and int(s["tp"]) > 1 and e is not None)
                        else 0.0)
            nvl = max(0.0, _jit(rng, k.auto("nvlink_gbps", nvl_auto) * 1e9, noise * 2)) \
                if s["nvlink"] else 0.0
            # memory: the server's reservation + growth + neighbours + driver context
            procs: list[tuple[int, float, float]] = []
            used = 0.5 * GIB
            holder = self._gpu_holder(i, e)
            if e is not None and not down:
                reserve = float(s["gpu_memory_utilization"]) * total - 0.5 * GIB
                # the card holds what it holds: growth stops at its size (a real card
                # would fail the next allocation), never past it
                room = total * 0.995 - used - sum(n["mem_gib"] for n in neighbours) * GIB
                held = max(0.0, min(reserve + self.gpu_extra_mem[i] * GIB, room))
                used += held
                procs.append((holder, held, sm - nb_sm * 0.8 if nb_sm else sm))
            owners: dict[int, str] = {}
            for j, n in enumerate(neighbours):
                used += n["mem_gib"] * GIB
                procs.append((7300 + 10 * i + j, n["mem_gib"] * GIB, n["sm"]))
                if n.get("cmd") and not n.get("in_tree"):
                    owners[7300 + 10 * i + j] = str(n["cmd"])
            used = min(used, total * 0.995)
            values = {
                "util": util, "mem_util": _clip(dram * 0.85), "mem_used": used,
                "mem_total": total, "power": power, "power_limit": limit, "temp": temp,
                "sm_clock": clock, "sm_clock_max": s["sm_clock_max_mhz"] * 1e6,
                "mem_clock": s["mem_clock_max_mhz"] * 1e6,
                "mem_clock_max": s["mem_clock_max_mhz"] * 1e6,
                "pcie_rx": pcie, "pcie_tx": pcie * 0.4,
                "nvlink_rx": nvl, "nvlink_tx": nvl, "sm_active": sm, "tensor": tensor,
                "dram": dram, "occupancy": occ}
            last, total_xid = self.gpu_xid[i]
            out.append(GpuView(i, values, mask, lost[i], last, total_xid,
                               math.floor(self.gpu_ecc[i]), procs, owners))
        return out

    def _gpu_holder(self, gpu: int, engine: int | None) -> int:
        """pid holding a GPU's CUDA context: the worker (TP>1) or the engine process."""
        if engine is None:
            return 0
        tp = int(self.setup["tp"])
        kind = self.kind
        b = self.pid_base
        if kind == "vllm":
            return b + 80 + engine if tp == 1 else b + 100 + gpu
        if kind == "sglang":
            return b + 100 + gpu
        if kind == "tgi":
            return b + 100 + gpu
        return b  # llama.cpp: one process

    # ---- processes ---------------------------------------------------------------------
    def _procs(self, g: _Knobs, gk, engine_gpus, rng) -> list[ProcView]:
        s = self.setup
        b = self.pid_base
        model = s["model"]
        busy = max((e.busy for e in self.engines), default=0.0)
        arrival = g.num("arrival_rate")
        gen_rate = sum(e.gen_rate for e in self.engines)
        api_cpu = g.auto("api_cpu", 0.05 + 0.01 * arrival + gen_rate / 20000.0)
        engine_cpu = g.auto("engine_cpu", 0.3 + 0.55 * busy)
        api_threads = max(1, int(round(g.num("api_threads"))))
        gil = g.num("gil_share")
        noise = float(s["noise"])
        tp, dp = int(s["tp"]), int(s["dp"])
        args = self._cmd_args(g)
        procs: list[ProcView] = []

        omp = max(0, int(round(g.num("omp_threads"))))
        omp_cpu = g.num("omp_thread_cpu")

        def add(pid, ppid, name, role, argv, cpu, rss_gib, nthreads, main_name, main_share,
                other_name="python", compute=False):
            cpu = max(0.0, _jit(rng, cpu, noise))
            threads = [ThreadView(pid, main_name, cpu * main_share)]
            others = max(0, nthreads - 1)
            rest = cpu * (1 - main_share)
            for j in range(min(others, 7)):
                # the rest of the CPU falls on a few helper threads, decreasing
                w = rest * (0.5 ** (j + 1)) if others > 1 else rest
                threads.append(ThreadView(pid + 3 + j, other_name, w))
            if compute and omp:
                # an OMP / intra-op pool: a thread per core, each busy
                for j in range(omp):
                    threads.append(ThreadView(pid + 100 + j, other_name,
                                              max(0.0, _jit(rng, omp_cpu, noise))))
                cpu += sum(t.cpu for t in threads[-omp:])
                nthreads += omp
            threads.sort(key=lambda t: (-t.cpu, t.tid))
            del threads[MAX_THREADS:]   # the busiest ones, as the live probe reports
            ctx = self.proc_ctx.setdefault(pid, [0.0, 0.0])
            # threads queueing for the GIL wake every switch interval (5 ms) and sleep again
            gil_waiters = nthreads if (nthreads > 32 and cpu > 0.8 and main_share >= 0.5) \
                else 0
            ctx[0] += round((nthreads * 20 + gil_waiters * 200) * DT)
            ctx[1] += round(cpu * 60 * DT)
            procs.append(ProcView(pid, ppid, name, role, argv, cpu, rss_gib * GIB, nthreads,
                                  threads, ctx[0], ctx[1]))

        if self.kind == "vllm":
            add(b, 1, "vllm", "api_server",
                ["/usr/bin/python3", "/usr/local/bin/vllm", "serve", model, *args],
                api_cpu, 0.75, api_threads, "python", gil)
            add(b + 1, b, "python", "helper",
                ["/usr/bin/python3", "-B", "-c",
                 "from multiprocessing.resource_tracker import main;main(32)"],
                0.0, 0.012, 1, "python", 1.0)
            for e in range(dp):
                title = "VLLM::EngineCore" + (f"_DP{e}" if dp > 1 else "")
                eb = self.engines[e].busy
                ecpu = g.auto("engine_cpu", 0.3 + 0.55 * eb)
                add(b + 80 + e, b, title, "engine_core", [title], ecpu + 0.05, 1.6, 15,
                    title[:15], 0.93, compute=tp == 1)
                if tp > 1:
                    for t in range(tp):
                        i = e * tp + t
                        wt = ("VLLM::Worker" + (f"_DP{e}" if dp > 1 else "") + f"_TP{t}")
                        add(b + 100 + i, b + 80 + e, wt, "worker", [wt],
                            0.4 + 0.5 * eb, 2.1, 47, wt[:15], 0.9, "pt_gloo_runloop",
                            compute=True)
        elif self.kind == "sglang":
            add(b, 1, "python3", "api_server",
                ["/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", model, *args],
                api_cpu, 0.9, api_threads, "python3", gil)
            for e in range(dp):
                for t in range(tp):
                    i = e * tp + t
                    title = "sglang::scheduler" + (f"_DP{e}" if dp > 1 else "") + \
                        (f"_TP{t}" if tp > 1 else "")
                    add(b + 100 + i, b, title, "scheduler", [title], engine_cpu, 2.4, 30,
                        title[:15], 0.93, compute=True)
            add(b + 90, b, "sglang::detokenizer", "detokenizer", ["sglang::detokenizer"],
                0.02 + gen_rate / 50000.0, 0.5, 4, "sglang::detoken", 0.9)
        elif self.kind == "tgi":
            add(b - 10, 1, "text-generation-launcher", "launcher",
                ["text-generation-launcher", "--model-id", model, *args], 0.01, 0.02, 8,
                "text-generation", 0.8)
            add(b, b - 10, "text-generation-router", "router",
                ["text-generation-router", "--model-id", model, *args], api_cpu, 0.1,
                api_threads, "text-generation", gil, "tokio-runtime-w")
            for t in range(tp):
                add(b + 100 + t, b - 10, "text-generation-server", "shard",
                    ["/usr/bin/python3", "/usr/local/bin/text-generation-server", "serve",
                     model, "--sharded", str(tp > 1).lower()], engine_cpu, 2.0, 20,
                    "text-generation", 0.92, compute=True)
        else:  # llama.cpp: one process, HTTP and engine threads together
            add(b, 1, "llama-server", "server",
                ["/usr/local/bin/llama-server", "-m",
                 f"/models/{model.split('/')[-1]}.gguf", *args],
                engine_cpu + api_cpu, 1.2, max(api_threads, 8), "llama-server", 0.85,
                compute=True)
        # leftovers of the server still in its tree (an engine that did not exit)
        root = procs[0].pid if procs else b
        for i in range(int(s["gpus"])):
            for j, n in enumerate(n for n in gk[i].cur("neighbours") or [] if n["gpu"] == i):
                if n.get("in_tree"):
                    title = n["cmd"]
                    role = ("engine_core" if "EngineCore" in title else
                            "worker" if "Worker" in title else "helper")
                    add(7300 + 10 * i + j, root, title.split()[0], role, title.split(),
                        0.01, 1.2, 15, title[:15], 0.9)
        return procs

    def _cmd_args(self, g: _Knobs) -> list[str]:
        """The server's command-line options, as its entry point would have been started."""
        s = self.setup
        kind = self.kind
        seqs = str(int(g.cur("max_num_seqs")))
        opts: list[str] = []
        if kind == "vllm":
            if s["tp"] > 1:
                opts += ["--tensor-parallel-size", str(s["tp"])]
            if s["dp"] > 1:
                opts += ["--data-parallel-size", str(s["dp"])]
            opts += ["--max-num-seqs", seqs,
                     "--gpu-memory-utilization", str(s["gpu_memory_utilization"]),
                     "--max-model-len", str(s["max_model_len"])]
            if s["enforce_eager"]:
                opts.append("--enforce-eager")
            if s["spec_tokens"]:
                opts += ["--speculative-config", '{"method": "ngram", '
                         f'"num_speculative_tokens": {s["spec_tokens"]}}}']
        elif kind == "sglang":
            opts += ["--tp-size", str(s["tp"])]
            if s["dp"] > 1:
                opts += ["--dp-size", str(s["dp"])]
            opts += ["--max-running-requests", seqs,
                     "--mem-fraction-static", str(s["gpu_memory_utilization"]),
                     "--context-length", str(s["max_model_len"]), "--enable-metrics"]
            if s["enforce_eager"]:
                opts.append("--disable-cuda-graph")
            if s["spec_tokens"]:
                opts += ["--speculative-algorithm", "EAGLE",
                         "--speculative-num-draft-tokens", str(s["spec_tokens"])]
        elif kind == "tgi":
            opts += ["--num-shard", str(s["tp"]), "--max-concurrent-requests", seqs]
            if s["enforce_eager"]:
                opts += ["--cuda-graphs", "0"]
        else:
            # llama.cpp splits --ctx-size among its slots: give each slot a full context
            opts += ["--parallel", seqs, "--ctx-size",
                     str(int(s["max_model_len"]) * int(seqs)), "--metrics"]
        for name, value in s["settings"].items():
            flag = "--" + name.replace("_", "-")
            if value == "true":
                opts.append(flag)
            elif value == "false":
                opts.append("--no-" + name.replace("_", "-"))
            else:
                opts += [flag, value]
        return opts

    def _host(self, g: _Knobs, procs: list[ProcView], rng) -> dict[str, float]:
        s = self.setup
        cpus = float(s["host_cpus"])
        used_cores = sum(p.cpu for p in procs) + 0.8
        ratio = _clip(g.auto("host_cpu", used_cores / cpus))
        load = ratio * cpus * (1.15 if ratio > 0.9 else 1.0)
        mem = 24 * GIB + sum(p.rss for p in procs)
        return {"cpu_ratio": _clip(_jit(rng, ratio, 0.01)), "cpu_count": cpus,
                "load1": round(load, 2), "mem_used": mem,
                "mem_total": float(s["host_mem_gib"]) * GIB}


def _view(e: EngineSim, gpus: tuple[int, ...]) -> EngineView:
    return EngineView(e.index, e.running, e.waiting, e.kv_usage, e.c, e.finished, e.h,
                      e.gen_rate, e.prompt_rate, e.hit_rate, e.itl_s, e.ttft_s,
                      e.spec_accept, e.max_tokens_seen, gpus)


def prefill_setup(setup: Mapping[str, Any]) -> dict[str, Any]:
    """The prefill instance's setup: the decode instance's, with kv_role kv_producer in its
    --kv-transfer-config (the role infertop reads from a command line)."""
    out = dict(setup)
    settings = dict(setup["settings"])
    cfg = settings.get("kv_transfer_config", "")
    try:
        parsed = json.loads(cfg)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        parsed["kv_role"] = "kv_producer"
        settings["kv_transfer_config"] = json.dumps(parsed, separators=(",", ":"))
    out["settings"] = settings
    out["pd_pair"] = False
    return out


class _Knobs:
    """Knob values at one scenario time, optionally for one GPU, with ramps and autos."""

    __slots__ = ("cur_v", "prev_v", "f")

    def __init__(self, sc: Scenario, ts: float, gpu: int | None, first: bool) -> None:
        self.cur_v, self.prev_v, self.f = sc.ramp_pairs(ts, gpu, first_pass=first)

    def cur(self, name: str) -> Any:
        return self.cur_v.get(name)

    def num(self, name: str) -> float:
        return self.auto(name, 0.0)

    def auto(self, name: str, auto_value: float) -> float:
        """The knob's value now; "auto" ends of a ramp take ``auto_value``."""
        c = self.cur_v.get(name)
        p = self.prev_v.get(name, c)
        c = auto_value if c is None else c
        p = auto_value if p is None else p
        if not KNOBS[name].ramp or self.f >= 1.0:
            return float(c)
        return float(p + (c - p) * self.f)

    def values(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, k in KNOBS.items():
            v = self.cur_v.get(name)
            if k.kind in ("float", "int") and v is not None:
                out[name] = self.num(name)
            else:
                out[name] = v
        return out


def _jit(rng: random.Random, v: float, rel: float) -> float:
    return v * (1.0 + rel * rng.gauss(0.0, 1.0)) if rel > 0 and v else v


def _clip(v: float, lo: float = 0.0, hi: float = 1.0) -> float:
    return lo if v < lo else hi if v > hi else v
