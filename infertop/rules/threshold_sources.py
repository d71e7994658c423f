"""Where each default threshold comes from: a published figure, the seeds' own examples,
a server's behaviour, or infertop's reasoning (said as such).  docs/rules.md prints this
beside every key, and a test fails when a key has no source.

"Seeds" are the project's founding examples (util 95 % with SM active 30 %; KV near full
with preemptions and a queue); "field" are the readings of real servers recorded for the
incident corpus (tests/corpus/).
"""

from __future__ import annotations

DCGM = ("NVIDIA DCGM user guide, profiling metrics (SM Activity: 0.8 or more is needed for "
        "effective use, under 0.5 likely ineffective)")

# The GPU health thresholds (HW-005 Xid classes, HW-006..HW-008): a third-party GPU health
# design citing Lablup's 55 days of Prometheus data on a GPU fleet (arXiv 2605.09370),
# summarised in docs/reference/field-2026-12-update.md
GPU_HEALTH = ("GPU health design citing Lablup (arXiv 2605.09370; "
              "reference/field-2026-12-update.md)")

# llm-d's published P/D disaggregation alerts (PAR-005..PAR-007): the same numbers as
# issue 25 quoted (ratio > 3 for 10m, prefill queue > 100 for 5m, decode KV > 0.95 for 5m)
LLMD_PD = ("llm-d/llm-d docs/monitoring/prometheus-alerting-rules.yaml @ bdd5e5b400d1, "
           "group llm-d-pd-disaggregation")

