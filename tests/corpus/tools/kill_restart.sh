#!/bin/bash
# kill_restart.sh PORT DOWN_S : SIGKILL the vLLM API server listening on PORT and its whole
# process tree, stay down DOWN_S seconds, restart it with the recipe (same port/args).
PORT=$1 DOWN=$2
HERE=$(cd "$(dirname "$0")/../../.." && pwd)
API=$(ss -ltnpH "sport = :$PORT" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2)
TREE="$API $(pgrep -P $API) $(for c in $(pgrep -P $API); do pgrep -P $c; done)"
echo "kill at $(date +%s.%N): tree $TREE"
kill -KILL $TREE
sleep "$DOWN"
echo "restart at $(date +%s.%N)"
NEWPID=$(bash "$HERE/scripts/realserver/recipe-vllm.sh" $PORT /work/realserver-root 2>/dev/null | tail -1)
echo "healthy at $(date +%s.%N): new pid $NEWPID"
echo $NEWPID > /work/corpus-out/logs/vllm-$PORT.pid
