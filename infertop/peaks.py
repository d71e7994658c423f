"""What a GPU can do at most: dense tensor FLOP/s per dtype and memory bandwidth.

Two ways, and every answer says which it used:

1. **The datasheet table** below, matched on the NVML product name.  Dense numbers only:
   NVIDIA's datasheets print the 2:4-sparsity figure first ("with sparsity") and the
   dense one is half of it; LLM inference runs dense GEMMs, so the dense one is the peak.
2. **Arithmetic** when the name is not in the table: SM count x max SM clock x dense
   tensor FLOPs per SM per clock of the architecture (compute capability), with the SM
   count from NVML's CUDA-core count.  The per-SM rates reproduce the table's
   numbers for the reference parts (A100: 108 x 1.41 GHz x 2048 = 312 TFLOP/s; H100 SXM:
   132 x 1.83 GHz x 4096 = 989 TFLOP/s; A10: 72 x 1.695 GHz x 1024 = 125 TFLOP/s).

Memory bandwidth comes from NVML first (bus width x max memory clock x 2, double data
rate: H100 SXM 5120 bit x 2619 MHz x 2 / 8 = 3.35 TB/s), from the table otherwise.

Pure: strings and numbers in, numbers out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from .units import fmt_count

TERA = 1e12

# dtype families a peak is given for: 16-bit (bf16 and fp16 share the tensor rate),
# fp8, and tf32 (what fp32 matmuls run at on tensor cores when TF32 is allowed)
DTYPES = ("16bit", "fp8", "tf32")


@dataclass(frozen=True, slots=True)
class Sku:
    pattern: str                     # regex, searched in the NVML name
    name: str
    dense_tflops: dict               # dtype family -> dense TFLOP/s
    bandwidth_tbs: float             # TB/s (1e12 bytes/s)
    source: str


# Ordered: the first match wins (more specific names first).
SKUS: tuple[Sku, ...] = (
    Sku(r"H200", "H200 SXM", {"16bit": 989.5, "fp8": 1979.0, "tf32": 494.7}, 4.8,
        "NVIDIA H200 datasheet (2024): BF16 1979 / FP8 3958 TFLOPS with sparsity, halved"),
    Sku(r"H100 NVL", "H100 NVL", {"16bit": 835.5, "fp8": 1670.5, "tf32": 417.5}, 3.9,
        "NVIDIA H100 datasheet, NVL column: BF16 1671 / FP8 3341 TFLOPS sparse, halved"),
    Sku(r"H100.*PCIe", "H100 PCIe", {"16bit": 756.5, "fp8": 1513.0, "tf32": 378.0}, 2.0,
        "NVIDIA H100 datasheet, PCIe column: BF16 1513 / FP8 3026 TFLOPS sparse, halved"),
    Sku(r"H100", "H100 SXM", {"16bit": 989.4, "fp8": 1978.9, "tf32": 494.7}, 3.35,
        "NVIDIA H100 datasheet, SXM column: BF16 1979 / FP8 3958 TFLOPS sparse, halved; "
        "Hopper whitepaper table 3 (dense 989.4)"),
    Sku(r"B200", "B200", {"16bit": 2250.0, "fp8": 4500.0, "tf32": 1100.0}, 8.0,
        "NVIDIA HGX B200 datasheet: per GPU FP16/BF16 4.5 / FP8 9 PFLOPS sparse, halved"),
    Sku(r"A100.*80GB.*PCIe|A100 80GB PCIe", "A100 80GB PCIe",
        {"16bit": 312.0, "tf32": 156.0}, 1.935,
        "NVIDIA A100 datasheet: BF16 312 TFLOPS dense (624 sparse), 1935 GB/s"),
    Sku(r"A100.*80GB", "A100 SXM 80GB", {"16bit": 312.0, "tf32": 156.0}, 2.039,
        "NVIDIA A100 datasheet: BF16 312 TFLOPS dense (624 sparse), 2039 GB/s"),
    Sku(r"A100", "A100 40GB", {"16bit": 312.0, "tf32": 156.0}, 1.555,
        "NVIDIA A100 datasheet: BF16 312 TFLOPS dense (624 sparse), 1555 GB/s"),
    Sku(r"L40S", "L40S", {"16bit": 362.05, "fp8": 733.0, "tf32": 183.0}, 0.864,
        "NVIDIA L40S datasheet: BF16 733 / FP8 1466 TFLOPS sparse, halved; 864 GB/s"),
    Sku(r"\bL40\b", "L40", {"16bit": 181.0, "fp8": 362.0, "tf32": 90.5}, 0.864,
        "NVIDIA L40 datasheet: BF16 362 / FP8 724 TFLOPS sparse, halved; 864 GB/s"),
    Sku(r"\bL4\b", "L4", {"16bit": 121.0, "fp8": 242.5, "tf32": 60.0}, 0.3,
        "NVIDIA L4 datasheet: BF16 242 / FP8 485 TFLOPS sparse, halved; 300 GB/s"),
    Sku(r"\bA10\b", "A10", {"16bit": 125.0, "tf32": 62.5}, 0.6,
        "NVIDIA A10 datasheet: BF16 250 TFLOPS sparse, halved; 600 GB/s"),
    Sku(r"\bT4\b", "T4", {"16bit": 65.0}, 0.32,
        "NVIDIA T4 datasheet: mixed-precision FP16 65 TFLOPS; 320 GB/s"),
    Sku(r"V100.*SXM", "V100 SXM2", {"16bit": 125.0}, 0.9,
        "NVIDIA V100 datasheet: tensor 125 TFLOPS (SXM2); 900 GB/s"),
    Sku(r"V100", "V100 PCIe", {"16bit": 112.0}, 0.9,
        "NVIDIA V100 datasheet: tensor 112 TFLOPS (PCIe); 900 GB/s"),
)


@dataclass(frozen=True, slots=True)
class Arch:
    name: str
    cores_per_sm: int                # FP32 CUDA cores per SM (NVML counts these)
    flops_per_sm_clock: dict         # dtype family -> dense tensor FLOPs per SM per clock


# compute capability -> per-SM dense tensor rate (CUDA programming guide, arithmetic
# instructions table; architecture whitepapers: tensor cores per SM x FMA per clock x 2)
ARCHS: dict[str, Arch] = {
    "7.0": Arch("Volta", 64, {"16bit": 1024}),
    "7.5": Arch("Turing", 64, {"16bit": 1024}),
    "8.0": Arch("Ampere GA100", 64, {"16bit": 2048, "tf32": 1024}),
    "8.6": Arch("Ampere GA10x", 128, {"16bit": 1024, "tf32": 512}),
    "8.9": Arch("Ada", 128, {"16bit": 1024, "fp8": 2048, "tf32": 512}),
    "9.0": Arch("Hopper", 128, {"16bit": 4096, "fp8": 8192, "tf32": 2048}),
    "10.0": Arch("Blackwell", 128, {"16bit": 8192, "fp8": 16384, "tf32": 4096}),
}


@dataclass(frozen=True, slots=True)
class Peak:
    value: float | None              # FLOP/s or bytes/s; None: unknown
    how: str                         # which source was used, or why there is none


def dtype_family(dtype: str | None) -> str:
    """The peak column for a served dtype ('bfloat16', 'fp8_e4m3', 'float32', 'auto')."""
    d = (dtype or "").strip().lower()
    if "fp8" in d or "float8" in d or d in ("e4m3", "e5m2"):
        return "fp8"
    if d in ("float32", "fp32", "float", "tf32"):
        return "tf32"
    return "16bit"   # bfloat16, float16, half, auto (LLM checkpoints are 16-bit)


# pure on the GPU's name: memoised, as the peaks are derived for every GPU every tick
# (15 regexes a GPU a tick were a tenth of the pipeline thread's derive on 8 GPUs)
@lru_cache(maxsize=64)
def find_sku(gpu_name: str | None) -> Sku | None:
    if not gpu_name:
        return None
    for sku in SKUS:
        if re.search(sku.pattern, gpu_name):
            return sku
    return None


@lru_cache(maxsize=256)   # pure; asked for every GPU every tick
def peak_flops(gpu_name: str | None, dtype: str = "16bit", *, compute_capability: str | None = None,
               cuda_cores: float | None = None, sm_clock_max_hz: float | None = None) -> Peak:
    """Dense tensor FLOP/s for ``dtype`` (a family from ``dtype_family``)."""
    sku = find_sku(gpu_name)
    if sku is not None:
        tf = sku.dense_tflops.get(dtype)
        if tf is not None:
            return Peak(tf * TERA, f"datasheet {sku.name} dense {dtype} ({sku.source})")
        return Peak(None, f"{sku.name} has no {dtype} tensor rate (datasheet)")
    arch = ARCHS.get(compute_capability or "")
    if arch is None:
        why = f"compute capability {compute_capability}" if compute_capability else \
            "no compute capability"
        return Peak(None, f"{gpu_name or 'GPU'} not in the peak table and {why} has no "
                          "per-architecture rate")
    rate = arch.flops_per_sm_clock.get(dtype)
    if rate is None:
        return Peak(None, f"{arch.name} has no {dtype} tensor rate")
    if not cuda_cores or not sm_clock_max_hz:
        return Peak(None, f"{gpu_name or 'GPU'} not in the peak table; SM count or max "
                          "clock unknown")
    sms = round(cuda_cores / arch.cores_per_sm)
    return Peak(sms * sm_clock_max_hz * rate,
                f"computed: {fmt_count(float(sms))} SMs x {fmt_count(sm_clock_max_hz / 1e6)} MHz x {rate} "
                f"FLOP/SM/clock ({arch.name}, dense {dtype})")


@lru_cache(maxsize=256)   # pure; asked for every GPU every tick
def peak_bandwidth(gpu_name: str | None, *, bus_width_bits: float | None = None,
                   mem_clock_max_hz: float | None = None) -> Peak:
    """Memory bandwidth in bytes/s: NVML bus width x max memory clock x 2, else the table."""
    if bus_width_bits and mem_clock_max_hz:
        v = bus_width_bits / 8 * mem_clock_max_hz * 2
        return Peak(v, f"NVML: {fmt_count(bus_width_bits)}-bit bus x "
                       f"{fmt_count(mem_clock_max_hz / 1e6)} "
                       "MHz x 2 (double data rate)")
    sku = find_sku(gpu_name)
    if sku is not None:
        return Peak(sku.bandwidth_tbs * TERA, f"datasheet {sku.name} ({sku.source})")
    return Peak(None, "memory bus width or max memory clock not reported and "
                      f"{gpu_name or 'GPU'} not in the peak table")
