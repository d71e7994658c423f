"""Benchmarks only: a Python started with this folder on PYTHONPATH and FAKE_NVML_GPUS=N
sees N fake GPUs through ``import pynvml`` (tests/helpers/fake_pynvml.py: the fake NVML
driver behind the real pynvml module's structs, constants and errors).  Used by
bench_cpu_vs_nvitop.py to put infertop and nvitop on the same fake 8-GPU box.

FAKE_NVML_PIDS=pid,pid,... are the processes each GPU says it runs (the demo server), so
both tools have a real process to look up.  NVML calls the fake does not implement answer
NotSupported, as a driver without the feature does (nvitop asks for fans, encoders...).
"""

import os
import sys


def _install() -> None:
    n = int(os.environ.get("FAKE_NVML_GPUS", "0") or 0)
    if n <= 0:
        return
    import importlib.util
    from pathlib import Path

    import pynvml as real  # the real module first: the fake borrows its structs and errors

    path = Path(__file__).resolve().parents[2] / "tests" / "helpers" / "fake_pynvml.py"
    spec = importlib.util.spec_from_file_location("_infertop_fake_pynvml", path)
    fake_mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = fake_mod   # dataclasses look their module up by name
    spec.loader.exec_module(fake_mod)
    pids = [int(p) for p in os.environ.get("FAKE_NVML_PIDS", "").split(",") if p.strip()]
    gpus = [fake_mod.FakeGPU(processes=[(p, 70 * fake_mod.GiB) for p in pids],
                             process_sm={p: 80 for p in pids}) for _ in range(n)]
    module = fake_mod.FakeNVML(gpus).module

    def not_supported(*_a, **_k):
        raise real.NVMLError(real.NVML_ERROR_NOT_SUPPORTED)

    def __getattr__(name: str):
        if name.startswith("nvml"):
            return not_supported
        raise AttributeError(name)

    module.__getattr__ = __getattr__
    sys.modules["pynvml"] = module


_install()
