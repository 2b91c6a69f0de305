#!/usr/bin/env python3
"""A disk that fills up and is freed again and again (issue 22: a failed store repairs itself).

    python3 scripts/persist/full-disk-cycles.py BIN POLICY CYCLES

Mounts a 64 MiB tmpfs (root only), starts directkv with 2 shards on it, and CYCLES times: puts
a filler file on it that leaves 3 MiB free, SETs 100-byte values (pipelined 16 deep) until an error reply (or, under
`always`, the connection closed with replies that were waiting for an fdatasync), checks a
read, removes the filler and waits until INFO says the store is repaired. Then kill -9, a
restart on the same directory, and every acknowledged key must be there. Prints each cycle.
"""
import os, signal, socket, subprocess, sys, time

BIN, POLICY, CYCLES = sys.argv[1], sys.argv[2], int(sys.argv[3])
MNT = "/tmp/dkv-full-cycles"
PORT = 26100 + os.getpid() % 500
os.makedirs(MNT, exist_ok=True)
if subprocess.run(["mountpoint", "-q", MNT]).returncode != 0:
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", MNT], check=True)
subprocess.run(f"rm -rf {MNT}/*", shell=True)
DIR = f"{MNT}/d"

def start():
    p = subprocess.Popen([BIN, "serve", "--port", str(PORT), "--memcache-port", "0", "--ocsm", "no",
                          "--udp", "no", "--metrics-port", "0", "--shards", "2", "--memory", "67108864",
                          "--appendfsync", POLICY, "--dir", DIR],
                         stdout=subprocess.DEVNULL, stderr=open(f"/tmp/full-cycles-{PORT}.log", "a"))
    for _ in range(100):
        try:
            return p, socket.create_connection(("127.0.0.1", PORT))
        except OSError:
            time.sleep(0.05)
    raise SystemExit("server did not start")

def cmd(s, f, *args):
    s.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
    line = f.readline()
    if line.startswith(b"$") and line != b"$-1\r\n":
        return f.read(int(line[1:]) + 2)[:-2]
    return line

def info(s, f, field):
    text = cmd(s, f, b"INFO", b"persistence").decode()
    return next(l.split(":", 1)[1].strip() for l in text.splitlines() if l.startswith(field + ":"))

p, s = start()
f = s.makefile("rb")
acked, n = [], 0
try:
    for cycle in range(CYCLES):
        st = os.statvfs(MNT)
        with open(f"{MNT}/filler", "wb") as fl:
            fl.write(b"\0" * max(0, st.f_bavail * st.f_frsize - (3 << 20)))
        before = len(acked)
        err = None
        while err is None:
            keys = [b"k%d" % (n + i) for i in range(16)]
            n += 16
            s.sendall(b"".join(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$100\r\n%s\r\n" % (len(k), k, b"x" * 100) for k in keys))
            for k in keys:
                line = f.readline()
                if line == b"+OK\r\n":
                    acked.append(k)
                elif err is None:
                    err = line
                if line == b"":
                    break
        if err == b"":
            # Under `always`, replies still waiting for their fdatasync when the store failed
            # are never sent: the connection is closed (nothing it wrote since is acknowledged).
            s = socket.create_connection(("127.0.0.1", PORT))
            f = s.makefile("rb")
            err = cmd(s, f, b"SET", b"probe", b"v")
        assert err.startswith(b"-MISCONF"), err
        assert cmd(s, f, b"GET", acked[-1]) == b"x" * 100
        os.remove(f"{MNT}/filler")
        t = time.time()
        while info(s, f, "aof_last_write_status") != "ok":
            assert time.time() - t < 120, "not repaired in 120 s"
            time.sleep(0.05)
        print(f"cycle {cycle}: {len(acked) - before} acknowledged, then {err[:8]!r}; repaired after {time.time() - t:.1f} s (aof_repairs {info(s, f, 'aof_repairs')})", flush=True)
finally:
    p.send_signal(signal.SIGKILL)
    p.wait()
p, s = start()
f = s.makefile("rb")
missing = 0
for i in range(0, len(acked), 500):
    chunk = acked[i:i + 500]
    s.sendall(b"".join(b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(k), k) for k in chunk))
    for k in chunk:
        line = f.readline()
        if line.startswith(b"$") and line != b"$-1\r\n":
            f.read(int(line[1:]) + 2)
        else:
            missing += 1
p.terminate()
p.wait()
print(f"{POLICY}: {CYCLES} cycles, {len(acked)} acknowledged, kill -9, restart: {missing} missing")
sys.exit(1 if missing else 0)
