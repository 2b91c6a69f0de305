#!/usr/bin/env bash
# The soak of issue 19 ("How it is checked"), outside CI's time budget: builds directkv, starts
# one `directkv serve` with a modest arena, a password (for the attacks before and after AUTH)
# and native UDP + OCSM on (for the datagram attacks), runs `directkv bench soak` against it
# (every hostile client at once while well-behaved clients measure PING/GET latency and check
# that no acknowledged write is lost), and stops the server by its PID.
#
#   bash scripts/soak.sh                  ten minutes (DURATION=600s)
#   DURATION=2m bash scripts/soak.sh --json
#
# Exits non-zero when a criterion fails (0 panics, server RSS <= arena + 256 MiB at every
# 100 ms sample, well-behaved p99 <= 10 ms, no acknowledged write lost); the report names it.
# Settings: DURATION, ARENA (256M), PORT (7390), OCSM_PORT (7391), PASSWORD (soakpw),
# FLOOD (connections the flood holds, 10000); extra arguments go to `bench soak`.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-600s}
ARENA=${ARENA:-256M}
PORT=${PORT:-7390}
OCSM_PORT=${OCSM_PORT:-7391}
PASSWORD=${PASSWORD:-soakpw}
FLOOD=${FLOOD:-10000}
LOG=${LOG:-$(mktemp -t directkv-soak-server.XXXXXX.log)}

cargo build --release -p directkv
BIN=./target/release/directkv

# The flood holds FLOOD connections and the server one descriptor per connection: raise the
# soft limit of both as far as the hard limit allows.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

"$BIN" serve --port "$PORT" --metrics-port 0 --memory "$ARENA" --requirepass "$PASSWORD" \
    --udp yes --ocsm yes --udp-insecure --ocsm-port "$OCSM_PORT" 2>"$LOG" &
SERVER_PID=$!
stop_server() {
    if kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
}
trap stop_server EXIT

# Ready when the port accepts a connection (polled, with a deadline).
deadline=$((SECONDS + 30))
until (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        echo "soak: the server exited at start; its log ($LOG):" >&2
        tail -20 "$LOG" >&2
        exit 1
    fi
    if ((SECONDS > deadline)); then
        echo "soak: the server did not accept connections on port $PORT within 30 s" >&2
        exit 1
    fi
    sleep 0.1
done

status=0
"$BIN" bench soak --duration "$DURATION" --target "127.0.0.1:$PORT" --server-pid "$SERVER_PID" \
    --arena "$ARENA" --password "$PASSWORD" --ocsm-port "$OCSM_PORT" \
    --flood-connections "$FLOOD" "$@" || status=$?
if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    echo "soak: the server process died during the soak; its log ($LOG):" >&2
    tail -20 "$LOG" >&2
    status=1
fi
stop_server
trap - EXIT
panicked=$(grep -c -i "panic" "$LOG" || true)
echo "soak: server log $LOG ($(wc -c <"$LOG") bytes, $panicked lines mentioning a panic)" >&2
exit "$status"
