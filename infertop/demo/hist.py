"""Cumulative histograms for the scenario engine, with the servers' real bucket bounds.

Observations are drawn from a lognormal (latencies and lengths are skewed to the right):
a handful are sampled one by one with the scenario's random generator, thousands (one per
generated token for ITL) are spread over the buckets by the exact lognormal CDF with a
largest-remainder rounding, so counts stay whole numbers and a tick stays cheap.
"""

from __future__ import annotations

import bisect
import math
import random

# vLLM 0.33 v1/metrics/buckets.py (docs/metrics.md#vllm-buckets)
VLLM_TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
             7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
VLLM_ITL = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
            10.0, 20.0, 40.0, 80.0)
VLLM_REQUEST = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
                60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
# vLLM NixlPromMetrics (distributed/kv_transfer/kv_connector/v1/nixl_connector.py):
# transfer time buckets 0.005..5 s; bytes per transfer in powers of 4 from 2 KiB
NIXL_XFER = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0)
NIXL_BYTES = tuple(float(2 ** (10 + i)) for i in range(1, 25, 2))
VLLM_ITERATION = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


def request_tokens_buckets(max_model_len: int) -> tuple[float, ...]:
    """vLLM's 1-2-5 series up to max_model_len (request_prompt/generation_tokens)."""
    out: list[float] = []
    mantissa, exponent = (1, 2, 5), 0
    while True:
        for m in mantissa:
            v = m * 10 ** exponent
            if v > max_model_len:
                return tuple(out)
            out.append(float(v))
        exponent += 1


def tgi_duration_buckets() -> tuple[float, ...]:
    """TGI router: 35 geometric buckets, x1.5 from 1e-5 (router/src/server.rs)."""
    out, v = [], 0.00001
    for _ in range(35):
        v *= 1.5
        out.append(v)
    return tuple(out)


def linear_buckets(top: float, n: int = 100) -> tuple[float, ...]:
    step = top / n
    return tuple(step * (i + 1) for i in range(n))


def _phi(z: float) -> float:
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


class Hist:
    """One cumulative histogram: bucket counts (non-cumulative inside), count and sum."""

    __slots__ = ("bounds", "counts", "total", "sum")

    def __init__(self, bounds) -> None:
        self.bounds = tuple(float(b) for b in bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # last: above every bound (+Inf)
        self.total = 0
        self.sum = 0.0

    def add(self, x: float) -> None:
        """One observation."""
        self.counts[bisect.bisect_left(self.bounds, x)] += 1
        self.sum += x
        self.total += 1

    def observe(self, rng: random.Random, n: int, median: float, sigma: float) -> None:
        """Add ``n`` observations around ``median`` (lognormal, spread ``sigma``)."""
        n = int(n)
        if n <= 0:
            return
        median = max(median, 1e-9)
        sigma = max(sigma, 1e-3)
        if n <= 48:
            for _ in range(n):
                x = median * math.exp(sigma * rng.gauss(0.0, 1.0))
                self.counts[bisect.bisect_left(self.bounds, x)] += 1
                self.sum += x
        else:
            ln_m = math.log(median)
            cdf_prev, shares = 0.0, []
            for b in self.bounds:
                c = _phi((math.log(b) - ln_m) / sigma)
                shares.append(c - cdf_prev)
                cdf_prev = c
            shares.append(1.0 - cdf_prev)
            exact = [n * s for s in shares]
            whole = [int(x) for x in exact]
            left = n - sum(whole)
            order = sorted(range(len(exact)), key=lambda i: exact[i] - whole[i], reverse=True)
            for i in order[:left]:
                whole[i] += 1
            for i, w in enumerate(whole):
                self.counts[i] += w
            self.sum += n * median * math.exp(sigma * sigma / 2.0)
        self.total += n

    def cumulative(self) -> tuple[tuple[float, float], ...]:
        out, acc = [], 0
        for b, c in zip(self.bounds, self.counts):
            acc += c
            out.append((b, float(acc)))
        out.append((math.inf, float(self.total)))
        return tuple(out)
