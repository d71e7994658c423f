#!/usr/bin/env bash
# End to end against a REAL vLLM (CPU build) serving a tiny generated model:
# start it with scripts/realserver/recipe-vllm.sh (or reuse one already healthy on
# $PORT), load it with 8 concurrent requests, run `infertop snapshot --json` and check
# that the process tree (API server, EngineCore, Worker), running/waiting, KV usage,
# token rates and TTFT quantiles were read.  Prints the snapshot summary.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${PORT:-8011}
ROOT=${E2E_ROOT:-${TMPDIR:-/tmp}/infertop-realserver}
RECIPE=${RECIPE:-scripts/realserver/recipe-vllm.sh}
BIN=${BIN:-.venv/bin}
URL=http://127.0.0.1:$PORT
OUT=${E2E_OUT:-.e2e}
mkdir -p "$OUT"
started=""
if ! curl -sf "$URL/health" >/dev/null 2>&1; then
  echo "e2e: starting vLLM with $RECIPE on port $PORT (first time: ~7 min install)" >&2
  pid=$(bash "$RECIPE" "$PORT" "$ROOT" | tail -1)
  started=$pid
fi
cleanup() { [ -n "$started" ] && kill "$started" 2>/dev/null || true; }
trap cleanup EXIT

"$BIN/python" scripts/loadgen.py --url "$URL" --concurrency 8 --seconds 25 --max-tokens 300 &
load=$!
sleep 4   # let the batch fill before sampling
"$BIN/infertop" snapshot --json --url "$URL" --window 6 > "$OUT/snapshot.json"
"$BIN/infertop" doctor --url "$URL" --duration 8 --format text > "$OUT/doctor.txt" || echo "doctor exit $?" >> "$OUT/doctor.txt"
wait $load || true
"$BIN/python" scripts/e2e_check.py "$OUT/snapshot.json"
echo "--- doctor under load ---"
cat "$OUT/doctor.txt"
