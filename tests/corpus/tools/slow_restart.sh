#!/bin/bash
# slow_restart.sh NAME PORT ROOT : record a real vLLM restart that takes minutes (issue 21).
# The server (scripts/realserver/recipe-vllm.sh PORT ROOT) must already answer on PORT.
#   1. `infertop record` starts first (a busy vLLM starves processes started later);
#   2. 15 s calm, then 40 s of closed-loop load (scripts/loadgen.py, loopback only);
#   3. SIGTERM to the API server (its EngineCore and Worker exit with it), 20 s down (a
#      supervisor's back-off), then the same recipe again, which returns once /health
#      answers: the outage is longer than History's expire_after (120 s);
#   4. 40 s of load on the new server, 10 s calm, then SIGTERM to the recorder.
# Times (epoch seconds) go to NAME.times: kill, restart, healthy.
set -u
NAME=$1 PORT=$2 ROOT=$3
HERE=$(cd "$(dirname "$0")/../../.." && pwd)
IT=$HERE/.venv/bin/infertop
OUT=${OUT:-/work/w21-rec}
cd "$OUT"
rm -f "$NAME.jsonl.gz" "$NAME.times"
$IT record -o "$NAME.jsonl.gz" --no-gpu --url "http://127.0.0.1:$PORT" \
  > "logs/$NAME.record.log" 2>&1 &
RPID=$!
sleep 15
python3 "$HERE/scripts/loadgen.py" --url "http://127.0.0.1:$PORT" --concurrency 2 \
  --seconds 40 --max-requests 100000 --max-tokens 32
API=$(ss -ltnpH "sport = :$PORT" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2)
echo "kill $(date +%s.%N) api $API" | tee -a "$NAME.times"
kill -TERM "$API"
sleep 20
echo "restart $(date +%s.%N)" | tee -a "$NAME.times"
NEWPID=$(bash "$HERE/scripts/realserver/recipe-vllm.sh" "$PORT" "$ROOT" 2>"logs/$NAME.recipe.log" | tail -1)
# on a loaded box the recipe may give up waiting (5 min) while the server still starts
for _ in $(seq 1 900); do
  curl -sf -m 2 "http://127.0.0.1:$PORT/health" >/dev/null && break
  sleep 1
done
echo "healthy $(date +%s.%N) pid $NEWPID" | tee -a "$NAME.times"
python3 "$HERE/scripts/loadgen.py" --url "http://127.0.0.1:$PORT" --concurrency 2 \
  --seconds 40 --max-requests 100000 --max-tokens 32
sleep 10
kill -TERM "$RPID"; wait "$RPID"
echo "recorder rc $?"
ls -l "$NAME.jsonl.gz"
