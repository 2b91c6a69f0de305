#!/usr/bin/env bash
# directkv vs redis-server over RESP with redis-benchmark, the way issue 3 asks: each server
# pinned to core 1, redis-benchmark on core 0, pipeline 64, SET and GET on 100k random keys.
# Reports requests/s and server CPU microseconds per request (from /proc/PID/stat) for each,
# three runs, to stdout as a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p directkv >/dev/null
N=${N:-2000000}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
bench() { # pid port test
  local before after out
  before=$(cpu_ticks "$1")
  out=$(taskset -c 0 timeout 300 redis-benchmark -p "$2" -t "$3" -P 64 -r 100000 -n "$N" -q 2>/dev/null | tr '\r' '\n' | grep "requests per second" | tail -1)
  after=$(cpu_ticks "$1")
  local rps; rps=$(echo "$out" | awk '{print $2}')
  local hz; hz=$(getconf CLK_TCK)
  python3 -c "print(f'{float(\"$rps\"):.0f} {($after-$before)/$hz*1e6/$N:.3f}')"
}
echo "| server | test | run | requests/s | server CPU us/request |"
echo "|---|---|---:|---:|---:|"
for run in 1 2 3; do
  taskset -c 1 ./target/release/directkv serve --port 7481 --shards 1 --memory 1G 2>/dev/null &
  DKV=$!
  taskset -c 1 redis-server --port 7482 --save '' --appendonly no >/dev/null &
  RDS=$!
  sleep 1
  for t in set get; do
    read -r a b <<<"$(bench $DKV 7481 $t)"; echo "| directkv | $t | $run | $a | $b |"
    read -r a b <<<"$(bench $RDS 7482 $t)"; echo "| redis-server | $t | $run | $a | $b |"
  done
  kill $DKV $RDS; wait $DKV $RDS 2>/dev/null || true
done
