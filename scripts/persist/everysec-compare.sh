#!/usr/bin/env bash
BIN=${BIN:-target/release/directkv}
for T in directkv-resp,directkv-aof,redis-aof,redis redis,redis-aof,directkv-aof,directkv-resp directkv-aof,directkv-resp,redis,redis-aof; do
  $BIN bench compare --workload ycsb-a --keys 1000000 --depth 64 --connections 4 --targets $T --appendfsync everysec --no-echo-reference 2>&1 | grep -E "^(directkv-resp|directkv-aof|redis-aof|redis) "
  echo
done
