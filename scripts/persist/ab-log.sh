#!/usr/bin/env bash
# A/B of log modes: ROUNDS x MODES ; ycsb-a 1M keys 4 conns depth 64, pinned. Prints k ops/s and server CPU us/op.
# MODES: mem (appendonly no), aof (this build), base ($BASE, another build, for A/B), nosnap (automatic snapshots off), pctN (--auto-snapshot-cpu-percent N); SIZING, POLICY, BP, SECS, CONNS as read below.
set -uo pipefail
BIN=${BIN:-target/release/directkv}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-4}
MODES=${MODES:-"mem base aof"}
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
for r in $(seq 1 $ROUNDS); do
  line="round $r:"
  for m in $MODES; do
    D=$(mktemp -d /tmp/ab.XXXX); PORT=$((20000 + RANDOM % 10000))
    AO=yes; B=$BIN
    [ $m = mem ] && AO=no
    [ $m = base ] && B=${BASE:-target-base/release/directkv}
    X=""; [ $m = nosnap ] && X="--auto-snapshot-log-bytes 0"; [ $m = snap256 ] && X="--auto-snapshot-log-bytes 268435456"; [[ $m == pct* ]] && X="--auto-snapshot-cpu-percent ${m#pct}"
    taskset -c 1 $B serve --port $PORT --memcache-port 0 --ocsm no --udp no --shards 1 ${SIZING:---memory 268435456} --appendonly $AO --appendfsync ${POLICY:-everysec} --dir $D --busy-poll-us ${BP:-50} $X >${SERVE_LOG:-/dev/null} 2>&1 &
    PID=$!; sleep 0.7
    taskset -c 0 $BIN bench run --target resp://127.0.0.1:$PORT --workload ycsb-a --keys 1000000 --connections $CONNS --depth 64 --seconds 1 --warmup 0 --json >/dev/null
    c0=$(cpu $PID)
    res=$(taskset -c 0 $BIN bench run --target resp://127.0.0.1:$PORT --workload ycsb-a --keys 1000000 --skip-load --connections $CONNS --depth 64 --seconds ${SECS:-4} --warmup 0 --json)
    c1=$(cpu $PID)
    out=$(echo "$res" | python3 -c "import json,sys; r=json.load(sys.stdin)['runs'][0]; print('%dk/%.3fus' % (r['ops_per_sec']/1000, ($c1-$c0)*10000.0/r['ops']))")
    kill $PID; wait $PID 2>/dev/null; rm -rf $D
    line="$line $m=$out"
  done
  echo "$line"
done
