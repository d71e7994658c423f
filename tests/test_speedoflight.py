"""Speed of light: peaks, model facts, decode roofline, MFU/MBU, against hand-computed cases.

The reference case of the issue: a 7B fp16 model (7e9 parameters, 14e9 bytes) on one
H100 SXM.  Its bandwidth as NVML gives it: 5120-bit bus x 2619 MHz x 2 / 8 =
3.35232e12 B/s; its dense 16-bit peak from the datasheet: 989.4 TFLOP/s.
"""

from __future__ import annotations

import json

import pytest

from helpers.fake_pynvml import FakeGPU, FakeNVML, ManualClock
from helpers.rulekit import Feed, Hist, tick
from infertop.model import Status
from infertop.peaks import dtype_family, find_sku, peak_bandwidth, peak_flops
from infertop.probes.nvml.probe import NvmlProbe
from infertop.probes.server.model_config import (
    MAX_CONFIG_BYTES,
    ModelConfigReader,
    candidates,
)
from infertop.speedoflight import (
    ConfigError,
    decode_step,
    estimated_bytes_per_gpu,
    estimated_flops_per_gpu,
    model_facts,
    utilisation,
)

H100_BW = 5120 / 8 * 2619e6 * 2          # 3.35232e12 B/s
H100_BF16 = 989.4e12
W7B = 14e9                               # 7e9 params x 2 bytes
KV_7B = 2 * 32 * 32 * 128 * 2            # Llama-2-7B fp16: 524288 B per token

LLAMA2_7B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
             "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000,
             "tie_word_embeddings": False, "torch_dtype": "float16"}


# ---- peaks -------------------------------------------------------------------------------
def test_bandwidth_from_nvml_bus_width_and_max_memory_clock():
    p = peak_bandwidth("NVIDIA H100 80GB HBM3", bus_width_bits=5120, mem_clock_max_hz=2619e6)
    assert p.value == pytest.approx(3.35232e12) and p.how.startswith("NVML")
    # A100 SXM 80GB: 5120 bit x 1593 MHz -> 2.039 TB/s, the datasheet's number
    assert peak_bandwidth("x", bus_width_bits=5120, mem_clock_max_hz=1593e6).value == \
        pytest.approx(2.039e12, rel=1e-3)
    # no bus width (NotSupported): the datasheet table, which says so
    t = peak_bandwidth("NVIDIA L40S")
    assert t.value == pytest.approx(0.864e12) and "datasheet L40S" in t.how
    none = peak_bandwidth("Mystery GPU")
    assert none.value is None and "not in the peak table" in none.how


def test_dense_peaks_from_the_table_not_the_sparse_numbers():
    p = peak_flops("NVIDIA H100 80GB HBM3", "16bit")
    assert p.value == pytest.approx(H100_BF16) and "datasheet H100 SXM" in p.how
    assert peak_flops("NVIDIA H100 80GB HBM3", "fp8").value == pytest.approx(1978.9e12)
    assert peak_flops("NVIDIA H100 PCIe", "16bit").value == pytest.approx(756.5e12)
    assert peak_flops("NVIDIA A100-SXM4-80GB", "16bit").value == pytest.approx(312e12)
    no_fp8 = peak_flops("NVIDIA A100-SXM4-80GB", "fp8")
    assert no_fp8.value is None and "no fp8" in no_fp8.how
    assert find_sku("NVIDIA A10G") is None        # not the A10: its own silicon config
    a10 = find_sku("NVIDIA A10")
    assert a10 is not None and a10.name == "A10"


def test_unknown_sku_falls_back_to_sms_times_clock_times_arch_rate():
    # an H100 under another name: 16896 cores / 128 = 132 SMs x 1830 MHz x 4096 = 989.4 T
    p = peak_flops("NVIDIA H100 Engineering Sample X", "16bit")
    assert p.value is not None  # the name still matches H100
    q = peak_flops("Some Hopper", "16bit", compute_capability="9.0", cuda_cores=16896,
                   sm_clock_max_hz=1830e6)
    assert q.value == pytest.approx(132 * 1830e6 * 4096) == pytest.approx(989.4e12, rel=1e-3)
    assert q.how.startswith("computed: 132 SMs x 1830 MHz x 4096")
    # A10G: 80 SMs (10240 cores / 128, Ampere GA10x) x 1710 MHz x 1024
    a = peak_flops("NVIDIA A10G", "16bit", compute_capability="8.6", cuda_cores=10240,
                   sm_clock_max_hz=1710e6)
    assert a.value == pytest.approx(80 * 1710e6 * 1024)
    missing = peak_flops("Some GPU", "16bit", compute_capability="6.1")
    assert missing.value is None and "6.1" in missing.how
    nocores = peak_flops("Some GPU", "16bit", compute_capability="9.0")
    assert nocores.value is None and "SM count" in nocores.how


