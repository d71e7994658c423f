#!/usr/bin/env python3
"""Bounded loopback-only load for an OpenAI-compatible server (vLLM / llama-server).

Closed loop: N workers each send a request, wait for it (or abort it), send the next,
until --seconds pass or --max-requests are sent.  Options:
  --prompt-words W      prompt length in words (long prompts -> KV pressure)
  --stream              stream the response (SSE)
  --abort-after K       with --stream: drop the connection after K data chunks (client abort)
  --think S             sleep S seconds between a worker's requests (light load)
Prints a one-line summary (sent, ok, aborted, errors, mean/max TTFT of streamed requests).
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import sys
import threading
import time
from urllib.parse import urlparse

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "lambda", "sigma", "omega", "river", "stone", "cloud", "light", "metal", "paper", "engine", "window", "garden", "number", "letter", "system", "network"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8100")
    ap.add_argument("--model", default="tiny-llama")
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--max-requests", type=int, default=2000)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--prompt-words", type=int, default=20)
    ap.add_argument("--stream", action="store_true")
    ap.add_argument("--abort-after", type=int, default=0)
    ap.add_argument("--think", type=float, default=0.0)
    ap.add_argument("--timeout", type=float, default=60)
    a = ap.parse_args()
    u = urlparse(a.url)
    host = u.hostname or ""
    if not (host.startswith("127.") or host in ("localhost", "::1")):
        print("load: loopback targets only", file=sys.stderr)
        return 2
    port = u.port or 80
    deadline = time.monotonic() + min(a.seconds, 600)
    st = {"sent": 0, "ok": 0, "aborted": 0, "errors": 0}
    ttfts: list[float] = []
    lock = threading.Lock()

    def one(n: int) -> None:
        rnd = random.Random(n)
        prompt = f"request {n}: " + " ".join(rnd.choice(WORDS) for _ in range(a.prompt_words))
        body = {"model": a.model, "prompt": prompt, "max_tokens": a.max_tokens,
                "temperature": 1.0, "ignore_eos": True}
        if a.stream:
            body["stream"] = True
        conn = http.client.HTTPConnection(host, port, timeout=a.timeout)
        try:
            t0 = time.monotonic()
            conn.request("POST", "/v1/completions", json.dumps(body).encode(),
                         {"Content-Type": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                resp.read()
                raise RuntimeError(f"HTTP {resp.status}")
            if not a.stream:
                resp.read()
                with lock:
                    st["ok"] += 1
                return
            chunks = 0
            while True:
                line = resp.readline()
                if not line:
                    break
                if line.startswith(b"data:"):
                    if line.strip() == b"data: [DONE]":
                        break
                    chunks += 1
                    if chunks == 1:
                        with lock:
                            ttfts.append(time.monotonic() - t0)
                    if a.abort_after and chunks >= a.abort_after:
                        # drop the TCP connection mid-stream: the server sees a client abort
                        conn.sock.close()
                        with lock:
                            st["aborted"] += 1
                        return
            with lock:
                st["ok"] += 1
        finally:
            conn.close()

    def worker() -> None:
        while time.monotonic() < deadline:
            with lock:
                if st["sent"] >= a.max_requests:
                    return
                st["sent"] += 1
                n = st["sent"]
            try:
                one(n)
            except Exception:
                with lock:
                    st["errors"] += 1
                time.sleep(0.5)
            if a.think:
                time.sleep(a.think)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(a.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()) + a.timeout + 5)
    tt = (f" ttft mean {sum(ttfts)/len(ttfts):.3f}s max {max(ttfts):.3f}s (n={len(ttfts)})"
          if ttfts else "")
    print(f"load: sent {st['sent']} ok {st['ok']} aborted {st['aborted']} "
          f"errors {st['errors']}{tt}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
