"""Every declared reading key as a typed symbol: ``K.<namespace>.<name>``.

GENERATED from infertop/keys.py's SPECS by ``python -m infertop.keysym >
infertop/key_symbols.py``; do not edit (tests/test_key_symbols.py fails while it is stale).
mypy knows each attribute, so a misspelt key is an error at ``make typecheck`` time.
"""

from __future__ import annotations

from typing import Final

from .keysym import Key


class K:
    """The reading keys of infertop/keys.py, by namespace."""

    class disagg:
        queue_requests: Final = Key("disagg.queue_requests")

    class gpu:
        compute_capability: Final = Key("gpu.compute_capability")
        cuda_cores: Final = Key("gpu.cuda_cores")
        dram_bw_util_ratio: Final = Key("gpu.dram_bw_util_ratio")
        ecc_corrected_per_second: Final = Key("gpu.ecc_corrected_per_second")
        ecc_corrected_total: Final = Key("gpu.ecc_corrected_total")
        ecc_uncorrected_new: Final = Key("gpu.ecc_uncorrected_new")
        ecc_uncorrected_total: Final = Key("gpu.ecc_uncorrected_total")
        info: Final = Key("gpu.info")
        lost: Final = Key("gpu.lost")
        mem_bus_width_bits: Final = Key("gpu.mem_bus_width_bits")
        mem_clock_hz: Final = Key("gpu.mem_clock_hz")
        mem_clock_max_hz: Final = Key("gpu.mem_clock_max_hz")
        mem_temp_celsius: Final = Key("gpu.mem_temp_celsius")
        mem_total_bytes: Final = Key("gpu.mem_total_bytes")
        mem_used_bytes: Final = Key("gpu.mem_used_bytes")
        mem_util_ratio: Final = Key("gpu.mem_util_ratio")
        mig_enabled: Final = Key("gpu.mig_enabled")
        nvlink_links_active: Final = Key("gpu.nvlink_links_active")
        nvlink_rx_bytes_per_second: Final = Key("gpu.nvlink_rx_bytes_per_second")
        nvlink_tx_bytes_per_second: Final = Key("gpu.nvlink_tx_bytes_per_second")
        pcie_link_gen: Final = Key("gpu.pcie_link_gen")
        pcie_link_width: Final = Key("gpu.pcie_link_width")
        pcie_rx_bytes_per_second: Final = Key("gpu.pcie_rx_bytes_per_second")
        pcie_tx_bytes_per_second: Final = Key("gpu.pcie_tx_bytes_per_second")
        peak_flops: Final = Key("gpu.peak_flops")
        peak_mem_bandwidth_bytes_per_second: Final = Key("gpu.peak_mem_bandwidth_bytes_per_second")
        power_limit_watts: Final = Key("gpu.power_limit_watts")
        power_watts: Final = Key("gpu.power_watts")
        remapped_rows_correctable: Final = Key("gpu.remapped_rows_correctable")
        remapped_rows_uncorrectable: Final = Key("gpu.remapped_rows_uncorrectable")
        row_remap_failure: Final = Key("gpu.row_remap_failure")
        row_remap_pending: Final = Key("gpu.row_remap_pending")
        sm_active_ratio: Final = Key("gpu.sm_active_ratio")
        sm_clock_hz: Final = Key("gpu.sm_clock_hz")
        sm_clock_max_hz: Final = Key("gpu.sm_clock_max_hz")
        sm_occupancy_ratio: Final = Key("gpu.sm_occupancy_ratio")
        temp_celsius: Final = Key("gpu.temp_celsius")
        tensor_active_ratio: Final = Key("gpu.tensor_active_ratio")
        throttle_reasons: Final = Key("gpu.throttle_reasons")
        topology: Final = Key("gpu.topology")
        util_ratio: Final = Key("gpu.util_ratio")
        xid_last: Final = Key("gpu.xid_last")
        xid_new: Final = Key("gpu.xid_new")
        xid_total: Final = Key("gpu.xid_total")

    class host:
        cpu_count: Final = Key("host.cpu_count")
        cpu_ratio: Final = Key("host.cpu_ratio")
        load1: Final = Key("host.load1")
        mem_total_bytes: Final = Key("host.mem_total_bytes")
        mem_used_bytes: Final = Key("host.mem_used_bytes")
        pressure_full_ratio: Final = Key("host.pressure_full_ratio")
        pressure_some_ratio: Final = Key("host.pressure_some_ratio")
        pressure_stall_ratio: Final = Key("host.pressure_stall_ratio")
        pressure_stall_seconds_total: Final = Key("host.pressure_stall_seconds_total")
        top_cpu_cores: Final = Key("host.top_cpu_cores")

    class kv:
        available_tokens: Final = Key("kv.available_tokens")
        batch_prefix_hit_ratio: Final = Key("kv.batch_prefix_hit_ratio")
        blocks_evicted_per_second: Final = Key("kv.blocks_evicted_per_second")
        blocks_stored_per_second: Final = Key("kv.blocks_stored_per_second")
        cached_source_ratio: Final = Key("kv.cached_source_ratio")
        cached_tokens_by_source_total: Final = Key("kv.cached_tokens_by_source_total")
        config: Final = Key("kv.config")
        event_batches_dropped_per_second: Final = Key("kv.event_batches_dropped_per_second")
        event_batches_dropped_total: Final = Key("kv.event_batches_dropped_total")
        event_batches_per_second: Final = Key("kv.event_batches_per_second")
        event_batches_total: Final = Key("kv.event_batches_total")
        event_batches_undecodable_per_second: Final = Key(
            "kv.event_batches_undecodable_per_second")
        event_batches_undecodable_total: Final = Key("kv.event_batches_undecodable_total")
        event_blocks_evicted_total: Final = Key("kv.event_blocks_evicted_total")
        event_blocks_restored_total: Final = Key("kv.event_blocks_restored_total")
        event_blocks_stored_total: Final = Key("kv.event_blocks_stored_total")
        event_resident_blocks: Final = Key("kv.event_resident_blocks")
        evictable_tokens: Final = Key("kv.evictable_tokens")
        external_prefix_cache_hit_ratio: Final = Key("kv.external_prefix_cache_hit_ratio")
        external_prefix_cache_hits_total: Final = Key("kv.external_prefix_cache_hits_total")
        external_prefix_cache_queries_total: Final = Key("kv.external_prefix_cache_queries_total")
        prefix_cache_hit_ratio: Final = Key("kv.prefix_cache_hit_ratio")
        prefix_cache_hits_total: Final = Key("kv.prefix_cache_hits_total")
        prefix_cache_queries_total: Final = Key("kv.prefix_cache_queries_total")
        prefix_thrash_ratio: Final = Key("kv.prefix_thrash_ratio")
        prompt_cached_ratio: Final = Key("kv.prompt_cached_ratio")
        prompt_source_ratio: Final = Key("kv.prompt_source_ratio")
        prompt_tokens_by_source_total: Final = Key("kv.prompt_tokens_by_source_total")
        prompt_tokens_cached_total: Final = Key("kv.prompt_tokens_cached_total")
        transfer_bytes_per_second: Final = Key("kv.transfer_bytes_per_second")
        transfer_bytes_total: Final = Key("kv.transfer_bytes_total")
        transfer_failures_per_second: Final = Key("kv.transfer_failures_per_second")
        transfer_failures_total: Final = Key("kv.transfer_failures_total")
        usage_ratio: Final = Key("kv.usage_ratio")
        used_tokens: Final = Key("kv.used_tokens")

    class latency:
        decode_seconds: Final = Key("latency.decode_seconds")
        e2e_seconds: Final = Key("latency.e2e_seconds")
        inference_seconds: Final = Key("latency.inference_seconds")
        itl_seconds: Final = Key("latency.itl_seconds")
        kv_transfer_seconds: Final = Key("latency.kv_transfer_seconds")
        observations: Final = Key("latency.observations")
        prefill_seconds: Final = Key("latency.prefill_seconds")
        queue_seconds: Final = Key("latency.queue_seconds")
        stage_seconds: Final = Key("latency.stage_seconds")
        tpot_seconds: Final = Key("latency.tpot_seconds")
        ttft_seconds: Final = Key("latency.ttft_seconds")

    class model:
        active_params: Final = Key("model.active_params")
        info: Final = Key("model.info")
        kv_bytes_per_token: Final = Key("model.kv_bytes_per_token")
        params: Final = Key("model.params")
        weight_bytes: Final = Key("model.weight_bytes")

    class node:
        scrape_age_seconds: Final = Key("node.scrape_age_seconds")
        up: Final = Key("node.up")

    class pd:
        ttft_split_seconds: Final = Key("pd.ttft_split_seconds")

    class process:
        cpu_ratio: Final = Key("process.cpu_ratio")
        ctx_switches_per_second: Final = Key("process.ctx_switches_per_second")
        ctx_switches_total: Final = Key("process.ctx_switches_total")
        gpu_mem_bytes: Final = Key("process.gpu_mem_bytes")
        gpu_owner: Final = Key("process.gpu_owner")
        gpu_sm_ratio: Final = Key("process.gpu_sm_ratio")
        info: Final = Key("process.info")
        rss_bytes: Final = Key("process.rss_bytes")
        state: Final = Key("process.state")
        threads: Final = Key("process.threads")

    class python:
        gil_held_ratio: Final = Key("python.gil_held_ratio")
        gil_holder: Final = Key("python.gil_holder")
        gil_sampler_cost_seconds: Final = Key("python.gil_sampler_cost_seconds")
        gil_sampler_cpu_ratio: Final = Key("python.gil_sampler_cpu_ratio")
        thread_active_ratio: Final = Key("python.thread_active_ratio")

    class request:
        generation_tokens: Final = Key("request.generation_tokens")
        preemptions: Final = Key("request.preemptions")
        preemptions_mean: Final = Key("request.preemptions_mean")
        prefill_computed_tokens: Final = Key("request.prefill_computed_tokens")
        prefill_computed_tokens_mean: Final = Key("request.prefill_computed_tokens_mean")
        prompt_tokens: Final = Key("request.prompt_tokens")

    class server:
        abort_ratio: Final = Key("server.abort_ratio")
        admission_rejections_total: Final = Key("server.admission_rejections_total")
        counter_moves: Final = Key("server.counter_moves")
        cuda_graph_active: Final = Key("server.cuda_graph_active")
        disagg_role: Final = Key("server.disagg_role")
        engine_steps_per_second: Final = Key("server.engine_steps_per_second")
        engine_steps_total: Final = Key("server.engine_steps_total")
        error_ratio: Final = Key("server.error_ratio")
        estimated_flops_per_gpu_total: Final = Key("server.estimated_flops_per_gpu_total")
        estimated_read_bytes_per_gpu_total: Final = Key(
            "server.estimated_read_bytes_per_gpu_total")
        estimated_write_bytes_per_gpu_total: Final = Key(
            "server.estimated_write_bytes_per_gpu_total")
        families: Final = Key("server.families")
        generation_tokens_total: Final = Key("server.generation_tokens_total")
        http_requests_active: Final = Key("server.http_requests_active")
        info: Final = Key("server.info")
        iteration_tokens: Final = Key("server.iteration_tokens")
        iteration_tokens_mean: Final = Key("server.iteration_tokens_mean")
        preemptions_per_second: Final = Key("server.preemptions_per_second")
        preemptions_total: Final = Key("server.preemptions_total")
        process_start_seconds: Final = Key("server.process_start_seconds")
        prompt_tokens_total: Final = Key("server.prompt_tokens_total")
        rejection_ratio: Final = Key("server.rejection_ratio")
        requests_deferred: Final = Key("server.requests_deferred")
        requests_finished: Final = Key("server.requests_finished")
        requests_finished_total: Final = Key("server.requests_finished_total")
        requests_grammar_queued: Final = Key("server.requests_grammar_queued")
        requests_paused: Final = Key("server.requests_paused")
        requests_per_second: Final = Key("server.requests_per_second")
        requests_rejected: Final = Key("server.requests_rejected")
        requests_retracted: Final = Key("server.requests_retracted")
        requests_running: Final = Key("server.requests_running")
        requests_swapped: Final = Key("server.requests_swapped")
        requests_waiting: Final = Key("server.requests_waiting")
        requests_waiting_capacity: Final = Key("server.requests_waiting_capacity")
        running_context_tokens: Final = Key("server.running_context_tokens")
        scheduler_cpu_cores: Final = Key("server.scheduler_cpu_cores")
        scheduler_cpu_seconds_total: Final = Key("server.scheduler_cpu_seconds_total")
        scheduler_idle_ratio: Final = Key("server.scheduler_idle_ratio")
        scheduler_idle_seconds_total: Final = Key("server.scheduler_idle_seconds_total")
        scheduler_stage_ratio: Final = Key("server.scheduler_stage_ratio")
        scheduler_stage_seconds_total: Final = Key("server.scheduler_stage_seconds_total")
        setting: Final = Key("server.setting")
        sleep_level: Final = Key("server.sleep_level")
        uptime_seconds: Final = Key("server.uptime_seconds")
        utilization_ratio: Final = Key("server.utilization_ratio")

    class sol:
        decode_roofline_ratio: Final = Key("sol.decode_roofline_ratio")
        decode_roofline_tokens_per_second: Final = Key("sol.decode_roofline_tokens_per_second")
        mbu_ratio: Final = Key("sol.mbu_ratio")
        mfu_ratio: Final = Key("sol.mfu_ratio")

    class spec:
        acceptance_ratio: Final = Key("spec.acceptance_ratio")
        accepted_tokens_total: Final = Key("spec.accepted_tokens_total")
        batch_acceptance_ratio: Final = Key("spec.batch_acceptance_ratio")
        draft_tokens_total: Final = Key("spec.draft_tokens_total")
        draft_tokens_window: Final = Key("spec.draft_tokens_window")
        drafts_per_second: Final = Key("spec.drafts_per_second")
        drafts_total: Final = Key("spec.drafts_total")

    class thread:
        cpu_ratio: Final = Key("thread.cpu_ratio")

    class throughput:
        generation_peak_tokens_per_second: Final = Key(
            "throughput.generation_peak_tokens_per_second")
        generation_recent_tokens_per_second: Final = Key(
            "throughput.generation_recent_tokens_per_second")
        generation_tokens_per_second: Final = Key("throughput.generation_tokens_per_second")
        prompt_tokens_per_second: Final = Key("throughput.prompt_tokens_per_second")
        server_generation_tokens_per_second: Final = Key(
            "throughput.server_generation_tokens_per_second")
