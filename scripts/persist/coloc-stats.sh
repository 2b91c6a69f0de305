#!/usr/bin/env bash
# always (or POLICY) co-located as users run it: the server with its defaults (EXTRA for more flags,
# e.g. "--shards 2"), the load generator unpinned and sleeping in epoll; INFO deltas over 3 s.
BIN=${BIN:-target/release/directkv}
D=$(mktemp -d /tmp/cs.XXXX); PORT=$((20000 + RANDOM % 10000))
$BIN serve --port $PORT --memcache-port 0 --ocsm no --udp no --metrics-port 0 --appendonly yes --appendfsync ${POLICY:-always} --dir $D $EXTRA >/dev/null 2>&1 &
PID=$!; sleep 1
$BIN bench run --target resp://127.0.0.1:$PORT --workload ycsb-a --keys 1000000 --connections 4 --depth 64 --seconds 1 --warmup 0 --no-busy-poll --json >/dev/null
st() { redis-cli -p $PORT info all | grep -E '^(aof_fsyncs|aof_fsync_us|aof_sync_rounds|aof_sync_round_asks|aof_group_commit_waits|aof_group_commit_timeouts|aof_records|busy_poll_backoffs):' | tr -d '\r'; }
st > $D.0
c0=$(awk '{print $14+$15}' /proc/$PID/stat)
res=$($BIN bench run --target resp://127.0.0.1:$PORT --workload ycsb-a --keys 1000000 --skip-load --connections 4 --depth 64 --seconds 3 --warmup 0 --no-busy-poll --json)
c1=$(awk '{print $14+$15}' /proc/$PID/stat)
st > $D.1
ops=$(echo "$res" | python3 -c "import json,sys; r=json.load(sys.stdin)['runs'][0]; print(r['ops'], r['ops_per_sec'])")
echo "ops ops/s: $ops  cpu_ticks: $((c1-c0))"
paste -d' ' $D.0 $D.1 | awk -F'[: ]' '{printf "%s %d\n", $1, $4-$2}' | tr '\n' ' '; echo
kill $PID; wait $PID 2>/dev/null; rm -rf $D $D.0 $D.1