@pytest.mark.parametrize("dtype,family", [("bfloat16", "16bit"), ("auto", "16bit"),
                                          (None, "16bit"), ("fp8_e4m3", "fp8"),
                                          ("float32", "tf32")])
def test_dtype_family(dtype, family):
    assert dtype_family(dtype) == family


# ---- model facts from config.json --------------------------------------------------------
def test_llama2_7b_parameters_and_kv_bytes():
    f = model_facts(LLAMA2_7B)
    # 32 x (4 x 4096^2 + 3 x 4096 x 11008) + 2 x 32000 x 4096 = 6,738,149,376; the real
    # checkpoint has 6,738,415,616: the difference is the norms, left out
    assert f.params == 6_738_149_376
    assert f.params == pytest.approx(6_738_415_616, rel=1e-4)
    assert f.active_params == f.params
    assert f.weight_bytes == 2 * f.params
    assert f.kv_bytes_per_token == KV_7B == 524288
    assert f.dtype == "float16" and f.architecture == "LlamaForCausalLM"


def test_gqa_fp8_kv_and_served_dtype():
    cfg = {**LLAMA2_7B, "num_key_value_heads": 8, "torch_dtype": "bfloat16"}
    f = model_facts(cfg, kv_cache_dtype="fp8", served_dtype="float32")
    assert f.kv_bytes_per_token == 2 * 32 * 8 * 128 * 1
    assert f.dtype == "float32" and f.weight_bytes == 4 * f.params


def test_mixture_of_experts_active_parameters():
    cfg = {**LLAMA2_7B, "num_local_experts": 8, "num_experts_per_tok": 2,
           "intermediate_size": 14336, "num_key_value_heads": 8, "vocab_size": 32000}
    f = model_facts(cfg)
    attn = 4096 * 32 * 128 * 2 + 4096 * 8 * 128 * 2
    expert = 3 * 4096 * 14336
    emb = 2 * 32000 * 4096
    assert f.params == 32 * (attn + 8 * expert + 4096 * 8) + emb       # ~46.7 B (Mixtral)
    assert f.active_params == 32 * (attn + 2 * expert + 4096 * 8) + emb  # ~12.9 B
    assert any("mixture of experts" in n for n in f.notes)


def test_quantized_weights_and_bad_configs():
    q = model_facts({**LLAMA2_7B, "quantization_config": {"quant_method": "awq", "bits": 4}})
    assert q.weight_bytes == pytest.approx(q.params * 0.5)
    with pytest.raises(ConfigError):
        model_facts({"hidden_size": "4096"})
    with pytest.raises(ConfigError):
        model_facts(["not", "a", "dict"])  # type: ignore[arg-type]


# ---- the decode roofline: the hand-computed cases --------------------------------
def test_7b_fp16_h100_batch_1():
    s = decode_step(weight_bytes=W7B, kv_bytes_per_token=KV_7B, active_params=7e9, batch=1,
                    context_tokens=0, gpus=1, bandwidth=H100_BW, peak_flops=H100_BF16)
    # 14e9 B / 3.35232e12 B/s = 4.1762 ms per step -> 239.45 tok/s
    assert s.seconds == pytest.approx(4.1762e-3, rel=1e-4)
    assert s.tokens_per_second(1) == pytest.approx(239.45, rel=1e-4)
    assert s.bound == "memory"
    # with 1000 tokens of context: 14e9 + 1000 x 524288 = 14.524288e9 B -> 230.81 tok/s
    c = decode_step(weight_bytes=W7B, kv_bytes_per_token=KV_7B, active_params=7e9, batch=1,
                    context_tokens=1000, gpus=1, bandwidth=H100_BW, peak_flops=H100_BF16)
    assert c.tokens_per_second(1) == pytest.approx(230.81, rel=1e-4)


