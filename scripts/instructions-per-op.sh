#!/usr/bin/env bash
# Instructions per operation of `directkv bench engine`'s measured loop, counted by callgrind:
# exact and repeatable, unlike timings on a shared, noisy machine. Use it to compare the CPU work
# of two builds of the data path; it does not see memory stalls, so confirm a change with timed
# alternating pairs as well.
#
#   scripts/instructions-per-op.sh BIN WORKLOAD [MEMORY]     e.g. target/release/directkv get 16M
#
# Prints instructions per operation in the whole measured loop (benchmark included) and in the
# engine's execute, then the source lines costing the most instructions per operation.
# The 16 MiB default keeps the load phase short under valgrind (about 50x slower).
set -euo pipefail
BIN=${1:?usage: $0 BIN WORKLOAD [MEMORY]}
W=${2:?usage: $0 BIN WORKLOAD [MEMORY]}
M=${3:-16M}
if ! command -v valgrind >/dev/null; then
    apt-get install -y valgrind >/dev/null
fi
OUT=$(mktemp /tmp/callgrind.XXXXXX)
trap 'rm -f "$OUT"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$OUT" \
    --toggle-collect='*engine_bench::measure*' \
    "$BIN" bench engine --workload "$W" --memory "$M" --seconds 3 --runs 1 --json >/dev/null 2>&1
# The engine's execute is called once per batch from `measure`.
read -r EXEC BATCHES < <(callgrind_annotate --inclusive=yes --tree=calling "$OUT" 2>/dev/null |
    grep -A40 '\* .*engine_bench::measure ' |
    sed -n 's/^ *\([0-9,]*\) .*\(execute[a-z_]*\) (\([0-9,]*\)x).*/\1 \3/p' | head -1 | tr -d ,)
TOTAL=$(callgrind_annotate "$OUT" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
BATCH=1024
OPS=$((BATCHES * BATCH))
awk -v t="$TOTAL" -v e="$EXEC" -v n="$OPS" -v b="$BATCHES" \
    'BEGIN { printf "instructions per op: %.1f in the measured loop, %.1f in execute (%d batches of 1024)\n", t / n, e / n, b }'
callgrind_annotate --auto=yes --show-percs=no --context=0 "$OUT" 2>/dev/null |
    awk -v n="$OPS" '$1 ~ /^[0-9,]+$/ && $0 !~ /PROGRAM|=>|events annotated|\.(rs|S|c):[a-zA-Z_<]/ {
        c = $1; gsub(",", "", c); if (c / n >= 2) printf "%7.1f  %s\n", c / n, substr($0, index($0, $2)) }' |
    sort -rn | head -${TOP:-25}
