#!/usr/bin/env bash
# issue 22: what an fdatasync costs when its core halts during the wait, against one whose core
# is kept busy (a thread on the same core calling sched_yield, as a polling shard does): the
# fsync probe (write + fdatasync back to back, core 1) and the echo pair with a log (`bench
# loopback --fsync-dir`: a server doing nothing but the group commit of 4 connections x 64 RESP
# YCSB-A operations), each alone and beside the spinner, ROUNDS times alternated.
BIN=${BIN:-target/release/directkv}
ROUNDS=${ROUNDS:-2}
spin() { taskset -c 1 python3 -c "
import os, time
t = time.time()
while time.time() - t < $1: os.sched_yield()" & }
echo_log() { $BIN bench loopback --seconds 3 --request-bytes 2176 --response-bytes 608 --fsync-dir /tmp --record-bytes 665 --json \
  | python3 -c "import json,sys; e=json.load(sys.stdin); print('%.2f M ops/s, fdatasync mean %.0f us' % (e['ops_per_sec']/1e6, e['echo']['fsync_mean_us']))"; }
for _ in $(seq 1 "$ROUNDS"); do
  echo "probe alone:        $(taskset -c 1 python3 scripts/fsync-probe.py /tmp 3)"
  spin 3.5; sleep 0.2
  echo "probe beside a spin: $(taskset -c 1 python3 scripts/fsync-probe.py /tmp 3)"; wait
  echo "echo+log alone:        $(echo_log)"
  spin 4; sleep 0.2
  echo "echo+log beside a spin: $(echo_log)"; wait
done
