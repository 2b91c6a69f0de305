#!/usr/bin/env bash
# Instructions per operation counted by callgrind: exact and repeatable, unlike timings on a
# shared, noisy machine. Use it to compare the CPU work of two builds of a data path; it does
# not see memory stalls, so confirm a change with timed alternating pairs as well.
#
#   scripts/instructions-per-op.sh BIN WORKLOAD [MEMORY]     e.g. target/release/directkv get 16M
#   scripts/instructions-per-op.sh BIN server-resp|server-native|server-memcache [LOADGEN]
#
# Engine workloads: prints instructions per operation in the whole measured loop of
# `directkv bench engine` (benchmark included) and in the engine's execute, then the source lines
# costing the most instructions per operation. The 16 MiB default keeps the load phase short
# under valgrind (about 50x slower).
#
# Server modes: runs `BIN serve` (one shard, no busy polling) under callgrind, loads 100,000
# keys with LOADGEN (default: BIN) `bench run`, zeroes the counters, drives the RESP or native
# path (server-memcache: the memcached port, loaded and driven by the memcached driver) for 5 s
# after 1 s of warm-up (ycsb-b, 4 connections, depth 64), dumps, and prints the
# whole server process's instructions divided by the operations its engines ran in that window
# (INFO engine_ops; KEEP=FILE keeps the callgrind dump). The figure includes the wake-ups
# between requests, which depend on how busy the machine is: compare builds in alternating runs.
# WORKLOAD=ycsb-a for another mix; APPENDONLY=yes (APPENDFSYNC=...) with persistence on.
set -euo pipefail
if ! command -v valgrind >/dev/null; then
    apt-get install -y valgrind >/dev/null
fi
case "${2:-}" in
server-resp | server-native | server-memcache)
    BIN=$1
    LOADGEN=${3:-$BIN}
    SCHEME=${2#server-}
    DIR=$(mktemp -d /tmp/callgrind-server.XXXXXX)
    # Free ports for TCP and UDP alike (the server binds both), chosen by the kernel: the RESP
    # port (INFO is read there in every mode) and the memcached port.
    read -r PORT MC_PORT < <(python3 -c 'import socket
a, b = socket.socket(), socket.socket()
a.bind(("127.0.0.1", 0)); b.bind(("127.0.0.1", 0))
print(a.getsockname()[1], b.getsockname()[1])')
    TARGET_PORT=$PORT
    if [ "$SCHEME" = memcache ]; then TARGET_PORT=$MC_PORT; fi
    # Persistence (a build that has it): off unless APPENDONLY=yes (APPENDFSYNC=always|
    # everysec|no), its files in the temporary directory.
    PERSIST=()
    if "$BIN" serve --help | grep -q -- --appendonly; then
        PERSIST=(--dir "$DIR/data" --appendonly "${APPENDONLY:-no}" --appendfsync "${APPENDFSYNC:-everysec}")
    fi
    valgrind --tool=callgrind --callgrind-out-file="$DIR/callgrind.out" \
        "$BIN" serve --shards 1 --memory 64M --kv-size 16 --busy-poll-us 0 --port "$PORT" \
        --memcache-port "$MC_PORT" --metrics-port 0 --no-ocsm "${PERSIST[@]}" >"$DIR/server.log" 2>&1 &
    SERVER=$!
    trap 'kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; rm -rf "$DIR"' EXIT
    for _ in $(seq 600); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$TARGET_PORT") 2>/dev/null; then break; fi
        sleep 0.1
    done
    # Operations the server's engines ran so far (INFO engine_ops, over RESP), so the count
    # matches the instructions' window exactly (the load generator's own count leaves out its
    # warm-up).
    engine_ops() {
        python3 - "$PORT" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"*1\r\n$4\r\nINFO\r\n")
buf = b""
while True:
    buf += s.recv(65536)
    head, _, rest = buf.partition(b"\r\n")
    if rest and len(rest) >= int(head[1:]):
        break
for line in rest.decode().split("\r\n"):
    if line.startswith("engine_ops:"):
        print(line.split(":")[1])
PY
    }
    LOAD=(--target "$SCHEME://127.0.0.1:$TARGET_PORT" --workload "${WORKLOAD:-ycsb-b}" --keys 100000 --connections 4 --depth 64 --no-busy-poll --json)
    "$LOADGEN" bench run "${LOAD[@]}" --seconds 1 >/dev/null
    callgrind_control --zero "$SERVER" >/dev/null
    BEFORE=$(engine_ops)
    "$LOADGEN" bench run "${LOAD[@]}" --seconds 5 --skip-load >/dev/null
    AFTER=$(engine_ops)
    callgrind_control --dump=measured "$SERVER" >/dev/null
    OPS=$((AFTER - BEFORE))
    DUMP=$(ls -t "$DIR"/callgrind.out.* | head -1)
    # KEEP=FILE keeps the dump, for callgrind_annotate.
    if [ -n "${KEEP:-}" ]; then cp "$DUMP" "$KEEP"; fi
    TOTAL=$(callgrind_annotate "$DUMP" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
    awk -v t="$TOTAL" -v n="$OPS" -v s="$SCHEME" \
        'BEGIN { printf "server instructions per op (%s): %.1f (%d instructions, %d ops)\n", s, t / n, t, n }'
    exit 0
    ;;
esac
BIN=${1:?usage: $0 BIN WORKLOAD [MEMORY]}
W=${2:?usage: $0 BIN WORKLOAD [MEMORY]}
M=${3:-16M}
OUT=$(mktemp /tmp/callgrind.XXXXXX)
trap 'rm -f "$OUT"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$OUT" \
    --toggle-collect='*engine_bench::measure*' --toggle-collect='*engine::run::measure*' \
    "$BIN" bench engine --workload "$W" --memory "$M" --seconds 3 --runs 1 --json >/dev/null 2>&1
# The engine's execute is called once per batch from `measure` (`engine::run::measure` since
# issue 18's restructure, `engine_bench::measure` before: both, so older builds still compare).
read -r EXEC BATCHES < <(callgrind_annotate --inclusive=yes --tree=calling "$OUT" 2>/dev/null |
    grep -E -A40 '\* .*(engine_bench|engine::run)::measure ' |
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
