"""One engine of a simulated inference server: a queue, a batch, a KV cache, counters.

A small fluid model advanced one virtual second at a time.  Requests arrive (Poisson),
wait in a FIFO queue, are admitted under the scheduler cap, the KV-cache room and the
prefill budget, decode at a speed set by the batch and the slowest GPU of the engine, and
finish (stop/length/abort/error).  A request's prompt length, queue time and prefill time
are drawn together, so TTFT, queue time and prompt length agree the way a real server's
histograms do; a full KV cache preempts requests back to the front of the queue.

Counters only grow and histograms are cumulative (a restart is a new EngineSim).
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Mapping
from typing import Any

from infertop.demo.hist import (
    NIXL_BYTES,
    NIXL_XFER,
    VLLM_ITERATION,
    VLLM_ITL,
    VLLM_REQUEST,
    VLLM_TTFT,
    Hist,
    request_tokens_buckets,
)

DT = 1.0
FINISH_REASONS = ("stop", "length", "abort", "error")


def poisson(rng: random.Random, lam: float) -> int:
    if lam <= 0:
        return 0
    if lam < 30:
        limit, k, p = math.exp(-lam), 0, 1.0
        while True:
            p *= rng.random()
            if p <= limit:
                return k
            k += 1
    return max(0, int(round(rng.gauss(lam, math.sqrt(lam)))))


class EngineSim:
    """One engine (a DP rank): queue, batch, KV cache, counters, histograms."""

    def __init__(self, index: int, setup: Mapping[str, Any], *,
                 remote_prefill: bool = False) -> None:
        self.index = index
        # the decode instance of a disaggregated pair: a request's prompt KV arrives from
        # the prefill instance (kv_transfer_ms), it computes none of it itself
        self.remote_prefill = remote_prefill
        self.running = 0
        self._waiting = 0
        self.queue: deque = deque()   # [arrival time, count, preempted] oldest first
        self.clock = 0.0
        self.kv_capacity = float(setup["kv_capacity_tokens"])
        self.leaked = 0.0          # share of the KV cache never freed (a leak)
        self.kv_usage = 0.0
        self.admit_ema = 0.0
        self.prefill_debt = 0.0    # seconds of prefill queued on the GPU
        self._carry: dict[str, float] = {}
        self.c: dict[str, float] = {k: 0.0 for k in (
            "prompt_tokens", "prompt_cached", "generation_tokens", "preemptions",
            "prefix_queries", "prefix_hits", "engine_steps", "spec_drafts",
            "spec_draft_tokens", "spec_accepted", "prompt_seconds", "gen_seconds",
            "requests_received", "prompt_external")}
        self.finished = {r: 0.0 for r in FINISH_REASONS}
        tok = request_tokens_buckets(int(setup["max_model_len"]))
        self.h: dict[str, Hist] = {
            "ttft": Hist(VLLM_TTFT), "itl": Hist(VLLM_ITL), "tpot": Hist(VLLM_ITL),
            "e2e": Hist(VLLM_REQUEST), "queue": Hist(VLLM_REQUEST),
            "prefill": Hist(VLLM_REQUEST), "decode": Hist(VLLM_REQUEST),
            "inference": Hist(VLLM_REQUEST), "prompt_len": Hist(tok), "gen_len": Hist(tok),
            "iteration": Hist(VLLM_ITERATION),
            # disaggregated decode instance: the KV each request receives over NIXL
            "kv_xfer": Hist(NIXL_XFER), "kv_bytes": Hist(NIXL_BYTES)}
        # last tick's levels, for gauges some servers expose (rates, latencies)
        self.gen_rate = 0.0
        self.prompt_rate = 0.0
        self.hit_rate = 0.0
        self.busy = 0.0
        self.itl_s = 0.0
        self.ttft_s = 0.0
        self.spec_accept = 0.0
        self.max_tokens_seen = 0.0

    def _whole(self, name: str, x: float) -> int:
        """Whole events from a fractional expectation, carrying the remainder forward."""
        acc = self._carry.get(name, 0.0) + max(0.0, x)
        n = int(acc)
        self._carry[name] = acc - n
        return n

    @property
    def waiting(self) -> int:
        return self._waiting

    def step(self, rng: random.Random, k: Mapping[str, Any], setup: Mapping[str, Any],
             share: float, slowdown: float, lost: bool) -> None:
        self.clock += DT
        prompt = max(1.0, k["prompt_tokens"])
        gen = max(1.0, k["gen_tokens"])
        hit = k["prefix_hit"]
        arrivals = poisson(rng, k["arrival_rate"] * share * DT)
        self.c["requests_received"] += arrivals
        if lost:
            # the engine's GPU fell off the bus: every request fails, nothing decodes
            self.finished["error"] += arrivals + self._waiting
            self.queue.clear()
            self._waiting = 0
            self.gen_rate = self.prompt_rate = 0.0
            self.busy = 0.0
            return
        if arrivals:
            self.queue.append([self.clock, arrivals, False])
            self._waiting += arrivals

        # -- decode speed: batch size, speculative tokens, slowest GPU -------------------
        step_ms = (k["itl_ms"] + k["itl_batch_ms"] * self.running) * slowdown
        tokens_per_step = 1.0
        spec_k = int(setup["spec_tokens"])
        if spec_k > 0:
            step_ms *= 1.0 + 0.12 * spec_k          # drafting and verifying cost time
            accept = min(1.0, max(0.0, k["spec_acceptance"] * (1 + 0.05 * rng.gauss(0, 1))))
            tokens_per_step += spec_k * accept
            self.spec_accept = accept
        itl_s = step_ms / 1000.0 / tokens_per_step

        # -- finishing (before admission: the gauges show the batch as the step ends) ----
        req_time = gen * itl_s
        fin = self._whole("finish", self.running * min(1.0, DT / max(req_time, 1e-6)))
        fin = min(fin, self.running)
        self.running -= fin
        reasons = self._reasons(rng, fin, k)
        for r, n in reasons.items():
            self.finished[r] += n
        if reasons["abort"]:
            self.leaked = min(0.97, self.leaked + reasons["abort"] * k["kv_leak_per_abort"])

        # -- admission: scheduler cap, KV room (by prompt), prefill budget -------------
        per_req_kv = prompt + gen / 2.0
        room = self.kv_capacity * (1.0 - self.leaked)
        kv_seqs = int(room / (prompt * 1.1 + setup["block_size"]))
        slots = max(0, min(int(k["max_num_seqs"]), kv_seqs) - self.running)

        def prefill_of(p: float) -> float:
            if self.remote_prefill:   # the KV is already computed: only the first step
                return (k["itl_ms"] / 1000.0 + 0.004) * slowdown
            return (p * (1.0 - hit) / k["prefill_tok_per_s"]
                    + k["attn_quadratic"] * (p / 1000.0) ** 2 + 0.004) * slowdown

        prefill_time = prefill_of(prompt)
        budget = self._carry.get("admit", 0.0) + DT / prefill_time
        admit = max(0, min(self._waiting, slots, int(budget)))
        self._carry["admit"] = min(2.0, budget - admit) if admit or self._waiting else 0.0
        groups = self._pop(admit)     # [(seconds waited, count, was preempted)]
        self.running += admit
        self.admit_ema = 0.7 * self.admit_ema + 0.3 * admit

        # -- decode ---------------------------------------------------------------------
        steps = (DT / (step_ms / 1000.0)) if self.running else float(admit)
        n_steps = self._whole("steps", steps)
        decode_tokens = self._whole("gen", self.running * n_steps * tokens_per_step)

        # -- KV pressure: decode grows every request's KV; over capacity -> preempt ------
        preempt = 0
        demand = self.running * per_req_kv
        room = self.kv_capacity * (1.0 - self.leaked)
        if demand > room and self.running:
            preempt = min(self.running, math.ceil((demand - room) / per_req_kv))
            self.running -= preempt
            # preempted requests go back to the front of the queue (recomputed later)
            self.queue.appendleft([self.clock, preempt, True])
            self._waiting += preempt
        self.kv_usage = min(1.0, self.running * per_req_kv / self.kv_capacity + self.leaked)

        # -- first tokens: each new request's prompt, queue time and prefill, together -----
        h = self.h
        new_prompt = 0.0
        ttft_sum = 0.0
        prefill_work = 0.0
        n_new = sum(n for _, n, pre in groups if not pre)
        xfer_s = k["kv_transfer_ms"] / 1000.0
        kv_per_token = float(setup["kv_bytes_per_token"])
        per_request = n_new <= 48
        for waited, n, pre in groups:
            if pre:
                continue
            if per_request:
                for _ in range(n):
                    q = waited + 0.002 * math.exp(0.5 * rng.gauss(0, 1)) if waited <= 0 \
                        else waited - rng.random() * DT
                    p = min(float(setup["max_model_len"]),
                            max(1.0, round(prompt * math.exp(0.3 * rng.gauss(0, 1)))))
                    pre_s = prefill_of(p) * math.exp(0.15 * rng.gauss(0, 1))
                    moved = 0.0
                    if xfer_s > 0:    # the KV arrives from the prefill instance first
                        moved = xfer_s * math.exp(0.15 * rng.gauss(0, 1))
                        h["kv_xfer"].add(moved)
                        h["kv_bytes"].add(p * kv_per_token)
                    h["queue"].add(q)
                    h["prompt_len"].add(p)
                    h["prefill"].add(pre_s)
                    h["ttft"].add(q + pre_s + moved)
                    new_prompt += p
                    ttft_sum += q + pre_s + moved
                    prefill_work += pre_s
            else:
                q = max(waited, 0.002)
                h["queue"].observe(rng, n, q, 0.6)
                h["prompt_len"].observe(rng, n, prompt, 0.3)
                h["prefill"].observe(rng, n, prefill_time, 0.3)
                moved = 0.0
                if xfer_s > 0:
                    h["kv_xfer"].observe(rng, n, xfer_s, 0.15)
                    h["kv_bytes"].observe(rng, n, prompt * kv_per_token, 0.3)
                    moved = xfer_s
                h["ttft"].observe(rng, n, q + prefill_time + moved, 0.35)
                new_prompt += n * prompt
                ttft_sum += n * (q + prefill_time + moved)
                prefill_work += n * prefill_time
        # a preempted request's prompt is computed again (it counts as prefill work)
        recompute = sum(n for _, n, pre in groups if pre) * (prompt + gen / 2.0)
        # prefill work queued on the GPU keeps it busy until it is done
        self.prefill_debt += prefill_work
        prefill_done = min(DT, self.prefill_debt)
        self.prefill_debt -= prefill_done

        # -- counters -------------------------------------------------------------------
        c = self.c
        new_prompt = round(new_prompt)
        c["prompt_tokens"] += new_prompt + round(recompute)
        if self.remote_prefill:   # every new prompt token's KV came over the wire
            c["prompt_external"] += new_prompt
        else:
            c["prompt_cached"] += round(new_prompt * hit)
            c["prefix_queries"] += new_prompt
            c["prefix_hits"] += round(new_prompt * hit)
        c["generation_tokens"] += decode_tokens
        c["preemptions"] += preempt
        c["engine_steps"] += n_steps
        c["prompt_seconds"] += prefill_work
        c["gen_seconds"] += DT if self.running else 0.0
        if spec_k > 0 and self.running:
            drafts = self.running * n_steps
            c["spec_drafts"] += drafts
            c["spec_draft_tokens"] += drafts * spec_k
            c["spec_accepted"] += round(drafts * spec_k * self.spec_accept)
        self.gen_rate = decode_tokens / DT
        self.prompt_rate = new_prompt / DT
        self.hit_rate = hit if n_new else self.hit_rate
        self.max_tokens_seen = max(self.max_tokens_seen, prompt + gen)
        self.itl_s = itl_s
        self.ttft_s = ttft_sum / n_new if n_new else self.ttft_s

        # -- the rest of the latency histograms ------------------------------------------
        h["itl"].observe(rng, decode_tokens, itl_s, k["itl_jitter"])
        h["tpot"].observe(rng, fin, itl_s, 0.1 + k["itl_jitter"] / 3)
        h["decode"].observe(rng, fin, req_time, 0.4)
        h["e2e"].observe(rng, fin, self.ttft_s + req_time, 0.4)
        h["inference"].observe(rng, fin, prefill_time + req_time, 0.4)
        h["gen_len"].observe(rng, fin, gen, 0.5)
        # most steps decode one token per running request; a step that admits a request
        # also carries its prompt (prefill chunk)
        prefill_steps = min(n_steps, admit)
        h["iteration"].observe(rng, n_steps - prefill_steps, max(1.0, self.running), 0.2)
        h["iteration"].observe(rng, prefill_steps, self.running + prompt * (1 - hit), 0.3)

        # -- how busy the engine keeps its GPUs ------------------------------------------
        decode_busy = self.running / (self.running + 6.0)
        prefill_busy = prefill_done / DT
        self.busy = min(0.98, 0.03 + 0.9 * max(decode_busy, prefill_busy)
                        + 0.1 * min(decode_busy, prefill_busy)) \
            if (self.running or prefill_done) else 0.0

    def _pop(self, n: int) -> list[tuple[float, int, bool]]:
        """Take ``n`` requests from the front of the queue: (seconds waited, count, preempted)."""
        out = []
        while n > 0 and self.queue:
            entry = self.queue[0]
            take = min(n, entry[1])
            out.append((self.clock - entry[0], take, entry[2]))
            entry[1] -= take
            n -= take
            self._waiting -= take
            if entry[1] == 0:
                self.queue.popleft()
        return out

    def _reasons(self, rng: random.Random, fin: int, k: Mapping[str, Any]) -> dict[str, int]:
        out = {r: 0 for r in FINISH_REASONS}
        if fin <= 0:
            return out
        err, abort = k["error_share"], k["abort_share"]
        if fin <= 200:
            for _ in range(fin):
                x = rng.random()
                if x < err:
                    out["error"] += 1
                elif x < err + abort:
                    out["abort"] += 1
                elif rng.random() < 0.7:
                    out["stop"] += 1
                else:
                    out["length"] += 1
        else:
            out["error"] = self._whole("err", fin * err)
            out["abort"] = self._whole("abort", fin * abort)
            rest = max(0, fin - out["error"] - out["abort"])
            out["stop"] = int(rest * 0.7)
            out["length"] = rest - out["stop"]
        return out
