#!/usr/bin/env bash
# redis-benchmark's defaults (-c 50, no pipelining) against directkv and redis-server, each
# started with its own defaults and nothing pinned, ROUNDS interleaved rounds (issue 20 item 6):
# requests/s of SET and GET and the server's CPU ticks (1/100 s) for the 2 x N requests.
#   scripts/redis-benchmark-defaults.sh BIN [BIN2 ...]
# RB_FLAGS adds redis-benchmark flags (e.g. RB_FLAGS="--threads 4" for a multi-threaded client).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: redis-benchmark-defaults.sh BIN [BIN2 ...]" >&2; exit 2; }
N=${N:-200000}
ROUNDS=${ROUNDS:-3}
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
wait_ping() { for _ in $(seq 1 1000); do redis-cli -p "$1" ping >/dev/null 2>&1 && return; sleep 0.01; done; }
bench() { # name pid port
  local c0 c1 out
  c0=$(cpu "$2")
  # shellcheck disable=SC2086 # RB_FLAGS is a list of flags
  out=$(redis-benchmark -p "$3" -c 50 -n "$N" -t set,get -q ${RB_FLAGS:-} 2>/dev/null | tr '\r' '\n' \
    | grep -a "requests per second" | awk '{printf "%s %s ", $1, $2}')
  c1=$(cpu "$2")
  echo "$1 $out server_cpu_ticks=$((c1 - c0))"
}
for _ in $(seq 1 "$ROUNDS"); do
  for b in "$@"; do
    PORT=$((20000 + RANDOM % 20000))
    "$b" serve --port "$PORT" --metrics-port 0 --ocsm-port 0 2>/dev/null &
    PID=$!
    wait_ping "$PORT"
    sleep 1 # the index pre-fault's time, as for a server started before its clients
    bench "$b" "$PID" "$PORT"
    kill "$PID"; wait "$PID" 2>/dev/null || true
  done
  PORT=$((20000 + RANDOM % 20000))
  redis-server --port "$PORT" --save '' --appendonly no >/dev/null 2>&1 &
  PID=$!
  wait_ping "$PORT"
  bench redis "$PID" "$PORT"
  kill "$PID"; wait "$PID" 2>/dev/null || true
done
