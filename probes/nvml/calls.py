"""Timed, named calls into pynvml and the words for their failures.

Every NVML call goes through ``NvmlCalls`` so that (1) its last duration is recorded per
function name (scripts/gpu-check prints the table: a slow call on a real driver shows up
there first), and (2) ``NVMLError_GpuIsLost`` becomes ``GpuLost``, which the probe catches
per GPU: a GPU that fell off the bus must not take the other GPUs' readings with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from infertop.model import Status


class GpuLost(Exception):
    """NVML said NVML_ERROR_GPU_IS_LOST for a call on this GPU's handle."""


class _Never(Exception):
    """Stand-in for an error class a (very old) pynvml does not define."""


class NvmlCalls:
    def __init__(self, nvml: ModuleType) -> None:
        self.nvml = nvml
        self.timings: dict[str, float] = {}   # function name -> seconds of its last call
        self.counts: dict[str, int] = {}
        self._fns: dict[str, Callable[..., Any]] = {}
        self._lost = getattr(nvml, "NVMLError_GpuIsLost", _Never)
        self._perf = time.perf_counter

    def __call__(self, name: str, *args: Any, **kwargs: Any) -> Any:
        fn = self._fns.get(name)
        if fn is None:
            fn = getattr(self.nvml, name)  # AttributeError: this pynvml lacks the function
            self._fns[name] = fn
        t0 = self._perf()
        try:
            return fn(*args, **kwargs)
        except self._lost as e:
            raise GpuLost(name) from e
        finally:
            self.timings[name] = self._perf() - t0
            self.counts[name] = self.counts.get(name, 0) + 1

    def is_error(self, exc: BaseException, class_name: str) -> bool:
        return isinstance(exc, getattr(self.nvml, class_name, _Never))

    def is_missing(self, exc: BaseException) -> bool:
        """The loaded driver library lacks the function: it will not grow it while we run."""
        return (self.is_error(exc, "NVMLError_FunctionNotFound") or isinstance(exc, AttributeError)
                or type(exc).__name__ == "NVMLLibraryMismatchError")

    def failure(self, exc: BaseException, call: str, gpu_name: str) -> tuple[Status, str]:
        """(status, reason) for a failed call: what the user can read on the screen."""
        err = self.is_error
        if err(exc, "NVMLError_NotSupported"):
            return Status.UNSUPPORTED, f"not supported on {gpu_name}"
        if err(exc, "NVMLError_NoPermission"):
            return Status.ERROR, (f"no permission for {call} (NVML: insufficient permissions; "
                                  "needs root or access to /dev/nvidia*)")
        if self.is_missing(exc):
            return Status.UNSUPPORTED, (f"{call} missing in this driver's NVML "
                                        "(nvidia-ml-py newer than the driver?)")
        if err(exc, "NVMLError_Timeout"):
            return Status.ERROR, f"NVML timed out in {call}"
        if err(exc, "NVMLError_NoData") or err(exc, "NVMLError_NotReady"):
            return Status.NODATA, f"no data yet from {call}"
        if err(exc, "NVMLError"):
            return Status.ERROR, f"NVML error in {call}: {exc}"
        return Status.ERROR, f"{call} failed: {type(exc).__name__}: {exc}"
