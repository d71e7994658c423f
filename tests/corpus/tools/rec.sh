#!/bin/bash
# usage: rec.sh NAME PORT DURATION LEADIN -- ONSET-COMMAND...
# Starts `infertop record` (background), waits LEADIN s (calm lead-in), writes the onset
# wall-clock time to NAME.onset (epoch seconds), runs ONSET-COMMAND (foreground, must be
# bounded), then waits for the recorder to finish.
set -u
NAME=$1 PORT=$2 DUR=$3 LEAD=$4; shift 5
OUT=/work/corpus-out
IT=/work/corpus/.venv/bin/infertop
cd "$OUT"
rm -f "$NAME.jsonl.gz"
date +%s.%N > "$NAME.recstart"
$IT record -o "$NAME.jsonl.gz" --duration "$DUR" --no-gpu --url "http://127.0.0.1:$PORT" \
  > "logs/$NAME.record.log" 2>&1 &
RPID=$!
echo "recorder pid $RPID" >&2
sleep "$LEAD"
date +%s.%N > "$NAME.onset"
echo "onset $(cat $NAME.onset)" >&2
"$@" 2>&1 | tee "logs/$NAME.onset-cmd.log"
wait $RPID
echo "recorder rc $?" >&2
ls -l "$NAME.jsonl.gz"
