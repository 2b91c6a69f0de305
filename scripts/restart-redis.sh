#!/usr/bin/env bash
# Restart speed of redis-server, the peer of BENCHMARKS.md "Restart": KEYS keys (default 2 M,
# `DEBUG POPULATE KEYS k 8`: keys "k:N", 8-byte values) saved to an RDB, then the server
# restarted on it RUNS times (default 3); prints each load time from its log line
# "DB loaded from disk: S seconds" and keys/s. Needs redis-server/redis-cli on PATH; uses its
# own port and a temporary directory, and stops the servers it starts by their pid.
set -euo pipefail
KEYS=${1:-2000000}
RUNS=${2:-3}
PORT=${PORT:-16479}
DIR=$(mktemp -d /tmp/restart-redis.XXXXXX)
trap 'rm -rf "$DIR"' EXIT

start() {
    redis-server --port "$PORT" --dir "$DIR" --dbfilename dump.rdb --save '' --appendonly no \
        --enable-debug-command local --logfile "$DIR/redis.log" --daemonize no &
    PID=$!
    for _ in $(seq 1 600); do
        if redis-cli -p "$PORT" PING 2>/dev/null | grep -q PONG; then return; fi
        sleep 0.05
    done
    echo "redis-server did not answer" >&2
    exit 1
}

stop() {
    redis-cli -p "$PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    wait "$PID" 2>/dev/null || true
}

start
redis-cli -p "$PORT" DEBUG POPULATE "$KEYS" k 8 >/dev/null
redis-cli -p "$PORT" SAVE >/dev/null
echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'): $(redis-cli -p "$PORT" DBSIZE) keys, RDB $(stat -c %s "$DIR/dump.rdb") bytes"
stop
for run in $(seq 1 "$RUNS"); do
    : >"$DIR/redis.log"
    start
    secs=$(grep -o 'DB loaded from disk: [0-9.]* seconds' "$DIR/redis.log" | grep -o '[0-9.]*' | head -1)
    echo "run $run: loaded in $secs s: $(echo "$KEYS / $secs / 1000000" | bc -l | cut -c1-5) M keys/s"
    stop
done
