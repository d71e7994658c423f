"""The reading keys: the JSON contract between probes, core, rules, panes and recordings.

Every key a probe or the derive stage emits is declared here with its unit, kind and the
layers whose pane shows it (a key can belong to several: GPM SM activity is a hardware
reading and the kernels pane's main evidence).  Tests fail on an undeclared key, so a
new reading gets a home on screen and in ``snapshot --json`` by construction.

Conventions: ratios are 0..1; ``process.cpu_ratio`` is in cores (1.0 = one core busy);
counters end in ``_total``; a counter's spec names its derived rate (``rate=``, computed by
infertop/derive.py) or says why it has none (``no_rate=``: a test holds every counter to one);
histograms keep their key, and derived quantiles carry a ``quantile`` label.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import Kind, Layer

HW, KRN, MEM, SCH, PAR, DEC = (Layer.HARDWARE, Layer.KERNELS, Layer.MEMORY, Layer.SCHEDULING,
                               Layer.PARALLELISM, Layer.DECODING)


@dataclass(frozen=True, slots=True)
class KeySpec:
    key: str
    unit: str
    kind: Kind
    layers: tuple[Layer, ...]
    help: str
    derived: bool = False  # computed by infertop.derive from History, never by a probe
    # a counter: the derived key its per-second rate is (same labels; derive.RATES), or,
    # when it has none, why (what reads the counter instead)
    rate: str = ""
    no_rate: str = ""
    # a cumulative key (counter, histogram) whose raw values stay in History: the derived
    # keys a user sees it through (besides its rate, or its own quantiles); a test holds
    # every such key to reach ``snapshot --json`` through one of them
    shown_as: tuple[str, ...] = ()


def _k(key: str, unit: str, kind: Kind, layers: tuple[Layer, ...] | Layer, help: str,
       derived: bool = False, *, rate: str = "", no_rate: str = "",
       shown_as: tuple[str, ...] = ()) -> KeySpec:
    if isinstance(layers, Layer):
        layers = (layers,)
    return KeySpec(key, unit, kind, layers, help, derived, rate, no_rate, shown_as)


G, C, H, I = Kind.GAUGE, Kind.COUNTER, Kind.HISTOGRAM, Kind.INFO

_SPECS: tuple[KeySpec, ...] = (
    # ---- GPU (label gpu = NVML index; uuid on gpu.info) -------------------------------
    _k("gpu.info", "", I, (HW, PAR), "GPU name (text); labels gpu, uuid, pci_bus_id"),
    _k("gpu.lost", "", G, (HW, PAR), "1 when NVML reports the GPU fell off the bus"),
    _k("gpu.util_ratio", "ratio", G, (HW, PAR),
       "NVML 'GPU util': share of time at least one kernel ran; NOT how busy the SMs are"),
    _k("gpu.mem_util_ratio", "ratio", G, HW, "NVML memory-controller busy time share"),
    _k("gpu.mem_used_bytes", "bytes", G, (HW, MEM, PAR), "device memory in use"),
    _k("gpu.mem_total_bytes", "bytes", G, (HW, MEM), "device memory size"),
    _k("gpu.power_watts", "W", G, HW, "board power draw"),
    _k("gpu.power_limit_watts", "W", G, HW, "enforced power limit"),
    _k("gpu.temp_celsius", "celsius", G, HW, "GPU core temperature"),
    _k("gpu.mem_temp_celsius", "celsius", G, HW,
       "memory (HBM) temperature: NVML field NVML_FI_DEV_MEMORY_TEMP (82), DCGM "
       "DCGM_FI_DEV_MEMORY_TEMP"),
    _k("gpu.sm_clock_hz", "Hz", G, HW, "current SM clock"),
    _k("gpu.sm_clock_max_hz", "Hz", G, HW, "maximum SM clock"),
    _k("gpu.mem_clock_hz", "Hz", G, HW, "current memory clock"),
    _k("gpu.mem_clock_max_hz", "Hz", G, HW, "maximum memory clock"),
    _k("gpu.throttle_reasons", "bitmask", G, HW,
       "NVML clocks-event reasons bitmask; text lists the decoded active reasons"),
    _k("gpu.pcie_tx_bytes_per_second", "bytes/s", G, (HW, PAR), "PCIe transmit rate"),
    _k("gpu.pcie_rx_bytes_per_second", "bytes/s", G, (HW, PAR), "PCIe receive rate"),
    _k("gpu.pcie_link_gen", "", G, (HW, PAR), "current PCIe link generation"),
    _k("gpu.pcie_link_width", "lanes", G, (HW, PAR), "current PCIe link width"),
    _k("gpu.nvlink_tx_bytes_per_second", "bytes/s", G, (HW, PAR), "NVLink transmit rate, all links"),
    _k("gpu.nvlink_rx_bytes_per_second", "bytes/s", G, (HW, PAR), "NVLink receive rate, all links"),
    _k("gpu.nvlink_links_active", "count", G, PAR, "NVLink links up"),
    _k("gpu.ecc_uncorrected_total", "count", C, HW, "volatile uncorrected ECC errors",
       no_rate="new events over the event window (derive.EVENT_COUNTERS), not a rate",
       shown_as=("gpu.ecc_uncorrected_new",)),
    _k("gpu.ecc_corrected_total", "count", C, HW, "volatile corrected ECC errors",
       rate="gpu.ecc_corrected_per_second"),
    _k("gpu.xid_last", "", G, HW, "code of the most recent Xid critical error seen"),
    _k("gpu.xid_total", "count", C, HW, "Xid critical errors seen since infertop started",
       no_rate="new events over the event window (derive.EVENT_COUNTERS), not a rate",
       shown_as=("gpu.xid_new",)),
    _k("gpu.mig_enabled", "", G, HW, "1 when MIG mode is on"),
    # row remapping (nvmlDeviceGetRemappedRows; DCGM_FI_DEV_{UN,}CORRECTABLE_REMAPPED_ROWS,
    # DCGM_FI_DEV_ROW_REMAP_PENDING, DCGM_FI_DEV_ROW_REMAP_FAILURE)
    _k("gpu.remapped_rows_uncorrectable", "count", G, HW,
       "memory rows remapped after uncorrectable errors"),
    _k("gpu.remapped_rows_correctable", "count", G, HW,
       "memory rows remapped after correctable errors"),
    _k("gpu.row_remap_pending", "", G, HW, "1 when a remap waits for a GPU reset"),
    _k("gpu.row_remap_failure", "", G, HW, "1 when a row remap failed (no spare rows left)"),
    # static facts for the speed-of-light peaks (infertop/peaks.py)
    _k("gpu.mem_bus_width_bits", "bits", G, HW, "memory bus width (NVML)"),
    _k("gpu.cuda_cores", "count", G, HW, "CUDA cores (NVML); SM count = cores / cores per SM"),
    _k("gpu.compute_capability", "", G, HW, "CUDA compute capability as major.minor (9.0)"),
    # GPM (Hopper+): what the SMs actually do
    _k("gpu.sm_active_ratio", "ratio", G, (HW, KRN, PAR), "GPM SM activity: share of SM cycles busy"),
    _k("gpu.sm_occupancy_ratio", "ratio", G, (HW, KRN), "GPM SM occupancy: resident warps / max"),
    _k("gpu.tensor_active_ratio", "ratio", G, (HW, KRN), "GPM any-tensor-pipe activity"),
    _k("gpu.dram_bw_util_ratio", "ratio", G, (HW, KRN), "GPM DRAM bandwidth utilisation"),
    _k("gpu.topology", "", I, PAR,
       "path between two GPUs (labels gpu, peer): text NVLINK/PIX/PXB/PHB/NODE/SYS"),
    # ---- host and server processes ----------------------------------------------------
    _k("host.cpu_ratio", "ratio", G, SCH, "whole-host CPU busy share (all cores)"),
    _k("host.cpu_count", "count", G, SCH, "logical CPUs"),
    _k("host.load1", "", G, SCH, "1-minute load average"),
    _k("host.top_cpu_cores", "cores", G, SCH,
       "the host's top CPU consumers, any program (labels pid, name, server=yes when in the "
       "server's tree); read only while the host is near saturation"),
    # pressure stall information (PSI, /proc/pressure/{cpu,memory,io}; label resource)
    _k("host.pressure_some_ratio", "ratio", G, SCH,
       "share of the last 10 s in which some task waited for the resource (PSI some avg10)"),
    _k("host.pressure_full_ratio", "ratio", G, (SCH, MEM),
       "share of the last 10 s in which every non-idle task waited (PSI full avg10)"),
    _k("host.pressure_stall_seconds_total", "s", C, SCH,
       "time tasks stalled on the resource since boot (PSI total; labels resource, scope)",
       rate="host.pressure_stall_ratio"),
    _k("host.mem_used_bytes", "bytes", G, (SCH, MEM), "host memory in use"),
    _k("host.mem_total_bytes", "bytes", G, (SCH, MEM), "host memory size"),
    _k("process.info", "", I, SCH,
       "one server process: labels pid, ppid, name, role, user; text = command line "
       "(control characters made visible, secrets redacted by the probe)"),
    _k("process.cpu_ratio", "cores", G, (SCH, PAR), "process CPU in cores (1.0 = one core)"),
    _k("process.rss_bytes", "bytes", G, (SCH, MEM), "process resident memory"),
    _k("process.threads", "count", G, SCH, "process thread count"),
    _k("process.state", "", I, SCH,
       "scheduler state (text: running, sleeping, disk-sleep, stopped...); D means blocked on I/O"),
    _k("process.ctx_switches_total", "count", C, SCH,
       "voluntary+involuntary context switches (label type)",
       rate="process.ctx_switches_per_second"),
    _k("process.gpu_mem_bytes", "bytes", G, (MEM, PAR), "GPU memory held by a process on a GPU"),
    _k("process.gpu_sm_ratio", "ratio", G, (KRN, PAR), "per-process SM utilisation (NVML)"),
    _k("process.gpu_owner", "", I, MEM,
       "who runs a GPU process (NVML pid, also outside the server's tree): labels pid, "
       "user, name, container (its container or namespace/pod, when in one); text = "
       "command line (cleaned, secrets redacted); not read from inside "
       "a nested PID namespace"),
    _k("thread.cpu_ratio", "cores", G, SCH, "thread CPU in cores; labels pid, tid, name"),
    # optional low-rate py-spy GIL sampler (labels pid, role; rolling window of dumps)
    _k("python.gil_held_ratio", "ratio", G, SCH,
       "share of py-spy dumps in which some thread of the process held the GIL"),
    _k("python.gil_holder", "", I, SCH, "thread that held the GIL most often (text)"),
    _k("python.thread_active_ratio", "ratio", G, SCH,
       "share of py-spy dumps in which the thread was on CPU (label thread)"),
    _k("python.gil_sampler_cost_seconds", "s", G, SCH,
       "wall time of one GIL-sampler py-spy dump (its own cost)"),
    _k("python.gil_sampler_cpu_ratio", "cores", G, SCH,
       "CPU the GIL sampler's py-spy runs use per wall second (its own cost; 0.01 = 1 % "
       "of a core)"),
    _k("server.setting", "", I, (KRN, SCH, MEM),
       "an execution setting seen on the command line or config (label name; text value)"),
    # ---- inference server /metrics (labels instance, engine, model) -------------------
    _k("server.info", "", I, DEC, "server kind/dialect, model and version (text)"),
    _k("server.families", "count", G, DEC, "metric families exposed (any dialect)"),
    _k("server.counter_moves", "", I, DEC,
       "when a counter of this server moves (label counter: a reading key; text 'on "
       "finish': only when a request finishes, so its rate between finishes reads 0)"),
    _k("server.requests_running", "count", G, (SCH, DEC, PAR), "requests in the running batch"),
    _k("server.requests_waiting", "count", G, (SCH, DEC, PAR), "requests queued"),
    _k("server.requests_swapped", "count", G, (SCH, MEM),
       "requests preempted and swapped out to CPU memory (vLLM V0 only)"),
    _k("server.process_start_seconds", "s", G, DEC, "server process start time (unix s)"),
    # what the queue waits on, refusals and sleep (vLLM 0.32 page; docs/metrics.md#vllm)
    _k("server.requests_deferred", "count", G, (SCH, DEC),
       "queued requests waiting on something other than capacity (vLLM reason=deferred: "
       "LoRA budget, KV transfer from a remote prefill, blocked); part of requests_waiting"),
    _k("server.requests_waiting_capacity", "count", G, (SCH, DEC),
       "queued requests waiting for room in the batch or the KV cache (vLLM "
       "reason=capacity: --max-num-seqs, KV blocks); part of requests_waiting"),
    _k("server.requests_paused", "count", G, (SCH, DEC),
       "requests paused, to resume later (TensorRT-LLM in-flight batching "
       "numPausedRequests; SGLang num_paused_reqs: paused by an async weight sync)"),
    _k("server.requests_retracted", "count", G, MEM,
       "requests the scheduler retracted (sent back to the queue, KV freed) in its last "
       "step: SGLang num_retracted_reqs (its preemption)"),
    _k("server.requests_grammar_queued", "count", G, (SCH, DEC),
       "requests waiting for their grammar (structured output) to compile (SGLang "
       "num_grammar_queue_reqs); not part of requests_waiting"),
    _k("server.running_context_tokens", "tokens", G, (MEM, DEC),
       "tokens of context the running decode batch attends to, summed over its sequences "
       "(SGLang decode_sum_seq_lens)"),
    _k("server.cuda_graph_active", "", G, KRN,
       "1 when the server's last forward batch ran as a CUDA graph, 0 eager (SGLang "
       "is_cuda_graph)"),
    _k("server.http_requests_active", "count", G, (SCH, DEC),
       "requests the HTTP front end is serving now, but for /metrics and health checks "
       "(SGLang http_requests_active)"),
    _k("throughput.server_generation_tokens_per_second", "tokens/s", G, DEC,
       "the server's own generation rate over its last decode-log window (SGLang "
       "gen_throughput): a cross-check of gen tok/s"),
    _k("server.utilization_ratio", "ratio", G, SCH,
       "the server's own load estimate: SGLang utilization = max(running / max running "
       "under SLO, KV usage / 0.9); absent on a prefill instance (-1 there)"),
    _k("server.scheduler_idle_seconds_total", "s", C, SCH,
       "wall time the scheduler had no runnable or queued work (SGLang)",
       rate="server.scheduler_idle_ratio"),
    _k("server.scheduler_cpu_seconds_total", "s", C, SCH,
       "CPU time of the scheduler process, all threads (SGLang)",
       rate="server.scheduler_cpu_cores"),
    _k("server.scheduler_stage_seconds_total", "s", C, SCH,
       "wall time of the scheduler loop by stage (label stage: run_batch, idle, "
       "process_input_requests, get_next_batch_to_run, ...; SGLang)",
       no_rate="read per stage over the window as the share of wall time",
       shown_as=("server.scheduler_stage_ratio",)),
    _k("server.disagg_role", "", I, PAR,
       "the engine's part in disaggregated prefill/decode (text: prefill, decode, unified, "
       "both): SGLang's engine_type label, vLLM's --kv-transfer-config kv_role"),
    _k("kv.transfer_bytes_total", "bytes", C, PAR,
       "KV-cache bytes moved between prefill and decode instances (vLLM NIXL, SGLang PD)",
       rate="kv.transfer_bytes_per_second"),
    _k("kv.transfer_failures_total", "count", C, PAR,
       "failed KV transfers (vLLM NIXL; SGLang transfer and bootstrap failures)",
       rate="kv.transfer_failures_per_second"),
    _k("disagg.queue_requests", "count", G, (SCH, PAR),
       "requests in a disaggregated-serving queue (label queue: prefill_bootstrap, "
       "prefill_inflight, decode_prealloc, decode_transfer; SGLang PD)"),
    _k("server.admission_rejections_total", "count", C, DEC,
       "requests refused at admission (label reason, e.g. max_num_queued_reqs): the client "
       "got an error at once, the request never queued",
       no_rate="read over the window as server.requests_rejected and server.rejection_ratio",
       shown_as=("server.requests_rejected", "server.rejection_ratio")),
    _k("server.sleep_level", "", G, (DEC, SCH),
       "engine sleep mode: 0 awake, 1 weights offloaded, 2 weights and KV discarded "
       "(vLLM --enable-sleep-mode); an asleep engine answers slowly, it is not slow"),
    _k("kv.usage_ratio", "ratio", G, (MEM, PAR), "KV-cache blocks in use"),
    _k("kv.config", "", I, MEM, "KV-cache configuration fact (label name; text value)"),
    _k("server.preemptions_total", "count", C, MEM, "requests preempted (KV evicted)",
       rate="server.preemptions_per_second"),
    _k("kv.prefix_cache_queries_total", "tokens", C, MEM, "tokens looked up in the prefix cache",
       no_rate="read with its hits as the windowed kv.prefix_cache_hit_ratio",
       shown_as=("kv.prefix_cache_hit_ratio",)),
    _k("kv.prefix_cache_hits_total", "tokens", C, MEM, "tokens found in the prefix cache",
       no_rate="read with its queries as the windowed kv.prefix_cache_hit_ratio",
       shown_as=("kv.prefix_cache_hit_ratio",)),
    _k("kv.prompt_tokens_by_source_total", "tokens", C, MEM,
       "prompt tokens by where their KV came from (label source: local_compute, "
       "local_cache_hit, external_kv_transfer)",
       no_rate="read as the windowed share per source (kv.prompt_source_ratio)",
       shown_as=("kv.prompt_source_ratio",)),
    _k("kv.cached_tokens_by_source_total", "tokens", C, MEM,
       "cached prompt tokens by cache tier (label source: device, host, p2p, disk, "
       "external_unspecified)",
       no_rate="read as the windowed share per source (kv.cached_source_ratio)",
       shown_as=("kv.cached_source_ratio",)),
    _k("kv.external_prefix_cache_queries_total", "tokens", C, MEM,
       "tokens looked up in an external KV cache (a KV connector: LMCache, NIXL, offload)",
       no_rate="read with its hits as kv.external_prefix_cache_hit_ratio",
       shown_as=("kv.external_prefix_cache_hit_ratio",)),
    _k("kv.external_prefix_cache_hits_total", "tokens", C, MEM,
       "tokens found in an external KV cache",
       no_rate="read with its queries as kv.external_prefix_cache_hit_ratio",
       shown_as=("kv.external_prefix_cache_hit_ratio",)),
    _k("kv.used_tokens", "tokens", G, MEM,
       "KV token slots held by running requests (SGLang kv_used_tokens)"),
    _k("kv.available_tokens", "tokens", G, MEM, "free KV token slots (SGLang)"),
    _k("kv.evictable_tokens", "tokens", G, MEM,
       "KV token slots held only by the prefix (radix) cache: reclaimable (SGLang)"),
    _k("kv.batch_prefix_hit_ratio", "ratio", G, MEM,
       "the server's prefix-cache hit rate of its last prefill batch (SGLang cache_hit_rate)"),
    _k("request.prefill_computed_tokens", "tokens", H, (MEM, KRN),
       "prompt tokens each request's prefill computed itself (neither cached nor transferred)",
       shown_as=("request.prefill_computed_tokens_mean",)),
    _k("kv.prompt_tokens_cached_total", "tokens", C, MEM,
       "prompt tokens served from a cache, local or external (vLLM prompt_tokens_cached)",
       no_rate="read with the prompt tokens as the windowed kv.prompt_cached_ratio",
       shown_as=("kv.prompt_cached_ratio",)),
    _k("request.preemptions", "count", H, MEM,
       "preemptions each finished request went through (vLLM request_num_preemptions)",
       shown_as=("request.preemptions_mean",)),
    _k("server.prompt_tokens_total", "tokens", C, DEC, "prefill tokens processed",
       rate="throughput.prompt_tokens_per_second"),
    _k("server.generation_tokens_total", "tokens", C, DEC, "tokens generated",
       rate="throughput.generation_tokens_per_second"),
    _k("server.requests_finished_total", "count", C, DEC,
       "finished requests (label reason: stop/length/abort/error...)",
       no_rate="read per reason over the window: requests_per_second, error_ratio, abort_ratio",
       shown_as=("server.requests_per_second", "server.error_ratio", "server.abort_ratio")),
    _k("server.engine_steps_total", "count", C, KRN, "engine forward steps (decode calls)",
       rate="server.engine_steps_per_second"),
    _k("spec.drafts_total", "count", C, DEC, "speculative verification steps",
       rate="spec.drafts_per_second"),
    _k("spec.batch_acceptance_ratio", "ratio", G, DEC,
       "the server's speculative acceptance rate in its last batch (SGLang spec_accept_rate)"),
    _k("spec.draft_tokens_total", "tokens", C, DEC, "speculative tokens proposed",
       no_rate="read with the accepted tokens as the windowed spec.acceptance_ratio",
       shown_as=("spec.acceptance_ratio", "spec.draft_tokens_window")),
    _k("spec.accepted_tokens_total", "tokens", C, DEC, "speculative tokens accepted",
       no_rate="read with the draft tokens as the windowed spec.acceptance_ratio",
       shown_as=("spec.acceptance_ratio",)),
    _k("latency.stage_seconds", "s", H, (DEC, SCH),
       "time a request spent in one stage of the server's pipeline (label stage; SGLang "
       "per_stage_req_latency_seconds: request_process, prefill_forward, ...)"),
    _k("latency.kv_transfer_seconds", "s", H, (PAR, DEC),
       "time of one KV transfer from a prefill to a decode instance (vLLM NIXL, SGLang)"),
    _k("latency.ttft_seconds", "s", H, DEC, "time to first token"),
    _k("latency.itl_seconds", "s", H, DEC, "inter-token latency"),
    _k("latency.tpot_seconds", "s", H, DEC, "mean time per output token of finished requests"),
    _k("latency.e2e_seconds", "s", H, DEC, "end-to-end request latency"),
    _k("latency.queue_seconds", "s", H, (DEC, SCH), "time spent waiting in the queue"),
    _k("latency.inference_seconds", "s", H, DEC,
       "time each request spent running: prefill and decode, no queue (vLLM "
       "request_inference_time_seconds)"),
    _k("latency.prefill_seconds", "s", H, (DEC, KRN), "prefill phase time"),
    _k("latency.decode_seconds", "s", H, (DEC, KRN), "decode phase time"),
    _k("request.prompt_tokens", "tokens", H, (DEC, KRN), "prompt length per request",
       shown_as=("sol.decode_roofline_tokens_per_second",)),
    _k("request.generation_tokens", "tokens", H, DEC, "generated length per request",
       shown_as=("sol.decode_roofline_tokens_per_second",)),
    _k("server.iteration_tokens", "tokens", H, KRN, "tokens per engine step (batch size signal)",
       shown_as=("server.iteration_tokens_mean",)),
    # the engine's own analytic MFU estimate (vLLM/SGLang --enable-mfu-metrics): per GPU
    _k("server.estimated_flops_per_gpu_total", "FLOP", C, KRN,
       "model FLOPs per GPU the engine estimates it did (0 on the page unless enabled)",
       no_rate="read over the window by sol_derive (achieved FLOP/s against the peak)",
       shown_as=("sol.mfu_ratio",)),
    _k("server.estimated_read_bytes_per_gpu_total", "bytes", C, KRN,
       "bytes per GPU the engine estimates it read from memory",
       no_rate="read over the window by sol_derive (achieved bandwidth)",
       shown_as=("sol.mbu_ratio",)),
    _k("server.estimated_write_bytes_per_gpu_total", "bytes", C, KRN,
       "bytes per GPU the engine estimates it wrote to memory",
       no_rate="read over the window by sol_derive (achieved bandwidth)",
       shown_as=("sol.mbu_ratio",)),
    # ---- KV-cache events (vLLM --kv-events-config, ZMQ): labels instance, engine (the
    # data-parallel rank), medium (GPU, or an offload tier); stream = one publisher ------
    _k("kv.event_blocks_stored_total", "blocks", C, MEM, "KV blocks stored (BlockStored events)",
       rate="kv.blocks_stored_per_second"),
    _k("kv.event_blocks_evicted_total", "blocks", C, MEM,
       "KV blocks evicted from the prefix cache (BlockRemoved events)",
       rate="kv.blocks_evicted_per_second"),
    _k("kv.event_blocks_restored_total", "blocks", C, MEM,
       "evicted KV blocks stored again within the restore window (60 s): the same prefix "
       "recomputed because it was evicted too soon",
       no_rate="read with the evictions as kv.prefix_thrash_ratio",
       shown_as=("kv.prefix_thrash_ratio",)),
    _k("kv.event_resident_blocks", "blocks", G, MEM,
       "KV blocks stored and not removed since infertop subscribed (blocks stored before "
       "it are unknown until removed)"),
    _k("kv.event_batches_total", "count", C, MEM, "KV-event batches received (label stream)",
       rate="kv.event_batches_per_second"),
    _k("kv.event_batches_dropped_total", "count", C, MEM,
       "KV-event batches lost: gaps in the publisher's sequence numbers (label stream)",
       rate="kv.event_batches_dropped_per_second"),
    _k("kv.event_batches_undecodable_total", "count", C, MEM,
       "KV-event messages that were not vLLM's batch format (label stream)",
       rate="kv.event_batches_undecodable_per_second"),
    # ---- the served model, from its config.json (label model) ---------------------------
    _k("model.info", "", I, KRN, "architecture and compute dtype (text); label dtype, path"),
    _k("model.params", "count", G, KRN, "parameters (from config.json shapes)"),
    _k("model.active_params", "count", G, KRN,
       "parameters used per token (mixture of experts: the routed top-k)"),
    _k("model.weight_bytes", "bytes", G, (KRN, MEM), "weights in memory, all GPUs together"),
    _k("model.kv_bytes_per_token", "bytes", G, (KRN, MEM),
       "KV-cache bytes one token of context takes, all layers"),
    # ---- fleet: one node among many, read through Prometheus or several --url ---------
    _k("node.up", "", G, PAR,
       "1 when the node's scrape target answered its last scrape (Prometheus 'up'; "
       "labels instance, job)"),
    _k("node.scrape_age_seconds", "s", G, PAR,
       "age of the node's newest scraped values (labels instance, job)"),
    # ---- derived from History (rates, windowed ratios) --------------------------------
    _k("throughput.prompt_tokens_per_second", "tokens/s", G, DEC, "prefill throughput", True),
    _k("throughput.generation_tokens_per_second", "tokens/s", G, (DEC, PAR),
       "decode throughput", True),
    _k("throughput.generation_recent_tokens_per_second", "tokens/s", G, SCH,
       "generation rate over the newest 10 s, all engines (SCH-001's 'now')", True),
    _k("throughput.generation_peak_tokens_per_second", "tokens/s", G, SCH,
       "best 10 s generation rate of the last 2 minutes, all engines (SCH-001's peak)", True),
    _k("server.requests_per_second", "1/s", G, DEC, "finished requests per second", True),
    _k("server.requests_finished", "count", G, DEC,
       "requests that finished in the window (any reason)", True),
    _k("server.error_ratio", "ratio", G, DEC,
       "share of requests finished in the window with an error reason (thresholds."
       "error_reasons; default 'error'); client aborts are not errors", True),
    _k("server.abort_ratio", "ratio", G, DEC,
       "share of requests finished in the window that the client aborted", True),
    _k("latency.observations", "count", G, DEC,
       "observations of a latency histogram in the window (label of = the histogram key)", True),
    _k("spec.draft_tokens_window", "tokens", G, DEC,
       "speculative tokens proposed in the window", True),
    _k("gpu.xid_new", "count", G, HW,
       "Xid critical errors in the last thresholds.error_event_window seconds", True),
    _k("gpu.ecc_uncorrected_new", "count", G, HW,
       "uncorrected ECC errors in the last thresholds.error_event_window seconds", True),
    _k("server.preemptions_per_second", "1/s", G, MEM, "preemption rate", True),
    _k("kv.prefix_cache_hit_ratio", "ratio", G, MEM, "prefix-cache token hit rate (window)", True),
    _k("kv.prompt_cached_ratio", "ratio", G, MEM,
       "share of the window's prompt tokens served from a cache, local or external (vLLM "
       "prompt_tokens_cached / prompt_tokens)", True),
    _k("server.scheduler_stage_ratio", "ratio", G, SCH,
       "each scheduler stage's share of the loop's wall time over the window (label stage; "
       "SGLang scheduler_stage_seconds)", True),
    _k("request.preemptions_mean", "count", G, MEM,
       "preemptions per finished request over the window (vLLM request_num_preemptions)",
       True),
    _k("kv.prompt_source_ratio", "ratio", G, MEM,
       "share of the window's prompt tokens by where their KV came from (label source)", True),
    _k("kv.cached_source_ratio", "ratio", G, MEM,
       "share of the window's prefix-cache hit tokens by the cache tier that supplied them "
       "(label source: device, host, disk, p2p, external_unspecified)", True),
    _k("server.scheduler_idle_ratio", "ratio", G, SCH,
       "share of wall time the scheduler was idle (window)", True),
    _k("server.scheduler_cpu_cores", "cores", G, SCH,
       "scheduler process CPU in cores (window)", True),
    _k("host.pressure_stall_ratio", "ratio", G, SCH,
       "share of the window tasks stalled on the resource (PSI total's rate)", True),
    _k("pd.ttft_split_seconds", "s", G, (PAR, DEC),
       "mean TTFT of a disaggregated pair split by where it waits (label part: prefill = "
       "the prefill instance's TTFT, transfer = the KV transfer, decode = the decode "
       "instance's TTFT less the transfer, total; label prefill = the prefill instances): "
       "window means, additive whatever the buckets (infertop/pdsplit.py); NODATA with the "
       "reason for a part not measured", True),
    _k("kv.transfer_bytes_per_second", "bytes/s", G, PAR,
       "KV-cache transfer rate between prefill and decode instances", True),
    _k("kv.transfer_failures_per_second", "1/s", G, PAR,
       "failed KV transfers per second (window)", True),
    _k("kv.blocks_stored_per_second", "blocks/s", G, MEM, "KV blocks stored per second", True),
    _k("kv.blocks_evicted_per_second", "blocks/s", G, MEM, "KV blocks evicted per second", True),
    _k("kv.event_batches_dropped_per_second", "1/s", G, MEM,
       "KV-event batches lost per second (sequence gaps)", True),
    _k("gpu.ecc_corrected_per_second", "1/s", G, HW, "corrected ECC errors per second (window)", True),
    _k("spec.drafts_per_second", "1/s", G, DEC, "speculative verification steps per second", True),
    _k("kv.event_batches_per_second", "1/s", G, MEM, "KV-event batches received per second", True),
    _k("kv.event_batches_undecodable_per_second", "1/s", G, MEM, "KV-event batches that could not be decoded, per second", True),
    _k("kv.prefix_thrash_ratio", "ratio", G, MEM,
       "share of the window's evicted KV blocks stored again soon after (restored / "
       "evicted): the prefix cache evicts what it needs again", True),
    _k("kv.external_prefix_cache_hit_ratio", "ratio", G, MEM,
       "external KV-cache token hit rate (window)", True),
    _k("request.prefill_computed_tokens_mean", "tokens", G, MEM,
       "mean prompt tokens a request's prefill computed (window)", True),
    _k("server.requests_rejected", "count", G, DEC,
       "requests refused at admission in the window (all reasons)", True),
    _k("server.rejection_ratio", "ratio", G, DEC,
       "share of the window's requests refused at admission: rejected / (rejected + "
       "finished); refused requests are errors the client sees", True),
    _k("spec.acceptance_ratio", "ratio", G, DEC, "accepted / proposed draft tokens (window)", True),
    _k("server.iteration_tokens_mean", "tokens", G, KRN, "mean tokens per engine step (window)",
       True),
    _k("server.engine_steps_per_second", "1/s", G, KRN, "engine steps per second", True),
    _k("process.ctx_switches_per_second", "1/s", G, SCH, "context switch rate (label type)", True),
    _k("server.uptime_seconds", "s", G, DEC, "time since the server (re)started", True),
    # ---- speed of light (infertop/sol_derive.py); reason says where a value came from ---
    _k("gpu.peak_flops", "FLOP/s", G, (HW, KRN),
       "dense tensor peak for the served dtype (label dtype): datasheet table or SMs x clock",
       True),
    _k("gpu.peak_mem_bandwidth_bytes_per_second", "bytes/s", G, (HW, KRN),
       "memory bandwidth peak: NVML bus width x max memory clock x 2, or datasheet", True),
    _k("sol.mfu_ratio", "ratio", G, KRN,
       "model FLOPs utilisation per GPU: achieved model FLOP/s / dense peak", True),
    _k("sol.mbu_ratio", "ratio", G, KRN,
       "memory-bandwidth utilisation per GPU: model bytes/s / peak bandwidth", True),
    _k("sol.decode_roofline_tokens_per_second", "tokens/s", G, (KRN, DEC),
       "the most tokens/s decode can reach at this batch size and context (roofline)", True),
    _k("sol.decode_roofline_ratio", "ratio", G, KRN,
       "generation tokens/s now / the decode roofline at this batch size", True),
)

SPECS: dict[str, KeySpec] = {s.key: s for s in _SPECS}


def _check_rates() -> None:
    """A rate names a derived key, only counters have one, and the views a cumulative key
    is shown as are derived keys (at import: a typo fails early)."""
    for s in _SPECS:
        if s.rate and (s.kind is not Kind.COUNTER or s.rate not in SPECS
                       or not SPECS[s.rate].derived):
            raise ValueError(f"{s.key}: rate {s.rate!r} is not a derived key of a counter")
        bad = [v for v in s.shown_as if v not in SPECS or not SPECS[v].derived]
        if bad:
            raise ValueError(f"{s.key}: shown_as {bad} are not derived keys")


_check_rates()

# the text of a ``server.counter_moves`` reading: the counter moves only when a request
# finishes (servers/mapping.FamilyMap.on_finish)
ON_FINISH = "on finish"

# The server families of issue 25 (vLLM 0.32's page, SGLang 0.5.23's, KV-cache events,
# NIXL) -> the readings a user sees of each: the gauge itself, or the derived view of a
# counter or histogram (raw cumulative values stay in History).  Each view is on screen,
# in ``snapshot --json``, in the report (report.KEY_READINGS) and in compare
# (tests/test_family_coverage.py holds every one to that).
FAMILY_VIEWS: dict[str, tuple[str, ...]] = {
    "vllm:num_requests_waiting_by_reason": ("server.requests_deferred",),
    "vllm:prompt_tokens_by_source": ("kv.prompt_source_ratio",),
    "vllm:prompt_tokens_cached_by_source": ("kv.cached_source_ratio",),
    "vllm:external_prefix_cache_{queries,hits}": ("kv.external_prefix_cache_hit_ratio",),
    "vllm:admission_rejections": ("server.requests_rejected", "server.rejection_ratio"),
    "vllm:engine_sleep_state": ("server.sleep_level",),
    "vllm:request_prefill_kv_computed_tokens": ("request.prefill_computed_tokens_mean",),
    "sglang:kv_{available,evictable,used}_tokens": ("kv.available_tokens",
                                                    "kv.evictable_tokens", "kv.used_tokens"),
    "sglang:num_{prefill,decode}_*_queue_reqs": ("disagg.queue_requests",),
    "sglang:per_stage_req_latency_seconds": ("latency.stage_seconds",),
    "sglang:num_{retracted,paused}_reqs": ("server.requests_retracted",
                                           "server.requests_paused"),
    "sglang:utilization": ("server.utilization_ratio",),
    "sglang:cache_hit_rate": ("kv.batch_prefix_hit_ratio",),
    "sglang:spec_accept_rate": ("spec.batch_acceptance_ratio",),
    "kv-events (ZMQ)": ("kv.blocks_stored_per_second", "kv.blocks_evicted_per_second",
                        "kv.prefix_thrash_ratio", "kv.event_resident_blocks",
                        "kv.event_batches_dropped_per_second"),
    "vllm:nixl_* / sglang:kv_transfer_*": ("latency.kv_transfer_seconds",
                                           "kv.transfer_bytes_per_second",
                                           "kv.transfer_failures_per_second",
                                           "pd.ttft_split_seconds"),
}

# Names a rule's evidence carries that no probe reads: computed by the rule itself (how
# long a server has been unreachable).  Declared here so every use is checked like a
# reading key (tests/test_keys_declared.py); they are not readings, so not in SPECS.
EVIDENCE_KEYS: frozenset[str] = frozenset({"server.downtime_seconds"})

# The first part of every declared key: a string literal "<namespace>.<name>" anywhere in
# the code is taken for a key and must be declared (tests/test_keys_declared.py).
NAMESPACES: frozenset[str] = frozenset(k.split(".", 1)[0] for k in SPECS)


def spec(key: str) -> KeySpec | None:
    return SPECS.get(key)


def layers_of(key: str) -> tuple[Layer, ...]:
    s = SPECS.get(key)
    return s.layers if s else ()


def keys_for(layer: Layer) -> list[str]:
    return [s.key for s in _SPECS if layer in s.layers]
