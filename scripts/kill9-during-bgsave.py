# kill -9 during back-to-back BGSAVEs (issue 22 item 2, session 16): a client INCRs 50 counters
# flat out and records each acknowledged value, BGSAVE every 30 ms, SIGKILL after 0.1-1.2 s,
# restart; every counter must equal its last acknowledged value or one more (an INCR applied
# and not yet answered). Usage: python kill9-during-bgsave.py BIN DIR PORT CYCLES [everysec|always|no]
# (redis-py; DIR is created). One loop at a time: servers use the default OCSM UDP port.
import os, random, signal, subprocess, sys, threading, time
import redis
BIN, D, P = sys.argv[1], sys.argv[2], int(sys.argv[3]); CYCLES = int(sys.argv[4])
policy = sys.argv[5] if len(sys.argv) > 5 else "everysec"
acked = {}
def start():
    p = subprocess.Popen([BIN, "serve", "--port", str(P), "--dir", D, "--appendonly", "yes", "--appendfsync", policy,
        "--shards", "2", "--auto-snapshot-log-bytes", "0", "--metrics", "no", "--memcache-port", "0"],
        stdout=open(D + ".log", "a"), stderr=subprocess.STDOUT)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            r = redis.Redis(port=P); r.ping(); return p, r
        except Exception: time.sleep(0.05)
    raise SystemExit("server did not start")
rng = random.Random(7)
for cycle in range(CYCLES):
    p, r = start()
    for k, v in acked.items():
        got = int(r.get(k) or 0)
        if got < v or got > v + 1:
            print(f"cycle {cycle}: {k} = {got}, acknowledged {v}"); p.kill(); sys.exit(1)
        acked[k] = got
    stop = threading.Event()
    def bg():
        rb = redis.Redis(port=P)
        while not stop.is_set():
            try: rb.bgsave()
            except Exception: pass
            time.sleep(0.03)
    t = threading.Thread(target=bg); t.start()
    def killer():
        time.sleep(rng.uniform(0.1, 1.2)); p.send_signal(signal.SIGKILL)
    threading.Thread(target=killer).start()
    try:
        while True:
            k = f"c{rng.randrange(50)}"
            v = r.incr(k)
            acked[k] = v
    except Exception:
        pass
    stop.set(); t.join(); p.wait()
print(f"{CYCLES} cycles, {len(acked)} counters, {sum(acked.values())} acknowledged INCRs, none lost")
