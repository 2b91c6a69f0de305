#!/usr/bin/env python3
"""How a mapped log should put its pages ahead in the page cache (session 18): on 64 MiB of a
fallocated file in /tmp, per 4 KiB page, the store that follows included: pwrite of zeros,
MADV_POPULATE_WRITE, POSIX_FADV_WILLNEED, or pwrite + populate. Run pinned: taskset -c 1."""
import os, mmap, time, tempfile
SZ=64<<20; STEP=256<<10
def run(mode):
    path=tempfile.mktemp(dir="/tmp", prefix="pop-")
    fd=os.open(path, os.O_RDWR|os.O_CREAT, 0o600)
    os.posix_fallocate(fd, 0, SZ)
    m=mmap.mmap(fd, SZ, mmap.MAP_SHARED, mmap.PROT_READ|mmap.PROT_WRITE)
    z=bytes(STEP)
    t=time.perf_counter(); c=os.times()
    for off in range(0, SZ, STEP):
        if mode=="populate":
            m.madvise(23, off, STEP)   # MADV_POPULATE_WRITE
        elif mode=="pwrite+populate":
            os.pwrite(fd, z, off); m.madvise(23, off, STEP)
        elif mode=="fadvise":
            os.posix_fadvise(fd, off, STEP, os.POSIX_FADV_WILLNEED)
        elif mode=="fadvise+populate":
            os.posix_fadvise(fd, off, STEP, os.POSIX_FADV_WILLNEED); m.madvise(23, off, STEP)
        elif mode=="pwrite":
            os.pwrite(fd, z, off)
        # touch: store one byte per 4K page, as records would
        for p in range(off, off+STEP, 4096): m[p]=1
    el=time.perf_counter()-t; c2=os.times()
    print(f"{mode:16s} {el*1e3:7.1f} ms for 64 MiB = {el/(SZ/4096)*1e6:.2f} us/page (cpu {((c2.user-c.user)+(c2.system-c.system))/(SZ/4096)*1e6:.2f})")
    m.close(); os.close(fd); os.unlink(path)
for r in range(4):
    for mode in (["pwrite","populate","fadvise","fadvise+populate"] if r%2==0 else ["fadvise+populate","fadvise","populate","pwrite"]): run(mode)
