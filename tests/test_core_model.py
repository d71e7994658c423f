import json
import math

from infertop.keys import SPECS, keys_for
from infertop.meta import GpuName, NvmlMeta
from infertop.model import (
    LAYERS,
    Capability,
    Kind,
    Layer,
    Reading,
    Sample,
    Snapshot,
    Status,
    make_labels,
)


def test_labels_are_canonical():
    assert make_labels({"b": 2, "a": "x"}) == make_labels(a="x", b="2")
    assert make_labels({"gpu": 0}) == (("gpu", "0"),)


def test_snapshot_roundtrips_through_json_including_nan_and_inf():
    r1 = Reading("latency.ttft_seconds", 3.0, "s", make_labels(engine=0), Status.OK, "",
                 Kind.HISTOGRAM, None, ((0.1, 1.0), (math.inf, 3.0)), float("nan"))
    r2 = Reading("gpu.info", 1.0, "", make_labels(gpu=0), text="NVIDIA H100", kind=Kind.INFO)
    r3 = Reading("gpu.power_watts", None, "W", make_labels(gpu=0), Status.UNSUPPORTED,
                 "not supported on Tesla T4")
    # (the meta was {"gpus": [0]}: not a GPU's shape; it read as an empty NvmlMeta, and the
    # typed meta of issue 36 now refuses it)
    meta = NvmlMeta(gpus=(GpuName(0, "NVIDIA H100"),), driver="580.95.05")
    snap = Snapshot(12.5, {"nvml": Sample("nvml", 12.4, (r1, r2, r3), meta=meta)}, 3,
                    {"nvml": Capability("nvml", True, features=frozenset({"gpm"}))})
    wire = json.dumps(snap.to_dict(), allow_nan=False)
    back = Snapshot.from_dict(json.loads(wire))
    assert back.to_dict() == snap.to_dict()
    assert back.samples["nvml"].meta == meta
    h = back.samples["nvml"].readings[0]
    assert h.buckets is not None and h.hist_sum is not None
    assert math.isinf(h.buckets[-1][0]) and math.isnan(h.hist_sum)
    assert back.samples["nvml"].readings[2].status is Status.UNSUPPORTED


def test_every_layer_has_keys_and_every_key_a_layer():
    for layer in LAYERS:
        assert keys_for(layer), layer
    for spec in SPECS.values():
        assert spec.layers, spec.key
    assert Layer.HARDWARE.position == 0 and Layer.DECODING.position == 5


def test_layer_keeps_str_methods():
    # Layer is a str enum: its pane number must not shadow str.index (it did: `index`
    # was a property, so Layer.MEMORY.index("o") raised "'int' object is not callable")
    assert Layer.MEMORY.index("o") == "memory".index("o") == 3
    assert [layer.position for layer in LAYERS] == list(range(6))


def test_issue_contract_keys_declared():
    contract = ["gpu.util_ratio", "gpu.sm_active_ratio", "gpu.sm_occupancy_ratio", "gpu.tensor_active_ratio", "gpu.dram_bw_util_ratio", "gpu.mem_used_bytes", "gpu.mem_total_bytes", "gpu.power_watts", "gpu.temp_celsius", "gpu.sm_clock_hz", "gpu.pcie_tx_bytes_per_second", "gpu.pcie_rx_bytes_per_second", "process.cpu_ratio", "process.rss_bytes", "process.threads", "process.gpu_mem_bytes", "thread.cpu_ratio", "server.requests_running", "server.requests_waiting", "kv.usage_ratio", "server.preemptions_per_second", "kv.prefix_cache_hit_ratio", "throughput.prompt_tokens_per_second", "throughput.generation_tokens_per_second", "latency.ttft_seconds", "latency.itl_seconds", "latency.e2e_seconds", "latency.queue_seconds", "spec.acceptance_ratio"]
    missing = [k for k in contract if k not in SPECS]
    assert not missing


def test_has_value_is_reading_ok():
    # the type guard the rules narrow readings with (Context.ok, derived_of): a dead
    # source's reading (no value, or an error status) never passes as a number
    from infertop.model import has_value
    cases = [Reading("gpu.util_ratio", 0.5), Reading("gpu.util_ratio", 0.0, status=Status.STALE),
             Reading("gpu.util_ratio", None), Reading("gpu.util_ratio", None, status=Status.ERROR),
             Reading("gpu.util_ratio", 0.5, status=Status.ERROR),
             Reading("gpu.util_ratio", 0.5, status=Status.NODATA)]
    assert [has_value(r) for r in cases] == [True, True, False, False, False, False]
    assert all(has_value(r) == r.ok for r in cases)
