#!/usr/bin/env bash
# Reproduces the engine figures of BENCHMARKS.md: one core (taskset -c 1), 2 GiB arena filled to
# 50% memory utilization, medians of 3 runs. Prints one JSON object per configuration to
# bench-engine.jsonl and a Markdown table to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p directkv >/dev/null
BIN=./target/release/directkv
OUT=${OUT:-bench-engine.jsonl}
MEM=${MEM:-2G}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-2}
: > "$OUT"
run() { # label, flags...
  local label=$1; shift
  taskset -c 1 $BIN bench engine --memory "$MEM" --seconds "$SECONDS_PER_RUN" --runs 3 --json "$@" \
    | python3 -c "import json,sys; d=json.load(sys.stdin); d['label']='$label'; d['flags']='$*'; print(json.dumps(d))" >> "$OUT"
}
run "10B get uniform"          --workload get --dist uniform
run "10B get zipf"             --workload get --dist zipf
run "10B get ycsb-zipf"        --workload get --dist ycsb-zipf
run "10B put uniform"          --workload put --dist uniform
run "10B mixed-a uniform"      --workload mixed-a --dist uniform
run "10B mixed-b ycsb-zipf"    --workload mixed-b --dist ycsb-zipf
run "10B atomic-single forward" --workload atomic-single --mode forward
run "10B atomic-single stall"  --workload atomic-single --mode stall
run "10B atomic-zipf forward"  --workload atomic-zipf --dist zipf --mode forward
run "10B atomic-zipf stall"    --workload atomic-zipf --dist zipf --mode stall
# 8 + 8 bytes: three per bucket since inline key-values are byte-packed (BENCHMARKS.md).
run "16B get uniform"          --workload get --key-size 8 --value-size 8
run "16B put uniform"          --workload put --key-size 8 --value-size 8
run "254B get uniform"         --workload get --key-size 8 --value-size 246
run "254B put uniform"         --workload put --key-size 8 --value-size 246
run "64B vector uniform"       --workload vector --key-size 8 --value-size 64
python3 - "$OUT" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| configuration | ops/s (median) | line reads/s (median) | ops per line read | accesses/op | lines/op | forwarded | utilization | runs (ops/s) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
for d in rows:
    runs = ", ".join(f"{r['ops_per_sec']/1e6:.2f}M" for r in d["runs"])
    print(f"| {d['label']} | {d['ops_per_sec']/1e6:.2f} M | {d['line_reads_per_sec']/1e6:.1f} M | {d['ops_per_line_read']:.3f} | "
          f"{d['accesses_per_op']:.3f} | {d['lines_per_op']:.3f} | {d['forwarded_share']:.3f} | {d['memory_utilization']:.3f} | {runs} |")
PY
