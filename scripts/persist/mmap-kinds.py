#!/usr/bin/env python3
"""fdatasync after a store through a shared mapping or a pwrite(2), into fallocated or written
blocks (issue 22, BENCHMARKS "Session 19"); prints rounds/s, us each, CPU and page faults per round.

    python3 scripts/persist/mmap-kinds.py DIR SECONDS BYTES
"""
import os, sys, time, tempfile, mmap, resource
d=sys.argv[1]; secs=float(sys.argv[2]); size=int(sys.argv[3])
def run(kind):
    fd,p=tempfile.mkstemp(dir=d,prefix="mk-")
    N=64<<20
    if kind.startswith("written"): os.write(fd,b"\0"*N); os.fsync(fd)
    else: os.posix_fallocate(fd,0,N); os.fsync(fd)
    m=mmap.mmap(fd,N)
    buf=b"x"*size; o=0; n=0
    if kind.endswith("pwrite"): m=None
    r0=resource.getrusage(resource.RUSAGE_SELF)
    t0=time.monotonic()
    while time.monotonic()-t0<secs and o+size<N:
        if m is None: os.pwrite(fd,buf,o)
        else: m[o:o+size]=buf
        o+=size
        os.fdatasync(fd); n+=1
    el=time.monotonic()-t0; r1=resource.getrusage(resource.RUSAGE_SELF)
    cpu=(r1.ru_utime-r0.ru_utime)+(r1.ru_stime-r0.ru_stime)
    print(f"{kind:16s}: {n/el:6.0f} rounds/s, {el/n*1e6:4.0f} us each, CPU {cpu/n*1e6:3.0f} us, faults {(r1.ru_minflt-r0.ru_minflt)/n:.2f}/round")
    if m is not None: m.close()
    os.close(fd); os.unlink(p)
for k in ["fallocated-mmap","written-mmap","fallocated-pwrite","written-pwrite","fallocated-mmap","written-mmap"]: run(k)
