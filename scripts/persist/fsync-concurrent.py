#!/usr/bin/env python3
"""Do concurrent fdatasyncs overlap on this disk? (issue 22, BENCHMARKS "Session 19")

    python3 scripts/persist/fsync-concurrent.py DIR SECONDS THREADS same|sep

THREADS threads each pwrite 1 KiB into a 64 MiB file written with zeros and synced beforehand
(one file for all, or one each) and fdatasync it, for SECONDS; prints fsyncs/s and the p50.
"""
import os, sys, threading, time, tempfile
d = sys.argv[1]; secs = float(sys.argv[2]); T = int(sys.argv[3]); same = sys.argv[4] == "same"
paths=[]; fds=[]
for i in range(1 if same else T):
    fd, p = tempfile.mkstemp(dir=d, prefix="fpar-")
    # preallocate and write so no extent conversion
    os.write(fd, b"\0" * (64<<20)); os.fsync(fd)
    fds.append(fd); paths.append(p)
counts=[0]*T; lat=[[] for _ in range(T)]
stop=False
lock=threading.Lock(); off=[0]
def run(i):
    fd = fds[0] if same else fds[i]
    buf = b"x"*1024
    o = i*(16<<20)
    while not stop:
        a=time.monotonic()
        os.pwrite(fd, buf, o); o += 1024
        os.fdatasync(fd)
        lat[i].append(time.monotonic()-a)
        counts[i]+=1
ths=[threading.Thread(target=run,args=(i,)) for i in range(T)]
t0=time.monotonic()
for t in ths: t.start()
time.sleep(secs); stop=True
for t in ths: t.join()
el=time.monotonic()-t0
al=sorted(x for l in lat for x in l)
print(f"T={T} {'same' if same else 'separate'}: {sum(counts)/el:.0f} fsyncs/s, p50 {al[len(al)//2]*1e6:.0f} us")
for fd,p in zip(fds,paths): os.close(fd); os.unlink(p)
