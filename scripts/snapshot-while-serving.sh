#!/bin/bash
# YCSB-A (1 M 8+8 keys, 2 connections, depth 64) against directkv (2 shards, appendonly yes,
# everysec), alternating 3 runs without and 3 with BGSAVE issued every 150 ms (a new round as
# soon as the last ends); RSS sampled every 20 ms during the runs.
BIN=${BIN:-target/ci/directkv}; P=${PORT:-17451}; D=$(mktemp -d); rm -rf $D
$BIN serve --port $P --dir $D --appendonly yes --shards 2 --auto-snapshot-log-bytes 0 --metrics no --memcache-port 0 > $D.server3.log 2>&1 &
SP=$!
for i in $(seq 100); do redis-cli -p $P ping >/dev/null 2>&1 && break; sleep 0.1; done
$BIN bench run --target resp://127.0.0.1:$P --workload ycsb-a --keys 1000000 --seconds 1 --warmup 0 --json > /dev/null 2>&1
rssloop() { local peak=0 r; while [ ! -f $D.stop ]; do r=$(awk '/VmRSS/{print $2}' /proc/$SP/status); [ "$r" -gt "$peak" ] && peak=$r; sleep 0.02; done; echo $peak > $D.peak; }
run() { $BIN bench run --target resp://127.0.0.1:$P --workload ycsb-a --keys 1000000 --skip-load --seconds 5 --warmup 1 --connections 2 --json 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin)['runs'][0]; print(round(d['ops_per_sec']), d['latency']['p99_us'])"; }
for round in 1 2 3; do
  # The sampler is this shell's child: stop it and wait for its peak here, not inside a
  # $(...) subshell (which cannot wait for it and would read the previous round's peak).
  rm -f $D.stop $D.peak; rssloop & RL=$!
  r=$(run); touch $D.stop; wait $RL
  echo "without $r peak_rss_kb $(cat $D.peak)"
  rm -f $D.stop $D.peak; rssloop & RL=$!
  ( while [ ! -f $D.stopbg ]; do redis-cli -p $P bgsave >/dev/null; sleep 0.15; done ) & L=$!
  s0=$(redis-cli -p $P info persistence | grep rdb_saves | tr -d '\r')
  r=$(run); touch $D.stop; wait $RL
  echo "with $r peak_rss_kb $(cat $D.peak) $s0 -> $(redis-cli -p $P info persistence | grep rdb_saves | tr -d '\r')"
  touch $D.stopbg; wait $L; rm -f $D.stopbg
done
redis-cli -p $P info persistence | grep -E "rdb_|snapshot" | tr -d '\r'
redis-cli -p $P info memory | grep -E "used_memory:|arena|maxmemory:" | tr -d '\r'
kill $SP; wait $SP
rm -rf $D $D.*
