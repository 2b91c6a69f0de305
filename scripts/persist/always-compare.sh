#!/usr/bin/env bash
# issue 22 always target: 3 rounds, seats rotated; before each round and after the last, the
# machine's bounds in the same run: the fsync probe (write + fdatasync alone) and the echo pair
# with a log (`bench loopback --fsync-dir`: a server doing nothing but one fdatasync per round of
# the 4 connections' batches, RESP YCSB-A batch sizes at depth 64, directkv's ~665-byte record
# per batch).
BIN=${BIN:-target/release/directkv}

bounds() {
  python3 scripts/fsync-probe.py /tmp 2
  $BIN bench loopback --seconds 3 --fsync-dir /tmp --request-bytes 2176 --response-bytes 608 --record-bytes 665
}
for T in directkv-resp,directkv-aof,redis-aof redis-aof,directkv-resp,directkv-aof directkv-aof,redis-aof,directkv-resp; do
  bounds
  $BIN bench compare --workload ycsb-a --keys 1000000 --depth 64 --connections 4 --targets $T --appendfsync always --no-echo-reference 2>&1 | grep -E "^(directkv-resp|directkv-aof|redis-aof) "
done
bounds