SOURCES: dict[str, str] = {
    # ---- diagnosis ------------------------------------------------------------------
    "diagnosis.raise_after": "infertop: a few scrapes (1 s each) so one bad scrape is no "
                             "finding; 3 s for median-judged rules, whose median already "
                             "needs half the judge window",
    "diagnosis.clear_after": "infertop: twice raise_after, so an episode that pauses for a "
                             "few seconds stays one finding",
    "diagnosis.window": "Grafana/vLLM dashboards: rate() and histogram_quantile() over 1 min",
    "diagnosis.judge_window": "field: GPM SM activity and block-granular KV usage jitter "
                              "tick to tick; 10 ticks make a median that a spike cannot move "
                              "and that turns within 5 s of a real change",
    "diagnosis.hold_margin": "infertop: wider than the +-5 % jitter of real GPM/KV readings, "
                             "so a reading hovering at a threshold cannot clear its finding",
    "diagnosis.events_max": "infertop: bounded memory (a day of flapping fits)",
    "diagnosis.disabled": "none disabled by default",
    # ---- SLO -------------------------------------------------------------------------
    "slo.ttft_p99_seconds": "interactive chat targets (vLLM/SGLang benchmarks report TTFT in "
                            "the 100-300 ms range); set your own SLO",
    "slo.error_ratio": "a 99.9 % success objective",
    # ---- hardware -------------------------------------------------------------------
    "thresholds.busy_util_ratio": "seeds: 'GPU util 95 %'; 0.9 keeps a 5-point margin",
    "thresholds.busy_sm_active_max": DCGM + "; seeds: SM active ~30 % must raise with "
                                     "jitter (30, 31, 29 %)",
    "thresholds.tensor_busy_sm_min": DCGM + " (half the SMs busy is real compute)",
    "thresholds.tensor_idle_max": "NVML GPM: a 16-bit model's matmuls keep the tensor pipes "
                                  "well above 2 % whenever the SMs compute",
    "thresholds.throttle_clock_ratio": "NVML clocks-event reasons: the power cap is reported "
                                       "even at full clocks; below 85 % of max it costs speed",
    "thresholds.pcie_saturated_ratio": "PCIe spec line rates (after encoding); sustained "
                                       "transfers rarely pass ~80-85 % of them",
    "thresholds.error_event_window": "infertop: an Xid/ECC event stays visible for 5 minutes",
    "thresholds.gpu_hot_celsius": GPU_HEALTH + ": core > 85 C for 5 min warns",
    "thresholds.gpu_hot_seconds": GPU_HEALTH + ": core > 85 C for 5 min warns",
    "thresholds.gpu_very_hot_celsius": GPU_HEALTH + ": core > 92 C for 2 min is critical",
    "thresholds.gpu_very_hot_seconds": GPU_HEALTH + ": core > 92 C for 2 min is critical",
    "thresholds.hbm_hot_celsius": GPU_HEALTH + ": HBM > 95 C",
    "thresholds.hbm_hot_seconds": "infertop: the core's 5-minute hold (the source gives no "
                                  "hold for HBM)",
    "thresholds.hw_slowdown_seconds": GPU_HEALTH + ": clock event reason 0x8 (hardware "
                                      "slowdown) held 10 min warns",
    # ---- kernels --------------------------------------------------------------------
    "thresholds.launch_thread_cpu_min": "a Python launch thread is single-threaded: 0.9 "
                                        "cores is 'always running'",
    "thresholds.launch_sm_active_max": DCGM,
    "thresholds.launch_batch_max": "vLLM CUDA-graph capture sizes start at 1..16: small "
                                   "decode batches are where launch overhead dominates",
    "thresholds.ttft_slope_min": "attention cost: linear prefill has slope ~1, quadratic 2; "
                                 "1.5 is half way",
    "thresholds.ttft_fit_window": "infertop: one point per 10 s of traffic",
    "thresholds.ttft_fit_windows": "infertop: 2 minutes of points",
    "thresholds.ttft_fit_min_points": "infertop: fewer points are not a trend",
    "thresholds.ttft_fit_min_requests": "infertop: a mean of fewer requests is noise",
    "thresholds.ttft_fit_prompt_spread": "infertop: a slope needs prompts at least 2x apart",
    # ---- memory ---------------------------------------------------------------------
    "thresholds.kv_pressure_ratio": "field: a real vLLM with 16 KV blocks read 0.87-1.0 in "
                                    "one-block steps while preempting; vLLM preempts only "
                                    "when no block is free, so 0.85 with preemptions or a "
                                    "queue is pressure (seeds: KV near full + queue)",
    "thresholds.kv_preempt_crit_per_second": "field: ~2 preemptions/s with TTFT p99 7 s; one "
                                             "a second already recomputes a request a second",
    "thresholds.kv_leak_ratio": "vLLM counts cached-but-free prefix blocks as free: an idle "
                                "server reads ~0, 20 % is held blocks",
    "thresholds.mem_headroom_ratio": "infertop: another process or a larger batch needs a "
                                     "fifth of the GPU",
    "thresholds.mem_full_ratio": "field: a card at 99.5 % has ~400 MB left, less than one "
                                 "batch's activations; 2 % of 80 GB is 1.6 GB",
    "thresholds.mem_growth_window": "infertop: two minutes separate growth from a batch",
    "thresholds.mem_growth_ratio": "infertop: 3 % of an 80 GB GPU is 2.4 GB",
    "thresholds.mem_oom_eta_seconds": "infertop: five minutes to act",
    "thresholds.weights_min_bytes": "a CUDA context alone is ~0.5 GB; weights are over 1 GB",
    "thresholds.kv_transfer_ttft_share": "infertop: half of the first token's wait on the "
                                         "wire (vLLM #22454, #29474: TTFT high while each "
                                         "side looks fine)",
    "thresholds.pd_running_ratio": LLMD_PD + ": LLMDPrefillDecodeImbalance, "
                                   "avg(prefill running) / avg(decode running) > 3 for 10m",
    "thresholds.pd_prefill_queue": LLMD_PD + ": LLMDPrefillQueueSaturation, prefill "
                                   "num_requests_waiting > 100 for 5m",
    "thresholds.pd_decode_kv_full": LLMD_PD + ": LLMDDecodeKVCacheCritical, decode "
                                    "kv_cache_usage_perc > 0.95 for 5m",
    "thresholds.thrash_ratio": "infertop: a third of the evicted prefix blocks needed again "
                               "within a minute (vLLM's vmon shows the same re-store churn)",
    "thresholds.thrash_min_evictions": "infertop: 100 blocks (1,600 tokens at block 16) per "
                                       "minute before a ratio means anything",
    # ---- scheduling -----------------------------------------------------------------
    "thresholds.gil_cpu_min": "CPython GIL: one thread runs Python at a time, so a contended "
                              "process sits at ~1 core",
    "thresholds.gil_cpu_max": "as gil_cpu_min (native code outside the GIL adds a little)",
    "thresholds.gil_thread_busy": "infertop: 15 % of a core is a thread that wants the GIL",
    "thresholds.gil_busy_threads": "two threads are the least that can contend",
    "thresholds.gil_throughput_drop": "infertop: a 20 % fall is beyond normal load swings",
    "thresholds.queue_waiting_min": "vLLM/SGLang: one waiting request is a queue",
    "thresholds.deferred_share_min": "infertop: most of the queue (vLLM "
                                     "num_requests_waiting_by_reason{reason=deferred})",
    "thresholds.idle_sm_active_max": DCGM,
    "thresholds.idle_util_max": "NVML util over-states work; 60 % without GPM is idle-ish",
    "thresholds.kv_free_max": "infertop: under 70 % the cache can admit more sequences",
    "thresholds.thread_busy_cores": "infertop: 10 % of a core is a runnable thread",
    "thresholds.threads_per_core_max": "Linux CFS: more than 2 runnable per core waits",
    "thresholds.threads_host_busy_ratio": "infertop: oversubscription hurts on a busy host",
    "thresholds.host_cpu_saturated": "infertop: at 90 %+ busy, runnable tasks (tokenizer, "
                                     "scheduler, launch thread) wait for a core",
    "thresholds.host_top_scan_at": "infertop: below host_cpu_saturated, so the top "
                                   "consumers are read (two scans make a rate) before the "
                                   "median crosses it; a few ms a scan, only on a busy host",
    # ---- parallelism ----------------------------------------------------------------
    "thresholds.tp_imbalance": "infertop: TP ranks run in lockstep; 20 points apart means "
                               "one waits",
    "thresholds.tp_busy_min": DCGM + " (an idle group has no straggler)",
    "thresholds.tp_pcie_heavy_ratio": "NCCL all-reduce over PCIe: 30 % of the link per step "
                                      "is heavy",
    "thresholds.tp_pcie_heavy_bytes": "PCIe Gen4 x16 ~32 GB/s: 4 GB/s is heavy",
    # ---- kernels: speed of light (KRN-003) -------------------------------------------
    "thresholds.roofline_ratio_max": "infertop (reasoning, not yet field-checked: no GPU was "
                                     "lent to measure one): fed decode kernels stream the "
                                     "weights at a large share of peak bandwidth; under 30 % "
                                     "of the roofline the step time is spent elsewhere",
    "thresholds.roofline_busy_util_min": "seeds: 'GPU util 95 %' is busy; 0.8 leaves room "
                                         "for the gaps between decode steps",
    "thresholds.roofline_batch_max": "infertop: up to 16 sequences a decode step still "
                                     "reads mostly weights (memory-bound); larger batches "
                                     "far below the roofline have other causes",
    "thresholds.roofline_dram_max": DCGM.split(",")[0] + ": DRAM active 0.5 or more means "
                                    "the memory is the busy unit, so the estimate is off",
    # ---- fleet (FLT-001) ------------------------------------------------------------
    "thresholds.fleet_slow_factor": "infertop: twice the peers' median p99 is far beyond "
                                    "node-to-node noise for replicas of one model",
    "thresholds.fleet_slow_min_seconds": "human reaction: a p99 under 100 ms is not felt "
                                         "however it compares",
    "thresholds.fleet_min_peers": "infertop: a median of at least two other nodes; with "
                                  "two nodes there is no telling which one is slow",
    "thresholds.dp_load_ratio": "vllm-htop's imbalance check (busiest vs quietest engine)",
    "thresholds.dp_load_min_gap": "infertop: a few requests apart is noise",
    "thresholds.dp_kv_gap": "infertop: 30 points of KV usage apart",
    # ---- decoding -------------------------------------------------------------------
    "thresholds.slo_min_requests": "infertop: a p99 of fewer than 10 requests is the max",
    "thresholds.ttft_crit_factor": "field: TTFT p99 7 s against a 0.2 s SLO is an outage",
    "thresholds.itl_jitter_ratio": "infertop: decodes stalled behind prefills show p99/p50 "
                                   "of 4x and more",
    "thresholds.itl_jitter_min_seconds": "human reading speed: under 100 ms a stall is not "
                                         "felt",
    "thresholds.itl_min_tokens": "infertop: enough tokens for a p99",
    "thresholds.spec_acceptance_min": "vLLM speculative decoding: below ~40 % acceptance "
                                      "drafting costs more than it saves",
    "thresholds.spec_min_draft_tokens": "infertop: enough drafts to judge",
    "thresholds.error_min_requests": "infertop: enough requests for a ratio",
    "thresholds.error_crit_ratio": "a 95 % success rate is an outage",
    "thresholds.error_reasons": "vLLM finish reasons: 'abort' is the client's choice, "
                                "'error' the server's failure",
    "thresholds.restart_window": "infertop: a restart stays visible for 5 minutes",
}
