#!/usr/bin/env bash
# perf profile of directkv serve with log on (everysec) under ycsb-a 4 conns depth 64.
# usage: [SIZING=...] [POLICY=everysec] [EXTRA=...] bash scripts/persist/perf-log.sh BIN APPENDONLY(yes|no) OUT
set -euo pipefail
BIN=$1; AO=$2; OUT=$3
D=$(mktemp -d /tmp/perflog.XXXX)
PORT=$((20000 + RANDOM % 10000))
taskset -c 1 $BIN serve --port $PORT --memcache-port 0 --ocsm no --udp no --shards 1 ${SIZING:---memory 268435456} --appendonly $AO --appendfsync ${POLICY:-everysec} --metrics-port 0 --dir $D ${EXTRA:-} >/tmp/perf-serve.log 2>&1 &
PID=$!
sleep 1
taskset -c 0 $BIN bench run --target resp://127.0.0.1:$PORT --workload ycsb-a --keys 1000000 --connections 4 --depth 64 --seconds 2 --warmup 1 --json > /dev/null
perf record -g -o $OUT -p $PID -- sleep 4 >/dev/null 2>&1 &
PP=$!
taskset -c 0 $BIN bench run --target resp://127.0.0.1:$PORT --workload ycsb-a --keys 1000000 --connections 4 --depth 64 --seconds 3 --warmup 0 --skip-load --json
wait $PP || true
kill $PID; wait $PID || true
rm -rf $D
