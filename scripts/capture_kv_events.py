#!/usr/bin/env python3
"""Record a vLLM KV-cache event stream (ZMQ SUB) as JSON lines, for test fixtures.

Each line: {"t": receive time, "topic": str, "seq": int, "payload": base64 of the msgpack
batch}: the frames exactly as vLLM's ZmqEventPublisher sent them.
usage: capture_kv_events.py tcp://127.0.0.1:5557 OUT.jsonl [--seconds S] [--max N]
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("endpoint")
    ap.add_argument("out")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--max", type=int, default=5000, help="stop after this many messages")
    a = ap.parse_args()
    import zmq
    ctx = zmq.Context()
    sock = ctx.socket(zmq.SUB)
    sock.setsockopt(zmq.SUBSCRIBE, b"")
    sock.connect(a.endpoint)
    n = 0
    deadline = time.monotonic() + a.seconds
    with open(a.out, "w") as fh:
        while time.monotonic() < deadline and n < a.max:
            if not sock.poll(200):
                continue
            frames = sock.recv_multipart()
            if len(frames) != 3:
                continue
            topic, seq, payload = frames
            fh.write(json.dumps({"t": round(time.time(), 3),
                                 "topic": topic.decode("utf-8", "replace"),
                                 "seq": int.from_bytes(seq, "big", signed=True),
                                 "payload": base64.b64encode(payload).decode()}) + "\n")
            n += 1
    sock.close(linger=0)
    ctx.term()
    print(f"capture_kv_events: {n} messages to {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
