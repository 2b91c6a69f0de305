#!/usr/bin/env bash
# Start-up cost of a fresh server (issue 20 item 6): starts `BIN serve --shards 1 --memory 1G
# [FLAGS]`, reports the time until PING answers and VmRSS then, times two runs of
# `redis-benchmark -c 50 -n 20000 -t set -r 1000000` (random keys: each touches index pages
# for the first time in the first run), and the server's CPU ticks; stops the server by PID.
#   scripts/startup-faults.sh target/release/directkv [--prefault-index no]
set -euo pipefail
BIN=${1:?usage: startup-faults.sh BIN [serve flags]}
shift
PORT=${PORT:-$((20000 + RANDOM % 20000))}
t0=$(date +%s.%N)
"$BIN" serve --port "$PORT" --shards 1 --memory 1G --metrics-port 0 --ocsm-port 0 "$@" 2>/dev/null &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null || true' EXIT
for _ in $(seq 1 1000); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.01; done
t1=$(date +%s.%N)
line="start_s=$(echo "$t1 - $t0" | bc) rss_start_kB=$(awk '/VmRSS/{print $2}' /proc/$PID/status)"
for i in 1 2; do
  s=$(date +%s.%N)
  redis-benchmark -p "$PORT" -c 50 -n 20000 -t set -r 1000000 -q >/dev/null 2>&1
  e=$(date +%s.%N)
  line="$line run${i}_rps=$(echo "20000 / ($e - $s)" | bc)"
done
echo "$line rss_end_kB=$(awk '/VmRSS/{print $2}' /proc/$PID/status) cpu_ticks=$(awk '{print $14+$15}' /proc/$PID/stat)"
