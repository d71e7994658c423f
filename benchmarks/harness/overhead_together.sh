#!/bin/bash
# CPU of terminal monitors measured side by side over the SAME wall window (a loaded box:
# the load each sees is the same), each in its own tmux server at COLSxROWS, R rounds.
# usage: overhead_together.sh SECONDS ROUNDS 'CMD A' 'CMD B' ...
# env: SIZE=160x48 (default), WARMUP=8 (seconds).  Prints per round the load average and
# each command's CPU % of one core (process + reaped children), then the medians.
set -u
secs=$1 rounds=$2; shift 2
size=${SIZE:-160x48} warm=${WARMUP:-8}
tck=$(getconf CLK_TCK)
declare -A cpu
for r in $(seq "$rounds"); do
  i=0; pids=()
  for cmd in "$@"; do
    i=$((i+1))
    tmux -L "ovt-$$-$i" new-session -d -x "${size%x*}" -y "${size#*x}" "$cmd"
  done
  sleep "$warm"
  for i in $(seq $#); do
    pid=$(tmux -L "ovt-$$-$i" list-panes -F '#{pane_pid}' | head -1)
    kid=$(pgrep -P "$pid" | head -1); [ -n "$kid" ] && pid=$kid
    pids[$i]=$pid
  done
  declare -A t0
  for i in $(seq $#); do t0[$i]=$(awk '{print $14+$15+$16+$17}' /proc/${pids[$i]}/stat); done
  sleep "$secs"
  line="round $r load $(cut -d' ' -f1-3 /proc/loadavg):"
  for i in $(seq $#); do
    t1=$(awk '{print $14+$15+$16+$17}' /proc/${pids[$i]}/stat)
    c=$(python3 -c "print(round(($t1-${t0[$i]})/$tck/$secs*100,2))")
    cpu[$i]="${cpu[$i]:-} $c"; line="$line  [$i] $c %"
  done
  echo "$line"
  for i in $(seq $#); do tmux -L "ovt-$$-$i" kill-server 2>/dev/null; done
  sleep 2
done
i=0
for cmd in "$@"; do
  i=$((i+1))
  med=$(python3 -c "import statistics,sys; print(statistics.median(map(float,sys.argv[1:])))" ${cpu[$i]})
  printf '[%d] %-72s cpu%% median %s (%s)\n' "$i" "${cmd:0:72}" "$med" "${cpu[$i]# }"
done
