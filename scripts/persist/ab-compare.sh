#!/usr/bin/env bash
# A/B of the everysec target (directkv-aof / directkv-resp of one `bench compare` run) for two
# builds, alternating the builds and the two seat orders; prints one line per run.
# usage: OLD=/tmp/dkv-old NEW=/tmp/dkv-new [R=6] [POLICY=everysec] [EXTRA="--seconds 30"] bash scripts/persist/ab-compare.sh
set -uo pipefail
R=${R:-6}
for r in $(seq 1 $R); do for b in old new; do
  BIN=${OLD:-/tmp/dkv-old}; [ $b = new ] && BIN=${NEW:-/tmp/dkv-new}
  T=directkv-resp,directkv-aof; [ $((r % 2)) = 0 ] && T=directkv-aof,directkv-resp
  out=$($BIN bench compare --workload ycsb-a --keys 1000000 --depth 64 --connections 4 --targets $T \
    --appendfsync ${POLICY:-everysec} --no-echo-reference ${EXTRA:-} 2>&1 | grep -E "^(directkv-resp|directkv-aof) ")
  m=$(echo "$out" | awk '$1=="directkv-resp"{print $2}'); a=$(echo "$out" | awk '$1=="directkv-aof"{print $2}')
  echo "$r $b mem=$m aof=$a ratio=$(python3 -c "print(round($a/$m,3))")"
done; done
