#!/usr/bin/env bash
# always: server stats per op over a measured run (rounds, fsync us, asks, group waits)
BIN=${BIN:-target/release/directkv}
D=$(mktemp -d /tmp/as.XXXX); PORT=$((20000 + RANDOM % 10000))
taskset -c 1 $BIN serve --port $PORT --memcache-port 0 --ocsm no --udp no --shards 1 --memory 268435456 --appendonly yes --appendfsync ${POLICY:-always} --dir $D $EXTRA >/dev/null 2>&1 &
PID=$!; sleep 0.7
taskset -c 0 $BIN bench run --target resp://127.0.0.1:$PORT --workload ycsb-a --keys 1000000 --connections ${CONNS:-4} --depth 64 --seconds 1 --warmup 0 --json >/dev/null
st() { redis-cli -p $PORT info all | grep -E '^(aof_fsyncs|aof_fsync_us|aof_sync_rounds|aof_sync_round_asks|aof_group_commit_waits|aof_group_commit_timeouts|aof_group_commit_wait_us|aof_writes|aof_durable_waits|aof_fsync_lt_250us|aof_records|aof_written_bytes|busy_polls|busy_poll_sleeps|busy_poll_backoffs):' | tr -d '\r'; }
st > /tmp/as0
c0=$(awk '{print $14+$15}' /proc/$PID/stat)
grep -E 'voluntary' /proc/$PID/task/*/status | head -0
res=$(taskset -c 0 $BIN bench run --target resp://127.0.0.1:$PORT --workload ycsb-a --keys 1000000 --skip-load --connections ${CONNS:-4} --depth 64 --seconds 3 --warmup 0 --json)
c1=$(awk '{print $14+$15}' /proc/$PID/stat)
st > /tmp/as1
ops=$(echo "$res" | python3 -c "import json,sys; r=json.load(sys.stdin)['runs'][0]; print(r['ops'], r['ops_per_sec'])")
echo "ops ops/s: $ops  cpu_ticks: $((c1-c0))"
paste -d' ' /tmp/as0 /tmp/as1 | awk -F'[: ]' '{printf "%s %d\n", $1, $4-$2}'
for t in /proc/$PID/task/*; do echo "$(cat $t/comm) $(grep ctxt $t/status | tr '\n' ' ')"; done
kill $PID; wait $PID 2>/dev/null; rm -rf $D