def test_7b_fp16_h100_batch_32():
    s = decode_step(weight_bytes=W7B, kv_bytes_per_token=KV_7B, active_params=7e9, batch=32,
                    context_tokens=1000, gpus=1, bandwidth=H100_BW, peak_flops=H100_BF16)
    # 14e9 + 32 x 1000 x 524288 = 30.777216e9 B -> 9.1809 ms -> 3485.5 tok/s; compute
    # 2 x 7e9 x 32 = 4.48e11 FLOP takes 0.4528 ms: still memory-bound
    assert s.bytes == pytest.approx(30.777216e9)
    assert s.seconds == pytest.approx(9.1809e-3, rel=1e-4)
    assert s.tokens_per_second(32) == pytest.approx(3485.5, rel=1e-4)
    assert s.flops / H100_BF16 == pytest.approx(0.4528e-3, rel=1e-3)
    assert s.bound == "memory"


def test_huge_batch_turns_compute_bound_and_tp_splits_the_bytes():
    s = decode_step(weight_bytes=W7B, kv_bytes_per_token=KV_7B, active_params=7e9,
                    batch=4096, context_tokens=0, gpus=1, bandwidth=H100_BW,
                    peak_flops=H100_BF16)
    assert s.bound == "compute"
    assert s.seconds == pytest.approx(2 * 7e9 * 4096 / H100_BF16)
    tp2 = decode_step(weight_bytes=W7B, kv_bytes_per_token=KV_7B, active_params=7e9, batch=1,
                      context_tokens=0, gpus=2, bandwidth=H100_BW, peak_flops=H100_BF16)
    assert tp2.tokens_per_second(1) == pytest.approx(2 * 239.45, rel=1e-4)


def test_mfu_and_mbu_estimates():
    # 3000 tok/s on one GPU: 2 x 7e9 x 3000 = 4.2e13 FLOP/s = 4.245 % of 989.4 T
    flops = estimated_flops_per_gpu(active_params=7e9, tokens_per_second=3000, gpus=1)
    assert utilisation(flops, H100_BF16) == pytest.approx(0.042450, rel=1e-4)
    # 100 steps/s x 14e9 + 3000 tok/s x 1000 x 524288 = 2.972864e12 B/s = 88.68 %
    b = estimated_bytes_per_gpu(weight_bytes=W7B, kv_bytes_per_token=KV_7B,
                                steps_per_second=100, generation_tokens_per_second=3000,
                                context_tokens=1000, gpus=1)
    assert b == pytest.approx(2.972864e12)
    assert utilisation(b, H100_BW) == pytest.approx(0.88681, rel=1e-4)
    assert utilisation(1.0, None) is None


# ---- derived readings through the real pipeline ------------------------------------------
ENGINE = "engine=0,model=m"


class Server:
    """A server decoding 3000 tok/s at batch 30 with prompts of 900 and outputs of 200
    tokens (mean context 900 + 200 / 2 = 1000), on one H100, serving the 7B fp16 model."""

    def __init__(self, flops_per_s: float = 0.0, bytes_per_s: float = 0.0):
        self.t = 0
        self.prompt = Hist((256, 512, 1024, 2048))
        self.gen = Hist((64, 128, 256, 512))
        self.flops_per_s, self.bytes_per_s = flops_per_s, bytes_per_s

    def __call__(self):
        self.t += 1
        self.prompt.observe(900, 15)
        self.gen.observe(200, 15)
        return {
            "gpu.info": {"gpu=0": "NVIDIA H100 80GB HBM3"},
            "gpu.mem_bus_width_bits": {"gpu=0": 5120},
            "gpu.mem_clock_max_hz": {"gpu=0": 2619e6},
            "model.params": {"model=m": 7e9}, "model.active_params": {"model=m": 7e9},
            "model.weight_bytes": {"model=m": W7B},
            "model.kv_bytes_per_token": {"model=m": KV_7B},
            "server.generation_tokens_total": {ENGINE: 3000.0 * self.t},
            "server.requests_running": {ENGINE: 30},
            "request.prompt_tokens": {ENGINE: self.prompt.value()},
            "request.generation_tokens": {ENGINE: self.gen.value()},
            "server.estimated_flops_per_gpu_total": {ENGINE: self.flops_per_s * self.t},
            "server.estimated_read_bytes_per_gpu_total": {ENGINE: self.bytes_per_s * self.t},
            "server.estimated_write_bytes_per_gpu_total": {ENGINE: 0.0},
        }


def _frame(make, n: int = 10):
    f = Feed()
    frame = None
    for _ in range(n):
        frame = f.pipe.feed(tick(f.t, make()))
        f.t += 1
    return frame


