#!/usr/bin/env python3
"""Bounded load for a local OpenAI-compatible server (loopback only): N concurrent
completion requests, repeated until --seconds pass or --max-requests are sent."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import urllib.request
from urllib.parse import urlparse

# common words (one token each for most tokenizers) for the shared prefixes
WORDS = ["the", "of", "to", "and", "a", "in", "is", "that", "for", "it", "as", "with", "be", "on", "not", "this", "by", "or", "are", "from", "self", "return", "def", "if", "import", "None", "class"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8011")
    ap.add_argument("--model", default="tiny-llama")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--max-requests", type=int, default=400)
    ap.add_argument("--max-tokens", type=int, default=200)
    # shared-prefix load (KV-cache events, prefix-cache thrash): each prompt starts with
    # one of K long common prefixes, so full KV blocks repeat across requests
    ap.add_argument("--prefixes", type=int, default=0, metavar="K",
                    help="start each prompt with one of K shared prefixes (default: none)")
    ap.add_argument("--prefix-words", type=int, default=150, metavar="W",
                    help="words in each shared prefix (default 150)")
    a = ap.parse_args()
    host = urlparse(a.url).hostname or ""
    if not (host.startswith("127.") or host in ("localhost", "::1")):
        print("loadgen: loopback targets only", file=sys.stderr)
        return 2
    deadline = time.monotonic() + a.seconds
    sent = [0]
    errors = [0]
    lock = threading.Lock()

    def worker(i: int) -> None:
        while time.monotonic() < deadline:
            with lock:
                if sent[0] >= a.max_requests:
                    return
                sent[0] += 1
                n = sent[0]
            head = ""
            if a.prefixes > 0:
                k = n % a.prefixes
                head = f"topic {k}: " + " ".join(
                    WORDS[(j * (k + 3) + k) % len(WORDS)] for j in range(a.prefix_words)) + " "
            body = json.dumps({"model": a.model,
                               "prompt": head + f"request {n}: " + "hello world " * (5 + n % 40),
                               "max_tokens": a.max_tokens, "temperature": 1.0,
                               "ignore_eos": True}).encode()
            req = urllib.request.Request(a.url.rstrip("/") + "/v1/completions", body,
                                         {"Content-Type": "application/json"})
            try:
                urllib.request.urlopen(req, timeout=60).read()
            except Exception:
                with lock:
                    errors[0] += 1
                time.sleep(0.2)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(a.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(a.seconds + 65)
    print(f"loadgen: {sent[0]} requests sent, {errors[0]} errors", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
