#!/usr/bin/env bash
# issue 22 always target: 3 rounds, seats rotated, fsync probe before each
BIN=${BIN:-target/release/directkv}

for T in directkv-resp,directkv-aof,redis-aof redis-aof,directkv-resp,directkv-aof directkv-aof,redis-aof,directkv-resp; do
  python3 scripts/fsync-probe.py /tmp 2
  $BIN bench compare --workload ycsb-a --keys 1000000 --depth 64 --connections 4 --targets $T --appendfsync always --no-echo-reference 2>&1 | grep -E "^(directkv-resp|directkv-aof|redis-aof) "
done
python3 scripts/fsync-probe.py /tmp 2