def _run(make, n: int = 10):
    frame = _frame(make, n)
    return {r.key: r for r in frame.derived if r.key.startswith(("sol.", "gpu.peak"))}


def test_kernels_pane_shows_mfu_mbu_and_the_roofline():
    from helpers.panes import pane_text
    text = pane_text("kernels", _frame(Server()))
    # MFU 4.2 %, MBU 88.7 %, 3000 of at most 30 / 8.868 ms = 3383 tok/s
    assert " ".join(text.split()).count("MFU / MBU 4 % / 89 % roofline 89 % of 3.4 ktokens/s")


def test_pipeline_estimate_when_the_engine_counters_are_zero():
    got = _run(Server())    # vLLM 0.32 without --enable-mfu-metrics: counters at 0
    assert got["gpu.peak_mem_bandwidth_bytes_per_second"].value == pytest.approx(H100_BW)
    assert got["gpu.peak_flops"].value == pytest.approx(H100_BF16)
    mfu, mbu = got["sol.mfu_ratio"], got["sol.mbu_ratio"]
    assert mfu.value == pytest.approx(0.042450, rel=1e-3)
    assert "infertop's estimate" in mfu.reason
    # steps/s unknown: 3000 tok/s / batch 30 = 100 steps/s: the hand case above
    assert mbu.value == pytest.approx(0.88681, rel=1e-3)
    roof = got["sol.decode_roofline_tokens_per_second"]
    # batch 30, context 1000: (14e9 + 30 x 1000 x 524288) / 3.35232e12 = 8.8683 ms
    assert roof.value == pytest.approx(30 / ((14e9 + 30 * 1000 * KV_7B) / H100_BW), rel=1e-4)
    assert "memory-bound at batch 30.0, 1000 tokens of context" in roof.reason
    ratio = got["sol.decode_roofline_ratio"]
    assert ratio.value == pytest.approx(3000 / roof.value, rel=1e-4)


def test_pipeline_prefers_the_engine_counters_when_they_count():
    got = _run(Server(flops_per_s=2e14, bytes_per_s=1.5e12))
    assert got["sol.mfu_ratio"].value == pytest.approx(2e14 / H100_BF16, rel=1e-4)
    assert got["sol.mbu_ratio"].value == pytest.approx(1.5e12 / H100_BW, rel=1e-4)
    assert "estimated_*_per_gpu counters" in got["sol.mfu_ratio"].reason


def test_pipeline_says_why_when_the_model_is_unknown():
    s = Server()

    def no_model():
        d = s()
        return {k: v for k, v in d.items() if not k.startswith("model.")}
    got = _run(no_model, 5)
    assert got["sol.mfu_ratio"].status is Status.NODATA
    assert "model's shape is unknown" in got["sol.mfu_ratio"].reason
    assert "model shape unknown" in got["sol.decode_roofline_ratio"].reason


# ---- the probes: NVML facts, config.json -------------------------------------------------
async def test_nvml_reads_bus_width_cores_and_compute_capability_per_call():
    clock = ManualClock()
    fake = FakeNVML([FakeGPU(), FakeGPU(unsupported={"nvmlDeviceGetMemoryBusWidth"})],
                    clock=clock)
    probe = NvmlProbe(nvml_module=fake.module, clock=clock)
    assert (await probe.open()).available
    s = await probe.collect()

    def one(key, gpu):
        return next(r for r in s.readings if r.key == key and r.label("gpu") == str(gpu))
    assert one("gpu.mem_bus_width_bits", 0).value == 5120
    assert one("gpu.cuda_cores", 0).value == 16896
    cc = one("gpu.compute_capability", 0)
    assert cc.text == "9.0" and cc.value == 9.0
    nb = one("gpu.mem_bus_width_bits", 1)
    assert nb.status is Status.UNSUPPORTED and "not supported on" in nb.reason
    assert one("gpu.cuda_cores", 1).status is Status.OK   # one call's failure stays its own
    await probe.close()


def test_model_config_from_a_local_directory(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA2_7B))
    rs = {r.key: r for r in ModelConfigReader(env={}).readings({"model": str(tmp_path)})}
    assert rs["model.params"].value == 6_738_149_376
    assert rs["model.kv_bytes_per_token"].value == KV_7B
    assert rs["model.info"].label("dtype") == "float16"
    info = rs["model.info"].text
    assert info is not None and "LlamaForCausalLM" in info


