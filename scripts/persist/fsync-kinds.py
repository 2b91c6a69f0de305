#!/usr/bin/env python3
"""fdatasync after a write into blocks of each kind (issue 22, BENCHMARKS "Session 19"):
written (zeros written and synced before), fallocated (unwritten extents), truncated (a hole),
appended (the file grows).

    python3 scripts/persist/fsync-kinds.py DIR SECONDS [BYTES per round, default 4096]
"""
import os, sys, time, tempfile
d=sys.argv[1]; secs=float(sys.argv[2]); size=int(sys.argv[3]) if len(sys.argv)>3 else 4096
def run(kind):
    fd,p=tempfile.mkstemp(dir=d,prefix="fk-")
    N=256<<20
    if kind=="written": os.write(fd,b"\0"*N); os.fsync(fd)
    elif kind=="fallocated": os.posix_fallocate(fd,0,N); os.fsync(fd)
    elif kind=="truncated": os.ftruncate(fd,N); os.fsync(fd)
    buf=b"x"*size; o=0; n=0
    t0=time.monotonic(); c0=os.times()
    while time.monotonic()-t0<secs:
        if kind=="append": os.write(fd,buf)
        else: os.pwrite(fd,buf,o)
        o+=size
        os.fdatasync(fd); n+=1
    el=time.monotonic()-t0; c1=os.times()
    print(f"{kind:10s}: {n/el:6.0f} rounds/s, {el/n*1e6:4.0f} us each, CPU {((c1.user-c0.user)+(c1.system-c0.system))/n*1e6:3.0f} us (sys {(c1.system-c0.system)/n*1e6:3.0f})")
    os.close(fd); os.unlink(p)
for k in ["written","fallocated","truncated","append","written"]: run(k)
