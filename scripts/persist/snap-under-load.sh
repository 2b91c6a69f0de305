#!/usr/bin/env bash
BIN=${BIN:-target/release/directkv}
D=$(mktemp -d /tmp/as.XXXX); PORT=$((20000 + RANDOM % 10000))
taskset -c 1 $BIN serve --port $PORT --memcache-port 0 --ocsm no --udp no --shards 1 ${SIZING:---memory 268435456} --appendonly yes --appendfsync everysec --dir $D $EXTRA > /tmp/serve-es.log 2>&1 &
PID=$!; sleep 0.7
taskset -c 0 $BIN bench run --target resp://127.0.0.1:$PORT --workload ycsb-a --keys 1000000 --connections 4 --depth 64 --seconds 1 --warmup 0 --json >/dev/null
taskset -c 0 $BIN bench run --target resp://127.0.0.1:$PORT --workload ycsb-a --keys 1000000 --skip-load --connections 4 --depth 64 --seconds ${SECS:-10} --warmup 0 --json | python3 -c "import json,sys; r=json.load(sys.stdin)['runs'][0]; print(int(r['ops_per_sec']))"
redis-cli -p $PORT info all | grep -E "snapshot|rdb_" | tr -d '\r' | grep -v "^#" | head -30
kill $PID; wait $PID; grep -E "snapshot written" /tmp/serve-es.log | sed 's/.*snapshot written//' ; rm -rf $D
