#!/usr/bin/env python3
"""Check an `infertop snapshot --json` taken of a real vLLM under load; print a summary."""

from __future__ import annotations

import json
import sys


def main(path: str) -> int:
    snap = json.load(open(path))
    readings = [r for layer in snap["layers"].values() for r in layer["readings"]]

    def vals(key, **labels):
        return [r for r in readings if r["key"] == key and
                all(str(r["labels"].get(k)) == str(v) for k, v in labels.items())]

    roles = sorted({r["labels"].get("role") for r in vals("process.info")})
    checks = {
        "process tree has api_server, engine_core, worker":
            {"api_server", "engine_core", "worker"} <= set(roles),
        "server.requests_running read": any(r["value"] is not None for r in vals("server.requests_running")),
        "server.requests_waiting read": any(r["value"] is not None for r in vals("server.requests_waiting")),
        "kv.usage_ratio read": any(r["value"] is not None for r in vals("kv.usage_ratio")),
        "generation tokens/s > 0": any((r["value"] or 0) > 0 for r in vals("throughput.generation_tokens_per_second")),
        "prompt tokens/s > 0": any((r["value"] or 0) > 0 for r in vals("throughput.prompt_tokens_per_second")),
        "TTFT p50/p90/p99 present": all(any(r["value"] is not None for r in vals("latency.ttft_seconds", quantile=q))
                                        for q in ("0.5", "0.9", "0.99")),
        "thread CPU read": bool(vals("thread.cpu_ratio")),
    }
    print("sources:", {k: v["status"] for k, v in snap["sources"].items()})
    print("process roles:", roles)
    for key in ("server.requests_running", "server.requests_waiting", "kv.usage_ratio",
                "throughput.generation_tokens_per_second", "throughput.prompt_tokens_per_second"):
        print(f"{key}: {[r['value'] for r in vals(key)]}")
    for q in ("0.5", "0.9", "0.99"):
        print(f"latency.ttft_seconds q={q}: {[r['value'] for r in vals('latency.ttft_seconds', quantile=q)]}")
    top = sorted(vals("thread.cpu_ratio"), key=lambda r: -(r["value"] or 0))[:5]
    print("top threads:", [(r["labels"]["pid"], r["labels"]["name"], round(r["value"] or 0, 2)) for r in top])
    print("findings:", [f["code"] for f in snap.get("findings", [])])
    failed = [name for name, ok in checks.items() if not ok]
    for name, ok in checks.items():
        print(("PASS " if ok else "FAIL ") + name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
