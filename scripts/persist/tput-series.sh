#!/usr/bin/env bash
# throughput time series (INFO every 100 ms) during an everysec run, split by snapshot_in_progress
BIN=${BIN:-target/release/directkv}
D=$(mktemp -d /tmp/ts.XXXX); PORT=$((20000 + RANDOM % 10000))
taskset -c 1 $BIN serve --port $PORT --memcache-port 0 --ocsm no --udp no --shards 1 ${SIZING:---memory 268435456} --appendonly ${AO:-yes} --appendfsync everysec --dir $D $EXTRA >/tmp/ts-serve.log 2>&1 &
PID=$!; sleep 0.7
taskset -c 0 $BIN bench run --target resp://127.0.0.1:$PORT --workload ycsb-a --keys 1000000 --connections 4 --depth 64 --seconds 1 --warmup 0 --json > /dev/null
(taskset -c 0 $BIN bench run --target resp://127.0.0.1:$PORT --workload ycsb-a --keys 1000000 --connections 4 --depth 64 --seconds ${SECS:-8} --warmup 0 --skip-load --json >/dev/null &)
sleep 0.5
taskset -c 0 python3 - $PORT <<'PY'
import socket, sys, time
s=socket.create_connection(("127.0.0.1", int(sys.argv[1])))
def info():
    s.sendall(b"INFO all\r\n"); buf=b""
    while True:
        buf+=s.recv(65536)
        if buf.startswith(b"$"):
            n=int(buf[1:buf.index(b"\r\n")]); hdr=buf.index(b"\r\n")+2
            if len(buf)>=hdr+n+2: break
    d={}
    for l in buf[hdr:hdr+n].decode().split("\r\n"):
        if ":" in l: k,v=l.split(":",1); d[k]=v
    return d
prev=info(); pt=time.monotonic(); on=[]; off=[]
for i in range(60):
    time.sleep(0.1)
    d=info(); t=time.monotonic()
    rate=(int(d["total_commands_processed"])-int(prev["total_commands_processed"]))/(t-pt)
    snap=int(d.get("snapshot_in_progress",0)) or int(prev.get("snapshot_in_progress",0))
    (on if snap else off).append(rate)
    prev=d; pt=t
import statistics as st
print("snapshot on: n=%d median %.0fk   off: n=%d median %.0fk" % (len(on), st.median(on)/1e3 if on else 0, len(off), st.median(off)/1e3 if off else 0))
PY
sleep 2; kill $PID; wait $PID; rm -rf $D