def test_model_config_from_the_hf_cache_and_the_settings(tmp_path):
    snap = tmp_path / ".cache/huggingface/hub/models--org--tiny/snapshots/abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps({**LLAMA2_7B, "num_key_value_heads": 8}))
    reader = ModelConfigReader(env={"HOME": str(tmp_path)})
    rs = {r.key: r for r in reader.readings({"model": "org/tiny", "kv_cache_dtype": "fp8",
                                             "dtype": "bfloat16"})}
    assert rs["model.kv_bytes_per_token"].value == 2 * 32 * 8 * 128 * 1
    assert rs["model.info"].label("dtype") == "bfloat16"
    # an id with ".." never walks out of the cache
    assert candidates("org/..", env={"HOME": str(tmp_path)}) == []


@pytest.mark.parametrize("content,why", [
    (b"{not json", "JSONDecodeError"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"hidden_size": 1}', "no hidden_size"),
    (b" " * (MAX_CONFIG_BYTES + 10), "larger than"),
])
def test_hostile_config_files_become_a_reason(tmp_path, content, why):
    (tmp_path / "config.json").write_bytes(content)
    rs = ModelConfigReader(env={}).readings({"model": str(tmp_path)})
    assert rs and all(r.status is Status.NODATA and r.value is None for r in rs)
    assert why in rs[0].reason


def test_missing_config_is_retried_later_not_every_tick(tmp_path):
    now = [0.0]
    reader = ModelConfigReader(env={}, clock=lambda: now[0])
    first = reader.readings({"model": str(tmp_path)})
    assert "no config.json" in first[0].reason
    (tmp_path / "config.json").write_text(json.dumps(LLAMA2_7B))
    assert reader.readings({"model": str(tmp_path)})[0].status is Status.NODATA  # cached
    now[0] = 61.0
    got = {r.key: r for r in reader.readings({"model": str(tmp_path)})}
    assert got["model.params"].value == 6_738_149_376
    assert reader.readings({}) == []


# ---- the engines' own counters -----------------------------------------------------------
def test_vllm_032_page_has_the_mfu_counters_at_zero():
    """Exposed without --enable-mfu-metrics, at 0 (docs/metrics.md#mfu): mapped, and the
    pipeline test above shows all-zero counters fall back to the estimate."""
    from pathlib import Path

    from infertop.dialects import readings_from_exposition
    page = (Path(__file__).parent / "fixtures/metrics/vllm-0.32-busy.prom").read_text()
    got = {r.key: r for r in readings_from_exposition(page, "x").readings
           if r.key.startswith("server.estimated_")}
    assert set(got) == {"server.estimated_flops_per_gpu_total",
                        "server.estimated_read_bytes_per_gpu_total",
                        "server.estimated_write_bytes_per_gpu_total"}
    assert all(r.value == 0.0 and r.label("engine") == "0" for r in got.values())


def test_sglang_mfu_counters_take_the_max_over_tp_ranks():
    from infertop.dialects import readings_from_exposition
    page = "\n".join([
        "# TYPE sglang:estimated_flops_per_gpu_total counter",
        'sglang:estimated_flops_per_gpu_total{model_name="m",tp_rank="0"} 5e14',
        'sglang:estimated_flops_per_gpu_total{model_name="m",tp_rank="1"} 4e14',
        "# TYPE sglang:num_running_reqs gauge",
        'sglang:num_running_reqs{model_name="m",tp_rank="0"} 3', ""])
    got = [r for r in readings_from_exposition(page, "x").readings
           if r.key == "server.estimated_flops_per_gpu_total"]
    assert len(got) == 1 and got[0].value == 5e14


@pytest.mark.parametrize("scenario,source", [
    ("healthy", "infertop's estimate"),                         # counters exposed at 0
    ("krn-below-roofline", "the engine's estimated_*_per_gpu counters"),  # mfu_metrics on
])
def test_demo_scenarios_show_both_sources(capsys, scenario, source):
    from infertop.cli.main import main
    assert main(["snapshot", "--json", "--source", f"demo:{scenario}", "--window", "30",
                 "--speed", "30"]) == 0
    doc = json.loads(capsys.readouterr().out)
    sol = {r["key"]: r for r in doc["layers"]["kernels"]["readings"]
           if r["key"].startswith("sol.")}
    assert sol["sol.mfu_ratio"]["status"] == "ok" and source in sol["sol.mfu_ratio"]["reason"]
    assert 0 < sol["sol.mbu_ratio"]["value"] < 1
    assert 0 < sol["sol.decode_roofline_ratio"]["value"] < 1
