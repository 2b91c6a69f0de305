#!/usr/bin/env bash
# The restart a CPU-budgeted automatic snapshot costs: YCSB-A at depth 64 on 1 M keys (one
# shard, bench compare's compact arena, everysec) for SECS seconds, kill -9, restart; prints the
# logs' size at the kill and the server's own recovery line (keys, records replayed, time).
# usage: [BIN=...] [SECS=6] [X="--auto-snapshot-cpu-percent 0"] bash scripts/persist/restart-long-log.sh
set -uo pipefail
BIN=${BIN:-target/release/directkv}
D=$(mktemp -d /tmp/rl.XXXX); PORT=$((20000 + RANDOM % 10000))
serve() {
  taskset -c 1 $BIN serve --port $PORT --memcache-port 0 --ocsm no --udp no --metrics-port 0 --shards 1 \
    --memory 26666666 --kv-size 16 --utilization 0.6 --appendonly yes --dir $D ${X:-} >>$D.log 2>&1 &
  PID=$!
}
serve; sleep 0.7
taskset -c 0 $BIN bench run --target resp://127.0.0.1:$PORT --workload ycsb-a --keys 1000000 --connections 4 --depth 64 --seconds ${SECS:-6} --warmup 0 --json >/dev/null
echo "automatic snapshots: $(redis-cli -p $PORT INFO persistence | grep -E '^snapshots_auto:' | tr -d '\r')"
kill -9 $PID; wait $PID 2>/dev/null
echo "log files at the kill: $(du -cb $D/*.dkvl | tail -1 | cut -f1) bytes; snapshots $(du -cb $D/*.dkvs 2>/dev/null | tail -1 | cut -f1) bytes"
t0=$(date +%s.%N); serve
until redis-cli -p $PORT PING 2>/dev/null | grep -q PONG; do sleep 0.01; done
t1=$(date +%s.%N)
echo "restart to first PONG: $(python3 -c "print(round($t1-$t0,3))") s"
grep -iE "recover|loaded|replay" $D.log | tail -3 | sed 's/^[^ ]* *//'
kill $PID; wait $PID 2>/dev/null; rm -rf $D $D.log
