#!/usr/bin/env bash
# The Rust client's own cost: closed-loop GET batches through `directkv-client` (examples/
# throughput.rs) against the same batches written with the codec on a plain blocking socket
# (examples/rtt_baseline.rs), alternating, against one server. Server pinned to core 1 (one
# shard), load on core 0, 100k 8-byte keys. Run under the bench lock on a shared machine:
#   flock /tmp/directkv-bench.lock scripts/bench-client.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p directkv -p directkv-client --examples >/dev/null
PORT=${PORT:-17393}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-2}
taskset -c 1 ./target/release/directkv serve --port "$PORT" --metrics-port 0 --shards 1 --memory 256M \
  >/dev/null 2>&1 &
SRV=$!
trap 'kill $SRV; wait $SRV 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do (echo > "/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.05; done
for depth in 1 64 1024; do
  for _ in 1 2; do
    taskset -c 0 ./target/release/examples/throughput "127.0.0.1:$PORT" get "$depth" "$SECONDS_PER_RUN" 100000
    taskset -c 0 ./target/release/examples/rtt_baseline "127.0.0.1:$PORT" "$depth" "$SECONDS_PER_RUN" 100000
  done
done
